/* dg_op_cp.c — positions, the loss as sum and count, and the CP lowerings
 * of rope, pos_embed_add and softmax_xent (see dg_op_cp.h). */
#include "dg_op_cp.h"

#include <math.h>

#include "dg_cpu_rope.h"
#include "dg_cpu_xent.h"
#include "dg_layout.h"
#include "dg_op_basic.h"
#include "dg_op_rope.h"
#include "dg_op_xent.h"
#include "dg_ops_util.h"
#include "dg_pass_cp.h"

static void cost_none(const dg_graph *g, const dg_node *n, dg_cost *c) {
    c->flops = 0;
    c->bytes = 4.0 * (double)dg_tensor_numel(DG_OUT(g, n, 0));
}

/* ---- cp_positions ------------------------------------------------------------------ */

static int infer_pos(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_I32, err);
    int64_t cp = n->attrs.i[0], S = n->attrs.i[1];
    if (cp < 1 || S < 2 || S % 2 || n->attrs.i[2] < 0)
        return DG_INFER_FAIL(err, "rule 'attrs' broken: cp %lld >= 1 and an even S %lld expected",
                             (long long)cp, (long long)S);
    dg_desc_set(o, DG_I32, 1, (int64_t[]){S});
    return DG_OK;
}

static int k_pos(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                 void *const *out) {
    (void)e;
    (void)g;
    int cp = (int)n->attrs.i[0], r = *(const int32_t *)in[0];
    int64_t S = n->attrs.i[1], c = S / 2;
    if (r < 0 || r >= cp) return DG_EINTERNAL;
    int32_t *pos = out[0];
    for (int64_t s = 0; s < S; s++) pos[s] = (int32_t)(dg_layout_cp_position(s, c, r, cp) + n->attrs.i[2]);
    return DG_OK;
}

static int shard_pos(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                     dg_attrs *attrs) {
    (void)g;
    (void)n;
    (void)attrs;
    if (!dg_layout_is_replicated(&in[0])) return DG_SHARD_CANNOT;
    memset(out, 0, sizeof *out);
    out[0].split[0] = DG_AXIS_CP;
    return DG_OK;
}

const dg_op_def dg_op_cp_positions = {
    .name = "cp_positions", .min_inputs = 1, .max_inputs = 1, .n_outputs = 1,
    .iattr_names = {"cp", "tokens", "offset"},
    .infer = infer_pos, .cost = cost_none, .kernel = k_pos, .shard = shard_pos,
};

int dg_cp_positions(dg_graph *g, int cp, int64_t S, int64_t offset) {
    for (int i = 0; i < g->n_nodes; i++) {
        const dg_node *n = &g->nodes[i];
        if (n->op == &dg_op_cp_positions && n->attrs.i[1] == S && n->attrs.i[2] == offset &&
            n->microbatch == g->cur_microbatch)
            return n->out[0];
    }
    dg_attrs a = dg_attrs_zero();
    a.i[0] = cp;
    a.i[1] = S;
    a.i[2] = offset;
    int r = dg_mesh_coord_input(g, DG_AXIS_CP);
    return dg_add1(g, &dg_op_cp_positions, &a, &r, 1, "cp/positions");
}

/* ---- rope_pos ------------------------------------------------------------------------ */

static int infer_rope_pos(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    DG_INFER_DTYPE(g, n, 1, DG_I32, err);
    const dg_tensor *x = DG_IN(g, n, 0), *p = DG_IN(g, n, 1);
    char s[64], u[64];
    int64_t R = n->attrs.i[2];
    if (x->ndim != 4 || x->shape[3] % 2 || p->ndim != 1 || p->shape[0] != x->shape[1])
        return DG_INFER_FAIL(err, "rule 'shape' broken: x %s must be [B, S, heads, even head_dim], pos %s [S]",
                             dg_shape_str(x, s), dg_shape_str(p, u));
    if (R < 0 || R > x->shape[3] || R % 2 || !(n->attrs.f[0] > 0))
        return DG_INFER_FAIL(err, "rule 'attrs' broken: rotary_dim %lld even in [0, D], base > 0",
                             (long long)R);
    dg_desc_like(o, x);
    return DG_OK;
}

static size_t ws_rope_pos(const dg_graph *g, const dg_node *n, int nthreads) {
    (void)nthreads;
    const dg_tensor *x = DG_IN(g, n, 0);
    return sizeof(float) * (size_t)(x->shape[1] * x->shape[3]);
}

static void cost_rope_pos(const dg_graph *g, const dg_node *n, dg_cost *c) {
    double e = (double)dg_tensor_numel(DG_IN(g, n, 0));
    c->flops = 3.0 * e;
    c->bytes = 8.0 * e;
}

static int k_rope_pos(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                      void *const *out) {
    const dg_tensor *x = DG_IN(g, n, 0);
    int64_t B = x->shape[0], S = x->shape[1], NH = x->shape[2], D = x->shape[3];
    int64_t R = n->attrs.i[2] > 0 ? n->attrs.i[2] : D, half = R / 2;
    if (e->workspace_bytes < ws_rope_pos(g, n, 1)) return DG_EINTERNAL;
    float *cos_t = e->workspace, *sin_t = cos_t + S * half;
    const int32_t *pos = in[1];
    dg_rope_spec spec = dg_rope_spec_of(&n->attrs); /* rope's attrs, YaRN's included */
    for (int64_t s = 0; s < S; s++) /* rope's tables (dg_cpu_rope.c), one position a row */
        for (int64_t i = 0; i < half; i++) dg_rope_cos_sin(&spec, pos[s], i, R, &cos_t[s * half + i], &sin_t[s * half + i]);
    dg_cpu_rope_apply2(e->team, in[0], out[0], cos_t, sin_t, B, S, NH, D, R, (int)n->attrs.i[1], (int)n->attrs.i[4]);
    return DG_OK;
}

static int rope_pos_node(dg_graph *g, int x, int pos, const dg_attrs *a0, int inverse, const char *name) {
    dg_attrs a = *a0;
    a.i[1] = inverse;
    return dg_add1(g, &dg_op_rope_pos, &a, (int[]){x, pos}, 2, name);
}

static int adj_rope_pos(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    din[0] = rope_pos_node(g, dout[0], n->in[1], &n->attrs, !n->attrs.i[1], NULL);
    din[1] = -1;
    return g->status;
}

/* x [B, S, H(, D)] split like pos on S; the last dim whole. */
static int shard_by_pos(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                        int pos_at) {
    int last = g->tensors[n->in[0]].ndim - 1;
    if (in[0].partial != DG_AXIS_NONE || dg_layout_dim_split(&in[0], last) ||
        in[0].split[1] != in[pos_at].split[0] || in[0].split2[1] != in[pos_at].split2[0])
        return DG_SHARD_CANNOT;
    out[0] = in[0];
    return DG_OK;
}

static int shard_rope_pos(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                          dg_attrs *attrs) {
    (void)attrs;
    return shard_by_pos(g, n, in, out, 1);
}

const dg_op_def dg_op_rope_pos = {
    .name = "rope_pos", .min_inputs = 2, .max_inputs = 2, .n_outputs = 1,
    .iattr_names = {"unused", "inverse", "rotary_dim", "yarn_original_max_pos", "interleaved", "yarn_unrounded"},
    .fattr_names = {"base", "yarn_factor", "yarn_beta_fast", "yarn_beta_slow", "yarn_mscale"},
    .infer = infer_rope_pos, .cost = cost_rope_pos, .adjoint = adj_rope_pos, .workspace = ws_rope_pos,
    .kernel = k_rope_pos, .shard = shard_rope_pos,
};

/* ---- pos_embed_pos and its gradient --------------------------------------------------- */

static int infer_pe_pos(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    DG_INFER_DTYPE(g, n, 1, DG_F32, err);
    DG_INFER_DTYPE(g, n, 2, DG_I32, err);
    const dg_tensor *x = DG_IN(g, n, 0), *t = DG_IN(g, n, 1), *p = DG_IN(g, n, 2);
    char s[64], u[64];
    if (x->ndim != 3 || t->ndim != 2 || t->shape[1] != x->shape[2] || p->ndim != 1 || p->shape[0] != x->shape[1])
        return DG_INFER_FAIL(err, "rule 'shape' broken: x %s must be [B, S, H], table %s [P, H], pos [S]",
                             dg_shape_str(x, s), dg_shape_str(t, u));
    dg_desc_like(o, x);
    return DG_OK;
}

static void cost_rows3(const dg_graph *g, const dg_node *n, dg_cost *c) {
    double e = (double)dg_tensor_numel(DG_IN(g, n, 0));
    c->flops = e;
    c->bytes = 12.0 * e;
}

static int k_pe_pos(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                    void *const *out) {
    (void)e;
    const dg_tensor *x = DG_IN(g, n, 0);
    int64_t B = x->shape[0], S = x->shape[1], H = x->shape[2], P = DG_IN(g, n, 1)->shape[0];
    const float *xs = in[0], *tab = in[1];
    const int32_t *pos = in[2];
    float *y = out[0];
    for (int64_t s = 0; s < S; s++)
        if (pos[s] < 0 || pos[s] >= P) return DG_EINPUT; /* past the position table */
    for (int64_t b = 0; b < B; b++)
        for (int64_t s = 0; s < S; s++) {
            const float *xr = xs + (b * S + s) * H, *tr = tab + (int64_t)pos[s] * H;
            float *yr = y + (b * S + s) * H;
            for (int64_t h = 0; h < H; h++) yr[h] = xr[h] + tr[h];
        }
    return DG_OK;
}

static int adj_pe_pos(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    dg_attrs a = dg_attrs_zero();
    a.i[0] = g->tensors[n->in[1]].shape[0];
    din[0] = dout[0];
    din[1] = dg_add1(g, &dg_op_pos_embed_pos_grad, &a, (int[]){dout[0], n->in[2]}, 2, NULL);
    din[2] = -1;
    return g->status;
}

static int shard_pe_pos(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                        dg_attrs *attrs) {
    (void)attrs;
    if (!dg_layout_is_replicated(&in[1])) return DG_SHARD_CANNOT;
    return shard_by_pos(g, n, in, out, 2);
}

const dg_op_def dg_op_pos_embed_pos = {
    .name = "pos_embed_pos", .min_inputs = 3, .max_inputs = 3, .n_outputs = 1,
    .infer = infer_pe_pos, .cost = cost_rows3, .adjoint = adj_pe_pos, .kernel = k_pe_pos,
    .shard = shard_pe_pos,
};

static int infer_pe_grad(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    DG_INFER_DTYPE(g, n, 1, DG_I32, err);
    const dg_tensor *d = DG_IN(g, n, 0), *p = DG_IN(g, n, 1);
    if (d->ndim != 3 || p->ndim != 1 || p->shape[0] != d->shape[1] || n->attrs.i[0] < 1)
        return DG_INFER_FAIL(err, "rule 'shape' broken: dy must be [B, S, H], pos [S], P >= 1");
    dg_desc_set(o, DG_F32, 2, (int64_t[]){n->attrs.i[0], d->shape[2]});
    return DG_OK;
}

static int k_pe_grad(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                     void *const *out) {
    (void)e;
    const dg_tensor *d = DG_IN(g, n, 0);
    int64_t B = d->shape[0], S = d->shape[1], H = d->shape[2], P = n->attrs.i[0];
    const float *dy = in[0];
    const int32_t *pos = in[1];
    float *dt = out[0];
    memset(dt, 0, sizeof(float) * (size_t)(P * H));
    for (int64_t s = 0; s < S; s++) {
        if (pos[s] < 0 || pos[s] >= P) return DG_EINPUT;
        float *row = dt + (int64_t)pos[s] * H;
        for (int64_t b = 0; b < B; b++) /* batch order, as pos_embed_grad sums */
            for (int64_t h = 0; h < H; h++) row[h] += dy[(b * S + s) * H + h];
    }
    return DG_OK;
}

const dg_op_def dg_op_pos_embed_pos_grad = {
    .name = "pos_embed_pos_grad", .min_inputs = 2, .max_inputs = 2, .n_outputs = 1,
    .iattr_names = {"positions"},
    .infer = infer_pe_grad, .cost = cost_rows3, .kernel = k_pe_grad,
};

/* ---- cp_xent_sum ---------------------------------------------------------------------- */

static int infer_xsum(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    /* softmax_xent's shape rules, then its outputs plus the count */
    DG_TRY(dg_op_softmax_xent.infer(g, n, o, err));
    dg_desc_set(&o[2], DG_F32, 0, NULL);
    return DG_OK;
}

static int k_xsum(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                  void *const *out) {
    const dg_tensor *lg = DG_IN(g, n, 0);
    int64_t rows = dg_rows(lg);
    const float *mask = n->n_in > 2 ? in[2] : NULL;
    DG_TRY(dg_op_softmax_xent.kernel(e, g, n, in, out));
    dg_cp_mean_to_sum(out[0], out[2], mask, rows);
    return DG_OK;
}

void dg_cp_mean_to_sum(float *loss, float *count, const float *mask, int64_t rows) {
    double cnt = 0;
    if (!mask) cnt = (double)rows;
    else
        for (int64_t r = 0; r < rows; r++) cnt += mask[r];
    *loss = (float)((double)*loss * cnt); /* the mean's sum */
    *count = (float)cnt;
}

static int adj_xsum(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    if (dout[0] < 0) return DG_OK;
    int scaled = dg_mul(g, dout[0], n->out[2]);
    int in[5] = {n->in[0], n->in[1], n->out[1], scaled, n->n_in > 2 ? n->in[2] : -1};
    din[0] = dg_add1(g, &dg_op_softmax_xent_bwd, NULL, in, n->n_in > 2 ? 5 : 4, NULL);
    return g->status;
}

/* Rows split over an axis: the sums are partial over it. */
static int shard_xsum(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                      dg_attrs *attrs) {
    (void)attrs;
    int last = g->tensors[n->in[0]].ndim - 1;
    if (in[0].partial != DG_AXIS_NONE || dg_layout_dim_split(&in[0], last)) return DG_SHARD_CANNOT;
    for (int k = 2; k < n->n_in; k++)
        if (!dg_layout_equal(&in[k], &in[1])) return DG_SHARD_CANNOT;
    dg_axis a = DG_AXIS_NONE;
    int nt = g->tensors[n->in[1]].ndim;
    for (int d = 0; d < nt; d++)
        if (in[1].split[d] != DG_AXIS_NONE) {
            if (a != DG_AXIS_NONE || in[1].split2[d] != DG_AXIS_NONE) return DG_SHARD_CANNOT;
            a = (dg_axis)in[1].split[d];
        }
    memset(out, 0, sizeof(dg_sharding) * 3);
    out[0].partial = out[2].partial = (uint8_t)a;
    out[1] = in[1];
    return DG_OK;
}

const dg_op_def dg_op_cp_xent_sum = {
    .name = "cp_xent_sum", .min_inputs = 2, .max_inputs = 3, .n_outputs = 3,
    .infer = infer_xsum, .adjoint = adj_xsum, .kernel = k_xsum, .shard = shard_xsum,
    .f32_outputs = 7u,
};

/* ---- cp_div ------------------------------------------------------------------------- */

static int infer_div(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    for (int i = 0; i < 2; i++) {
        DG_INFER_DTYPE(g, n, i, DG_F32, err);
        if (dg_tensor_numel(DG_IN(g, n, i)) != 1)
            return DG_INFER_FAIL(err, "rule 'shape' broken: cp_div takes scalars");
    }
    dg_desc_set(o, DG_F32, 0, NULL);
    return DG_OK;
}

static int k_div(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                 void *const *out) {
    (void)e;
    (void)g;
    (void)n;
    float den = *(const float *)in[1];
    *(float *)out[0] = den > 0 ? *(const float *)in[0] / den : 0.0f; /* no tokens: loss 0, as softmax_xent */
    return DG_OK;
}

static int adj_div(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    din[0] = dg_add1(g, &dg_op_cp_div, NULL, (int[]){dout[0], n->in[1]}, 2, NULL);
    din[1] = -1;
    return g->status;
}

const dg_op_def dg_op_cp_div = {
    .name = "cp_div", .min_inputs = 2, .max_inputs = 2, .n_outputs = 1,
    .infer = infer_div, .adjoint = adj_div, .kernel = k_div,
    .f32_outputs = 1u,
};
