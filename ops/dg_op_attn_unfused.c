/* dg_op_attn_unfused.c — unfused attention's ops (see dg_op_attn_unfused.h). */
#include "dg_op_attn_unfused.h"

#include <math.h>

#include "dg_cpu_attn_unfused.h"
#include "dg_op_dropout.h"
#include "dg_op_shard.h"
#include "dg_ops_util.h"

/* ---- shapes ------------------------------------------------------------------------ */

static int64_t numel(const dg_graph *g, int t) { return dg_tensor_numel(&g->tensors[t]); }

/* Inputs i, j are f32 and 4-D; the scale attr is usable. */
static int check_common(const dg_graph *g, const dg_node *n, dg_err *err) {
    for (int i = 0; i < n->n_in; i++) {
        DG_INFER_DTYPE(g, n, i, DG_F32, err);
        if (DG_IN(g, n, i)->ndim != 4)
            return DG_INFER_FAIL(err, "rule 'shape' broken: input %d ('%s') must have 4 dims, got %d", i,
                                 DG_IN(g, n, i)->name, DG_IN(g, n, i)->ndim);
    }
    return DG_OK;
}

static int check_scale(const dg_node *n, dg_err *err) {
    if (!(n->attrs.f[0] > 0.0) || !isfinite(n->attrs.f[0]))
        return DG_INFER_FAIL(err, "rule 'attrs' broken: scale must be > 0 and finite, got %g", n->attrs.f[0]);
    return DG_OK;
}

/* p [B, H, S, S] against a heads tensor x [B, S, Hx, D]: B and S agree and
 * x's heads divide p's (hx_equal: they are equal). */
static int check_square(const dg_graph *g, const dg_node *n, int ip, int ix, int hx_equal, dg_err *err) {
    const dg_tensor *p = DG_IN(g, n, ip), *x = DG_IN(g, n, ix);
    char sp[64], sx[64];
    if (p->shape[2] != p->shape[3] || p->shape[0] != x->shape[0] || p->shape[2] != x->shape[1] ||
        (hx_equal ? p->shape[1] != x->shape[2] : p->shape[1] % x->shape[2] != 0))
        return DG_INFER_FAIL(err, "rule 'shape' broken: p %s and %s %s must be [B, H, S, S] and [B, S, %s, D]",
                             dg_shape_str(p, sp), DG_IN(g, n, ix)->name, dg_shape_str(x, sx),
                             hx_equal ? "H" : "H/g");
    return DG_OK;
}

static void cost_gemm(const dg_graph *g, const dg_node *n, int64_t S, int64_t Ha, int64_t D, dg_cost *c) {
    double B = (double)DG_IN(g, n, 0)->shape[0];
    c->flops = 2.0 * B * (double)Ha * (double)S * (double)S * (double)D;
    c->bytes = 4.0 * (double)(numel(g, n->in[0]) + numel(g, n->in[1]) + numel(g, n->out[0]));
}

/* ---- attn_scores -------------------------------------------------------------------- */

static dg_unfused_dims scores_dims(const dg_graph *g, const dg_node *n) {
    const dg_tensor *a = DG_IN(g, n, 0), *b = DG_IN(g, n, 1);
    return (dg_unfused_dims){a->shape[0], a->shape[1], a->shape[2], b->shape[2], a->shape[3]};
}

static int infer_scores(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_TRY(check_common(g, n, err));
    DG_TRY(check_scale(n, err));
    const dg_tensor *a = DG_IN(g, n, 0), *b = DG_IN(g, n, 1);
    char sa[64], sb[64];
    if (a->shape[0] != b->shape[0] || a->shape[1] != b->shape[1] || a->shape[3] != b->shape[3] ||
        a->shape[2] % b->shape[2] != 0)
        return DG_INFER_FAIL(err, "rule 'shape' broken: a %s and b %s must be [B, S, H, D] and [B, S, H/g, D]",
                             dg_shape_str(a, sa), dg_shape_str(b, sb));
    dg_desc_set(o, DG_F32, 4, (int64_t[]){a->shape[0], a->shape[2], a->shape[1], a->shape[1]});
    return DG_OK;
}

static void cost_scores(const dg_graph *g, const dg_node *n, dg_cost *c) {
    dg_unfused_dims d = scores_dims(g, n);
    cost_gemm(g, n, d.S, d.Ha, d.D, c);
}

static int k_scores(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in, void *const *out) {
    dg_unfused_dims d = scores_dims(g, n);
    dg_cpu_attn_scores(e->team, &d, (float)n->attrs.f[0], in[0], in[1], out[0]);
    return DG_OK;
}

/* s = scale a b^T: da = context(ds, b), db = context_t(ds, a) */
static int adj_scores(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    if (dout[0] < 0) return DG_OK;
    int a = n->in[0], b = n->in[1];
    double scale = n->attrs.f[0];
    int group = (int)(g->tensors[a].shape[2] / g->tensors[b].shape[2]);
    if (g->tensors[a].requires_grad) din[0] = dg_attn_context(g, dout[0], b, scale);
    if (g->tensors[b].requires_grad) din[1] = dg_attn_context_t(g, dout[0], a, scale, group);
    return g->status;
}

/* ---- attn_context ------------------------------------------------------------------- */

static dg_unfused_dims context_dims(const dg_graph *g, const dg_node *n) {
    const dg_tensor *p = DG_IN(g, n, 0), *b = DG_IN(g, n, 1);
    return (dg_unfused_dims){p->shape[0], p->shape[2], p->shape[1], b->shape[2], b->shape[3]};
}

static int infer_context(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_TRY(check_common(g, n, err));
    DG_TRY(check_scale(n, err));
    DG_TRY(check_square(g, n, 0, 1, 0, err));
    const dg_tensor *p = DG_IN(g, n, 0), *b = DG_IN(g, n, 1);
    dg_desc_set(o, DG_F32, 4, (int64_t[]){p->shape[0], p->shape[2], p->shape[1], b->shape[3]});
    return DG_OK;
}

static void cost_context(const dg_graph *g, const dg_node *n, dg_cost *c) {
    dg_unfused_dims d = context_dims(g, n);
    cost_gemm(g, n, d.S, d.Ha, d.D, c);
}

static int k_context(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                     void *const *out) {
    dg_unfused_dims d = context_dims(g, n);
    dg_cpu_attn_context(e->team, &d, (float)n->attrs.f[0], in[0], in[1], out[0]);
    return DG_OK;
}

/* o = scale p b: dp = scores(do, b), db = context_t(p, do) */
static int adj_context(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    if (dout[0] < 0) return DG_OK;
    int p = n->in[0], b = n->in[1];
    double scale = n->attrs.f[0];
    int group = (int)(g->tensors[p].shape[1] / g->tensors[b].shape[2]);
    if (g->tensors[p].requires_grad) din[0] = dg_attn_scores(g, dout[0], b, scale);
    if (g->tensors[b].requires_grad) din[1] = dg_attn_context_t(g, p, dout[0], scale, group);
    return g->status;
}

/* ---- attn_context_t ----------------------------------------------------------------- */

static dg_unfused_dims context_t_dims(const dg_graph *g, const dg_node *n) {
    const dg_tensor *p = DG_IN(g, n, 0), *a = DG_IN(g, n, 1);
    return (dg_unfused_dims){p->shape[0], p->shape[2], p->shape[1], p->shape[1] / n->attrs.i[0], a->shape[3]};
}

static int infer_context_t(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_TRY(check_common(g, n, err));
    DG_TRY(check_scale(n, err));
    DG_TRY(check_square(g, n, 0, 1, 1, err));
    const dg_tensor *p = DG_IN(g, n, 0), *a = DG_IN(g, n, 1);
    int64_t grp = n->attrs.i[0];
    if (grp < 1 || p->shape[1] % grp != 0)
        return DG_INFER_FAIL(err, "rule 'attrs' broken: group %lld must divide the %lld heads", (long long)grp,
                             (long long)p->shape[1]);
    dg_desc_set(o, DG_F32, 4, (int64_t[]){p->shape[0], p->shape[2], p->shape[1] / grp, a->shape[3]});
    return DG_OK;
}

static void cost_context_t(const dg_graph *g, const dg_node *n, dg_cost *c) {
    dg_unfused_dims d = context_t_dims(g, n);
    cost_gemm(g, n, d.S, d.Ha, d.D, c);
}

static int k_context_t(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                       void *const *out) {
    dg_unfused_dims d = context_t_dims(g, n);
    dg_cpu_attn_context_t(e->team, &d, (float)n->attrs.f[0], in[0], in[1], out[0]);
    return DG_OK;
}

/* o_k = scale sum p_h^T a_h: dp = scores(a, do), da = context(p, do) */
static int adj_context_t(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    if (dout[0] < 0) return DG_OK;
    int p = n->in[0], a = n->in[1];
    double scale = n->attrs.f[0];
    if (g->tensors[p].requires_grad) din[0] = dg_attn_scores(g, a, dout[0], scale);
    if (g->tensors[a].requires_grad) din[1] = dg_attn_context(g, p, dout[0], scale);
    return g->status;
}

/* ---- attn_softmax, attn_softmax_bwd ------------------------------------------------- */

static int infer_softmax(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_TRY(check_common(g, n, err));
    const dg_tensor *s = DG_IN(g, n, 0);
    char ss[64];
    if (s->shape[2] != s->shape[3])
        return DG_INFER_FAIL(err, "rule 'shape' broken: scores %s must be [B, H, S, S]", dg_shape_str(s, ss));
    if (n->n_in > 1 && !dg_same_shape(s, DG_IN(g, n, 1)))
        return DG_INFER_FAIL(err, "rule 'shape' broken: p and dp differ");
    if (n->attrs.i[0] != 0 && n->attrs.i[0] != 1)
        return DG_INFER_FAIL(err, "rule 'attrs' broken: causal must be 0 or 1, got %lld", (long long)n->attrs.i[0]);
    dg_desc_like(o, s);
    return DG_OK;
}

static void cost_softmax(const dg_graph *g, const dg_node *n, dg_cost *c) {
    double e = (double)numel(g, n->in[0]);
    c->flops = 4.0 * e; /* max, exp, sum, scale (the bwd: product, sum, difference, product) */
    c->bytes = 4.0 * e * (double)(n->n_in + 1);
}

static int k_softmax(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                     void *const *out) {
    const dg_tensor *s = DG_IN(g, n, 0);
    dg_cpu_attn_softmax(e->team, s->shape[0] * s->shape[1] * s->shape[2], s->shape[3], (int)n->attrs.i[0], in[0],
                        out[0]);
    return DG_OK;
}

static int k_softmax_bwd(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                         void *const *out) {
    const dg_tensor *p = DG_IN(g, n, 0);
    dg_cpu_attn_softmax_bwd(e->team, p->shape[0] * p->shape[1] * p->shape[2], p->shape[3], in[0], in[1], out[0]);
    return DG_OK;
}

/* The masked entries of p are exact zeros, so the unmasked formula gives
 * them a zero gradient: the backward needs no causal attr. */
static int adj_softmax(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    if (dout[0] < 0) return DG_OK;
    dg_attrs a = dg_attrs_zero();
    din[0] = dg_add1(g, &dg_op_attn_softmax_bwd, &a, (int[]){n->out[0], dout[0]}, 2, NULL);
    return g->status;
}

/* ---- the ops ---------------------------------------------------------------------------- */

const dg_op_def dg_op_attn_scores = {
    .name = "attn_scores", .min_inputs = 2, .max_inputs = 2, .n_outputs = 1, .fattr_names = {"scale"},
    .infer = infer_scores, .cost = cost_scores, .adjoint = adj_scores, .kernel = k_scores,
    .shard = dg_shard_attn_scores,
    .traits = DG_TRAIT_SEQUENCE, /* across the keys: CP runs the fused attention's ring instead */
};

const dg_op_def dg_op_attn_context = {
    .name = "attn_context", .min_inputs = 2, .max_inputs = 2, .n_outputs = 1, .fattr_names = {"scale"},
    .infer = infer_context, .cost = cost_context, .adjoint = adj_context, .kernel = k_context,
    .shard = dg_shard_attn_context,
    .traits = DG_TRAIT_SEQUENCE, /* across the keys: CP runs the fused attention's ring instead */
};

const dg_op_def dg_op_attn_context_t = {
    .name = "attn_context_t", .min_inputs = 2, .max_inputs = 2, .n_outputs = 1, .iattr_names = {"group"},
    .fattr_names = {"scale"}, .infer = infer_context_t, .cost = cost_context_t, .adjoint = adj_context_t,
    .kernel = k_context_t, .shard = dg_shard_attn_context,
    .traits = DG_TRAIT_SEQUENCE, /* across the keys: CP runs the fused attention's ring instead */
};

const dg_op_def dg_op_attn_softmax = {
    .name = "attn_softmax", .min_inputs = 1, .max_inputs = 1, .n_outputs = 1, .iattr_names = {"causal"},
    .infer = infer_softmax, .cost = cost_softmax, .adjoint = adj_softmax, .kernel = k_softmax,
    .shard = dg_shard_attn_softmax,
    .traits = DG_TRAIT_SEQUENCE, /* across the keys: CP runs the fused attention's ring instead */
};

const dg_op_def dg_op_attn_softmax_bwd = {
    .name = "attn_softmax_bwd", .min_inputs = 2, .max_inputs = 2, .n_outputs = 1,
    .infer = infer_softmax, .cost = cost_softmax, .kernel = k_softmax_bwd, .shard = dg_shard_attn_softmax,
    .traits = DG_TRAIT_SEQUENCE, /* across the keys: CP runs the fused attention's ring instead */
};

static int add_scaled(dg_graph *g, const dg_op_def *op, int x, int y, double scale, int64_t iattr) {
    dg_attrs a = dg_attrs_zero();
    a.f[0] = scale;
    a.i[0] = iattr;
    return dg_add1(g, op, &a, (int[]){x, y}, 2, NULL);
}

int dg_attn_scores(dg_graph *g, int a, int b, double scale) { return add_scaled(g, &dg_op_attn_scores, a, b, scale, 0); }

int dg_attn_context(dg_graph *g, int p, int b, double scale) {
    return add_scaled(g, &dg_op_attn_context, p, b, scale, 0);
}

int dg_attn_context_t(dg_graph *g, int p, int a, double scale, int group) {
    return add_scaled(g, &dg_op_attn_context_t, p, a, scale, group);
}

int dg_attn_softmax(dg_graph *g, int s, int causal) {
    dg_attrs a = dg_attrs_zero();
    a.i[0] = causal;
    return dg_add1(g, &dg_op_attn_softmax, &a, (int[]){s}, 1, NULL);
}

int dg_attention_unfused(dg_graph *g, int q, int k, int v, int causal, double scale, double dropout, int key,
                         int site) {
    int p = dg_attn_softmax(g, dg_attn_scores(g, q, k, scale), causal);
    if (dropout > 0) p = dg_dropout(g, p, key, dropout, site);
    return dg_attn_context(g, p, v, 1.0);
}
