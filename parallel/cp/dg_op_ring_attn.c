/* dg_op_ring_attn.c — ring attention's ops and attention's CP lowering (see
 * dg_op_ring_attn.h). */
#include "dg_op_ring_attn.h"

#include <math.h>

#include "dg_collective.h"
#include "dg_cpu_ring_attn.h"
#include "dg_layout.h"
#include "dg_op_attn_key.h"
#include "dg_op_basic.h"
#include "dg_op_cp.h"
#include "dg_ops_util.h"
#include "dg_pass_cp.h"

/* ---- cp_attn_block ------------------------------------------------------------------- */

static dg_attn_dims block_dims(const dg_graph *g, const dg_node *n) {
    const dg_tensor *q = DG_IN(g, n, 0), *k = DG_IN(g, n, 1);
    return (dg_attn_dims){q->shape[0], q->shape[1], q->shape[2], k->shape[2], q->shape[3], 0,
                          (float)n->attrs.f[0], n->attrs.i[2], 0, 0, {.p = 0.0f}};
}

/* The block's dims to run with, dropout's draw included: rank input
 * {cp_rank, attention key} (dg_op_attn_key.h) when attrs f[1] = p > 0, its
 * places rank r's chunks r, 2cp-1-r for the queries and rank j's (j = r -
 * step) for the keys, of the whole sequence 2c cp (dg_cpu_ring_attn.h). */
static dg_attn_dims run_dims(const dg_graph *g, const dg_node *n, const int32_t *rank) {
    dg_attn_dims d = block_dims(g, n);
    if (!(n->attrs.f[1] > 0)) return d;
    int64_t cp = n->attrs.i[0], r = rank[0], j = ((r - n->attrs.i[1]) % cp + cp) % cp;
    d.drop = dg_attn_drop_make(rank + 1, n->attrs.i[3], n->attrs.f[1]);
    d.drop.S = d.S * cp;
    d.drop.qc = d.drop.kc = d.S / 2;
    d.drop.qa = r;
    d.drop.qb = 2 * cp - 1 - r;
    d.drop.ka = j;
    d.drop.kb = 2 * cp - 1 - j;
    return d;
}

/* q, k, v [B, 2c, H, D] agreeing as attention's; cp_rank i32 at 3 (with
 * dropout, attrs f[1] > 0, the ring's key: {cp_rank, attention key}); the
 * rest (backward) of q's shape or lse's [B, Hq, 2c]. */
static int check_block(const dg_graph *g, const dg_node *n, dg_err *err) {
    for (int i = 0; i < 3; i++) {
        DG_INFER_DTYPE(g, n, i, DG_F32, err);
        if (DG_IN(g, n, i)->ndim != 4) return DG_INFER_FAIL(err, "rule 'shape' broken: q, k, v must be [B, S, H, D]");
    }
    DG_INFER_DTYPE(g, n, 3, DG_I32, err);
    if (dg_tensor_numel(DG_IN(g, n, 3)) != (n->attrs.f[1] > 0 ? 1 + DG_ATTN_KEY_LEN : 1) ||
        !(n->attrs.f[1] >= 0 && n->attrs.f[1] < 1))
        return DG_INFER_FAIL(err, "rule 'inputs' broken: dropout %g in [0, 1) and input 3 ('%s') the cp rank, with "
                             "the attention key when dropout > 0", n->attrs.f[1], DG_IN(g, n, 3)->name);
    const dg_tensor *q = DG_IN(g, n, 0), *k = DG_IN(g, n, 1), *v = DG_IN(g, n, 2);
    char a[64], b[64];
    if (!dg_same_shape(k, v) || q->shape[0] != k->shape[0] || q->shape[1] != k->shape[1] ||
        q->shape[3] != k->shape[3] || q->shape[2] % k->shape[2] || q->shape[1] % 2)
        return DG_INFER_FAIL(err, "rule 'shape' broken: q %s and k %s must be [B, 2c, Hq, D], [B, 2c, Hkv, D]",
                             dg_shape_str(q, a), dg_shape_str(k, b));
    if (n->attrs.i[0] < 1 || n->attrs.i[1] < 0 || n->attrs.i[1] >= n->attrs.i[0] || !(n->attrs.f[0] > 0) ||
        n->attrs.i[2] < 0)
        return DG_INFER_FAIL(err, "rule 'attrs' broken: 0 <= step %lld < cp %lld, scale > 0, window %lld >= 0",
                             (long long)n->attrs.i[1], (long long)n->attrs.i[0], (long long)n->attrs.i[2]);
    return DG_OK;
}

static int infer_block(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_TRY(check_block(g, n, err));
    const dg_tensor *q = DG_IN(g, n, 0);
    dg_desc_like(&o[0], q);
    dg_desc_set(&o[1], DG_F32, 3, (int64_t[]){q->shape[0], q->shape[2], q->shape[1]});
    return DG_OK;
}

/* Step 0 is attention's causal cost over 2c; a later step two c x c blocks. */
static double block_pairs(const dg_attn_dims *d, int step) {
    double s = (double)d->S, c = s / 2;
    return (double)d->B * (double)d->Hq * (step == 0 ? s * (s + 1) / 2 : 2 * c * c);
}

static void cost_block(const dg_graph *g, const dg_node *n, dg_cost *c) {
    dg_attn_dims d = block_dims(g, n);
    c->flops = 4.0 * block_pairs(&d, (int)n->attrs.i[1]) * (double)d.D;
    c->bytes = 4.0 * (double)(d.B * d.S * d.D) * (2.0 * (double)d.Hq + 2.0 * (double)d.Hkv);
}

static size_t ws_block(const dg_graph *g, const dg_node *n, int nthreads) {
    dg_attn_dims d = block_dims(g, n);
    return dg_cpu_ring_block_fwd_workspace(&d, nthreads);
}

static int mode_of(const dg_node *n, const void *cp_rank, dg_ring_mode *m) {
    int cp = (int)n->attrs.i[0], r = *(const int32_t *)cp_rank;
    if (r < 0 || r >= cp) return DG_EINTERNAL;
    *m = dg_ring_mode_of(r, (int)n->attrs.i[1], cp);
    return DG_OK;
}

static int nthreads_of(const dg_exec_env *e) { return e->team && e->team->nthreads > 1 ? e->team->nthreads : 1; }

static int k_block(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                   void *const *out) {
    dg_attn_dims d = run_dims(g, n, in[3]);
    dg_ring_mode m;
    DG_TRY(mode_of(n, in[3], &m));
    if (e->workspace_bytes < dg_cpu_ring_block_fwd_workspace(&d, nthreads_of(e))) return DG_EINTERNAL;
    if (d.window > 0)
        dg_cpu_ring_block_fwd_window(e->team, &d, *(const int32_t *)in[3], (int)n->attrs.i[1], (int)n->attrs.i[0],
                                     in[0], in[1], in[2], out[0], out[1], e->workspace);
    else
        dg_cpu_ring_block_fwd(e->team, &d, m, in[0], in[1], in[2], out[0], out[1], e->workspace);
    return DG_OK;
}

static int adj_block(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    if (dout[0] < 0 && dout[1] < 0) return DG_OK;
    int d_o = dout[0];
    if (d_o < 0) {
        const dg_tensor *o = DG_OUT(g, n, 0);
        d_o = dg_fill(g, o->ndim, o->shape, 0.0);
    }
    int in[8] = {n->in[0], n->in[1], n->in[2], n->in[3], n->out[0], d_o, n->out[1], dout[1]};
    int outs[3] = {-1, -1, -1};
    char name[DG_NAME_LEN];
    snprintf(name, sizeof name, "%.*s_bwd", DG_NAME_LEN - 5, n->name);
    if (dg_graph_add(g, &dg_op_cp_attn_block_bwd, &n->attrs, in, dout[1] >= 0 ? 8 : 7, outs, name) < 0)
        return g->status;
    for (int i = 0; i < 3; i++) din[i] = g->tensors[n->in[i]].requires_grad ? outs[i] : -1;
    din[3] = -1;
    return g->status;
}

/* q, k, v alike (the sequence may be split, the head dim not), or k and v
 * replicated: a chunk received from a peer (recv has no layout to give);
 * lse [B, Hq, S] takes q's batch, heads and sequence splits. */
static int shard_block(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                       dg_attrs *attrs) {
    (void)g;
    (void)n;
    (void)attrs;
    for (int k = 0; k < 3; k++)
        if (in[k].partial != DG_AXIS_NONE || dg_layout_dim_split(&in[k], 3) ||
            !(dg_layout_equal(&in[k], &in[0]) || (k > 0 && dg_layout_is_replicated(&in[k]) &&
                                                  dg_layout_equal(&in[1], &in[2]))))
            return DG_SHARD_CANNOT;
    if (!dg_layout_is_replicated(&in[3])) return DG_SHARD_CANNOT;
    memset(out, 0, 2 * sizeof *out);
    out[0] = in[0];
    int from[3] = {0, 2, 1};
    for (int d = 0; d < 3; d++) {
        out[1].split[d] = in[0].split[from[d]];
        out[1].split2[d] = in[0].split2[from[d]];
    }
    return DG_OK;
}

const dg_op_def dg_op_cp_attn_block = {
    .name = "cp_attn_block", .min_inputs = 4, .max_inputs = 4, .n_outputs = 2,
    .iattr_names = {"cp", "step", "window", "site"}, .fattr_names = {"scale", "dropout"},
    .infer = infer_block, .cost = cost_block, .adjoint = adj_block, .workspace = ws_block,
    .kernel = k_block, .shard = shard_block,
    .f32_outputs = 2u /* lse */,
};

/* ---- cp_attn_block_bwd --------------------------------------------------------------- */

static int infer_block_bwd(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_TRY(check_block(g, n, err));
    const dg_tensor *q = DG_IN(g, n, 0);
    for (int i = 4; i < n->n_in; i++) {
        DG_INFER_DTYPE(g, n, i, DG_F32, err);
        const dg_tensor *t = DG_IN(g, n, i);
        int is_lse = i >= 6;
        int ok = is_lse ? t->ndim == 3 && t->shape[0] == q->shape[0] && t->shape[1] == q->shape[2] &&
                              t->shape[2] == q->shape[1]
                        : dg_same_shape(t, q);
        if (!ok) return DG_INFER_FAIL(err, "rule 'shape' broken: input %d ('%s') of the wrong shape", i, t->name);
    }
    for (int i = 0; i < 3; i++) dg_desc_like(&o[i], DG_IN(g, n, i));
    return DG_OK;
}

static void cost_block_bwd(const dg_graph *g, const dg_node *n, dg_cost *c) {
    cost_block(g, n, c);
    c->flops *= 3.5; /* attention_bwd's 14 D per pair */
    c->bytes *= 2.0;
}

static size_t ws_block_bwd(const dg_graph *g, const dg_node *n, int nthreads) {
    dg_attn_dims d = block_dims(g, n);
    return dg_cpu_ring_block_bwd_workspace(&d, nthreads);
}

static int k_block_bwd(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                       void *const *out) {
    dg_attn_dims d = run_dims(g, n, in[3]);
    dg_ring_mode m;
    DG_TRY(mode_of(n, in[3], &m));
    if (e->workspace_bytes < dg_cpu_ring_block_bwd_workspace(&d, nthreads_of(e))) return DG_EINTERNAL;
    if (d.window > 0) {
        dg_cpu_ring_block_bwd_window(e->team, &d, *(const int32_t *)in[3], (int)n->attrs.i[1], (int)n->attrs.i[0],
                                     in[0], in[1], in[2], in[4], in[5], in[6], n->n_in > 7 ? in[7] : NULL, out[0],
                                     out[1], out[2], e->workspace);
        return DG_OK;
    }
    dg_cpu_ring_block_bwd(e->team, &d, m, in[0], in[1], in[2], in[4], in[5], in[6], n->n_in > 7 ? in[7] : NULL,
                          out[0], out[1], out[2], e->workspace);
    return DG_OK;
}

const dg_op_def dg_op_cp_attn_block_bwd = {
    .name = "cp_attn_block_bwd", .min_inputs = 7, .max_inputs = 8, .n_outputs = 3,
    .iattr_names = {"cp", "step", "window", "site"}, .fattr_names = {"scale", "dropout"},
    .infer = infer_block_bwd, .cost = cost_block_bwd, .workspace = ws_block_bwd,
    .kernel = k_block_bwd,
};

/* ---- lse_merge ------------------------------------------------------------------------ */

/* o's at even inputs [B, S, H, D], l's at odd ones [B, H, S]. */
static int check_merge(const dg_graph *g, const dg_node *n, int n_pairs, dg_err *err) {
    const dg_tensor *o = DG_IN(g, n, 0), *l = DG_IN(g, n, 1);
    if (o->ndim != 4 || l->ndim != 3 || l->shape[0] != o->shape[0] || l->shape[1] != o->shape[2] ||
        l->shape[2] != o->shape[1])
        return DG_INFER_FAIL(err, "rule 'shape' broken: o must be [B, S, H, D] and lse [B, H, S]");
    for (int i = 0; i < 2 * n_pairs && i < n->n_in; i++) {
        DG_INFER_DTYPE(g, n, i, DG_F32, err);
        if (!dg_same_shape(DG_IN(g, n, i), i % 2 ? l : o))
            return DG_INFER_FAIL(err, "rule 'shape' broken: input %d ('%s') differs from %s", i,
                                 DG_IN(g, n, i)->name, i % 2 ? "lse" : "o");
    }
    return DG_OK;
}

static int infer_merge(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_TRY(check_merge(g, n, 2, err));
    dg_desc_like(&o[0], DG_IN(g, n, 0));
    dg_desc_like(&o[1], DG_IN(g, n, 1));
    return DG_OK;
}

static void cost_merge(const dg_graph *g, const dg_node *n, dg_cost *c) {
    double e = (double)dg_tensor_numel(DG_IN(g, n, 0));
    c->flops = 3.0 * e;
    c->bytes = 12.0 * e;
}

static int k_merge(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                   void *const *out) {
    (void)e;
    const dg_tensor *o = DG_IN(g, n, 0);
    dg_cpu_lse_merge_fwd(o->shape[0], o->shape[1], o->shape[2], o->shape[3], in[0], in[1], in[2], in[3],
                         out[0], out[1]);
    return DG_OK;
}

static int adj_merge(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    if (dout[0] < 0 && dout[1] < 0) return DG_OK;
    int d_o = dout[0];
    if (d_o < 0) {
        const dg_tensor *o = DG_OUT(g, n, 0);
        d_o = dg_fill(g, o->ndim, o->shape, 0.0);
    }
    int in[8] = {n->in[0], n->in[1], n->in[2], n->in[3], n->out[0], n->out[1], d_o, dout[1]};
    int outs[4] = {-1, -1, -1, -1};
    if (dg_graph_add(g, &dg_op_lse_merge_bwd, NULL, in, dout[1] >= 0 ? 8 : 7, outs, NULL) < 0) return g->status;
    for (int i = 0; i < 4; i++) din[i] = g->tensors[n->in[i]].requires_grad ? outs[i] : -1;
    return g->status;
}

static int shard_merge(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                       dg_attrs *attrs) {
    (void)g;
    (void)n;
    (void)attrs;
    for (int k = 0; k < 4; k++)
        if (in[k].partial != DG_AXIS_NONE || !dg_layout_equal(&in[k], &in[k % 2])) return DG_SHARD_CANNOT;
    out[0] = in[0];
    out[1] = in[1];
    return DG_OK;
}

const dg_op_def dg_op_lse_merge = {
    .name = "lse_merge", .min_inputs = 4, .max_inputs = 4, .n_outputs = 2,
    .infer = infer_merge, .cost = cost_merge, .adjoint = adj_merge, .kernel = k_merge,
    .shard = shard_merge,
    .f32_outputs = 2u /* lse */,
};

static int infer_merge_bwd(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_TRY(check_merge(g, n, 3, err));
    const dg_tensor *d = DG_IN(g, n, 6);
    DG_INFER_DTYPE(g, n, 6, DG_F32, err);
    if (!dg_same_shape(d, DG_IN(g, n, 0))) return DG_INFER_FAIL(err, "rule 'shape' broken: do differs from o");
    if (n->n_in > 7 && !dg_same_shape(DG_IN(g, n, 7), DG_IN(g, n, 1)))
        return DG_INFER_FAIL(err, "rule 'shape' broken: dl differs from lse");
    for (int i = 0; i < 4; i++) dg_desc_like(&o[i], DG_IN(g, n, i));
    return DG_OK;
}

static int k_merge_bwd(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                       void *const *out) {
    (void)e;
    const dg_tensor *o = DG_IN(g, n, 0);
    dg_cpu_lse_merge_bwd(o->shape[0], o->shape[1], o->shape[2], o->shape[3], in[0], in[1], in[2], in[3], in[4],
                         in[5], in[6], n->n_in > 7 ? in[7] : NULL, out[0], out[1], out[2], out[3]);
    return DG_OK;
}

const dg_op_def dg_op_lse_merge_bwd = {
    .name = "lse_merge_bwd", .min_inputs = 7, .max_inputs = 8, .n_outputs = 4,
    .infer = infer_merge_bwd, .cost = cost_merge, .kernel = k_merge_bwd,
    .f32_outputs = 10u /* dl1, dl2: lse's gradients */,
};

/* ---- the ring's send/recv ------------------------------------------------------------ */

/* x's copy from rank -1 (this rank's x goes to +1): send, then recv, which
 * dg_pass_cp_order keeps in that order on the comm stream. */
static int ring_shift(dg_graph *g, int x, int cp) {
    if (x < 0 || dg_send(g, x, DG_AXIS_CP, cp, +1) < 0) return -1;
    dg_tensor t = g->tensors[x];
    return dg_recv(g, DG_AXIS_CP, cp, -1, t.dtype, t.ndim, t.shape);
}

static int block(dg_graph *g, int q, int k, int v, int rank, int cp, int step, const dg_attn_opts *opt,
                 int *lse) {
    dg_attrs a = dg_attrs_zero();
    a.i[0] = cp;
    a.i[1] = step;
    a.i[2] = opt->window;
    a.i[3] = opt->dropout > 0 ? opt->site : 0;
    a.f[0] = opt->scale;
    a.f[1] = opt->dropout > 0 ? opt->dropout : 0.0;
    int outs[2] = {-1, -1};
    char name[DG_NAME_LEN];
    snprintf(name, sizeof name, "attention.block%d", step % 1000);
    int o = dg_graph_add(g, &dg_op_cp_attn_block, &a, (int[]){q, k, v, rank}, 4, outs, name);
    *lse = outs[1];
    return o;
}

/* ---- cp_ring_attn_out ----------------------------------------------------------------- */

static int infer_out(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_TRY(check_merge(g, n, 1, err));
    DG_INFER_DTYPE(g, n, 5, DG_I32, err);
    if (n->attrs.i[0] < 1 || !(n->attrs.f[0] > 0))
        return DG_INFER_FAIL(err, "rule 'attrs' broken: cp %lld >= 1 and scale > 0", (long long)n->attrs.i[0]);
    dg_desc_like(&o[0], DG_IN(g, n, 0));
    dg_desc_like(&o[1], DG_IN(g, n, 1));
    return DG_OK;
}

static void cost_out(const dg_graph *g, const dg_node *n, dg_cost *c) {
    c->flops = 0;
    c->bytes = 8.0 * (double)(dg_tensor_numel(DG_IN(g, n, 0)) + dg_tensor_numel(DG_IN(g, n, 1)));
}

static int k_out(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                 void *const *out) {
    (void)e;
    for (int j = 0; j < 2; j++) /* f32 buffers (dg_kernel_call.h) */
        memcpy(out[j], in[j], sizeof(float) * (size_t)dg_tensor_numel(DG_IN(g, n, j)));
    return DG_OK;
}

/* One block's gradients from the final (o, lse): flash attention's tiling
 * identity, so no step's partial result is kept for the backward. */
static int block_bwd(dg_graph *g, const dg_node *n, int k, int v, int step, int d_o, int dl, int *dq,
                     int *dk, int *dv) {
    dg_attrs a = dg_attrs_zero();
    a.i[0] = n->attrs.i[0];
    a.i[1] = step;
    a.i[2] = n->attrs.i[1]; /* the window */
    a.i[3] = n->attrs.i[2]; /* dropout's site and p */
    a.f[0] = n->attrs.f[0];
    a.f[1] = n->attrs.f[1];
    int in[8] = {n->in[2], k, v, n->in[5], n->out[0], d_o, n->out[1], dl};
    int outs[3] = {-1, -1, -1};
    char name[DG_NAME_LEN];
    snprintf(name, sizeof name, "attention.block%d_bwd", step % 1000);
    dg_graph_add(g, &dg_op_cp_attn_block_bwd, &a, in, dl >= 0 ? 8 : 7, outs, name);
    *dq = outs[0];
    *dk = outs[1];
    *dv = outs[2];
    return g->status;
}

/* The backward ring: K/V travel it again (nothing received in the forward
 * is kept), each with the sum of the gradients the ranks it visited gave
 * it; a last hop takes each sum home. */
static int adj_out(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    for (int i = 0; i < 6; i++) din[i] = -1;
    if (dout[0] < 0 && dout[1] < 0) return DG_OK;
    int cp = (int)n->attrs.i[0], d_o = dout[0];
    if (d_o < 0) d_o = dg_fill(g, DG_OUT(g, n, 0)->ndim, DG_OUT(g, n, 0)->shape, 0.0);
    int kk = n->in[3], vv = n->in[4], dq, dk, dv;
    DG_TRY(block_bwd(g, n, kk, vv, 0, d_o, dout[1], &dq, &dk, &dv));
    for (int s = 1; s < cp; s++) {
        kk = ring_shift(g, kk, cp);
        vv = ring_shift(g, vv, cp);
        dk = ring_shift(g, dk, cp);
        dv = ring_shift(g, dv, cp);
        int dqs, dks, dvs;
        DG_TRY(block_bwd(g, n, kk, vv, s, d_o, dout[1], &dqs, &dks, &dvs));
        dq = dg_add(g, dq, dqs);
        dk = dg_add(g, dk, dks);
        dv = dg_add(g, dv, dvs);
    }
    if (cp > 1) {
        dk = ring_shift(g, dk, cp);
        dv = ring_shift(g, dv, cp);
    }
    din[2] = dq;
    din[3] = dk;
    din[4] = dv;
    return g->status;
}

static int shard_out(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                     dg_attrs *attrs) {
    (void)g;
    (void)n;
    (void)attrs;
    if (in[0].partial != DG_AXIS_NONE || in[1].partial != DG_AXIS_NONE) return DG_SHARD_CANNOT;
    out[0] = in[0];
    out[1] = in[1];
    return DG_OK;
}

const dg_op_def dg_op_cp_ring_attn_out = {
    .name = "cp_ring_attn_out", .min_inputs = 6, .max_inputs = 6, .n_outputs = 2,
    .iattr_names = {"cp", "window", "site"}, .fattr_names = {"scale", "dropout"},
    .infer = infer_out, .cost = cost_out, .adjoint = adj_out, .kernel = k_out, .shard = shard_out,
    .f32_outputs = 2u /* lse */,
};

/* ---- the ring ------------------------------------------------------------------------- */

int dg_ring_attention(dg_graph *g, int q, int k, int v, int cp, const dg_attn_opts *opt, int *lse_out) {
    if (g->status != DG_OK) return -1;
    dg_attn_opts ro = *opt;
    if (ro.scale <= 0.0 && q >= 0 && q < g->n_tensors && g->tensors[q].ndim == 4)
        ro.scale = 1.0 / sqrt((double)g->tensors[q].shape[3]);
    int rank = dg_mesh_coord_input(g, DG_AXIS_CP), l = -1;
    if (ro.dropout > 0 && rank >= 0) rank = dg_attn_ring_key(g, ro.key, rank); /* {cp_rank, key} */
    int o = block(g, q, k, v, rank, cp, 0, &ro, &l);
    int kk = k, vv = v;
    for (int s = 1; s < cp && o >= 0; s++) {
        kk = ring_shift(g, kk, cp);
        vv = ring_shift(g, vv, cp);
        int ls = -1, os = block(g, q, kk, vv, rank, cp, s, &ro, &ls);
        int outs[2] = {-1, -1};
        if (os < 0 || dg_graph_add(g, &dg_op_lse_merge, NULL, (int[]){o, l, os, ls}, 4, outs, "attention.merge") < 0)
            return -1;
        o = outs[0];
        l = outs[1];
    }
    if (o < 0) return -1;
    dg_attrs a = dg_attrs_zero();
    a.i[0] = cp;
    a.i[1] = ro.window;
    a.i[2] = ro.dropout > 0 ? ro.site : 0;
    a.f[0] = ro.scale;
    a.f[1] = ro.dropout > 0 ? ro.dropout : 0.0;
    int outs[2] = {-1, -1};
    if (dg_graph_add(g, &dg_op_cp_ring_attn_out, &a, (int[]){o, l, q, k, v, rank}, 6, outs, "attention") < 0)
        return -1;
    if (lse_out) *lse_out = outs[1];
    return outs[0];
}
