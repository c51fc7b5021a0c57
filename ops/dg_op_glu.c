/* dg_op_glu.c — glu and glu_bwd (see dg_op_glu.h). */
#include "dg_op_glu.h"

#include "dg_op_act.h"
#include "dg_op_shard.h"
#include "dg_ops_util.h"

static int glu_out(const dg_node *n, const dg_tensor *x, dg_tensor_desc *o, dg_err *err) {
    char s[64];
    if (x->ndim < 1 || dg_cols(x) % 2)
        return DG_INFER_FAIL(err, "rule 'shape' broken: x is %s, the last dim must be even (2F)", dg_shape_str(x, s));
    if (n->attrs.i[0] != DG_GLU_SILU && n->attrs.i[0] != DG_GLU_QUICK_GELU)
        return DG_INFER_FAIL(err, "rule 'attrs' broken: glu activation %lld: expected 0 (silu) or 1 (quick_gelu)",
                             (long long)n->attrs.i[0]);
    dg_desc_like(o, x);
    o->shape[x->ndim - 1] /= 2;
    return DG_OK;
}

static int infer_glu(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    return glu_out(n, DG_IN(g, n, 0), o, err);
}

static void cost_glu(const dg_graph *g, const dg_node *n, dg_cost *c) {
    double e = (double)dg_tensor_numel(DG_IN(g, n, 0)) / 2;
    c->flops = 8.0 * e;
    c->bytes = 4.0 * 3.0 * e;
}

static int k_glu(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in, void *const *out) {
    const dg_tensor *x = DG_IN(g, n, 0);
    dg_cpu_glu_fwd(e->team, (int)n->attrs.i[0], (float)n->attrs.f[0], (float)n->attrs.f[1], in[0], out[0], dg_rows(x),
                   dg_cols(x) / 2);
    return DG_OK;
}

static int adj_glu(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    din[0] = dg_add1(g, &dg_op_glu_bwd, &n->attrs, (int[]){dout[0], n->in[0]}, 2, NULL);
    return g->status;
}

const dg_op_def dg_op_glu = {
    .name = "glu", .min_inputs = 1, .max_inputs = 1, .n_outputs = 1,
    .iattr_names = {"act", NULL}, .fattr_names = {"offset", "clamp", NULL},
    .infer = infer_glu, .cost = cost_glu, .adjoint = adj_glu, .kernel = k_glu, .shard = dg_shard_swiglu,
};

int dg_glu(dg_graph *g, int x, dg_glu_act act, double offset, double clamp) {
    dg_attrs a = dg_attrs_zero();
    a.i[0] = act;
    a.f[0] = offset;
    a.f[1] = clamp > 0 ? clamp : 0;
    return dg_add1(g, &dg_op_glu, &a, &x, 1, NULL);
}

int dg_mlp_activation(dg_graph *g, int u, dg_mlp_act act, double offset, double clamp) {
    if (act == DG_MLP_GELU) return dg_gelu_tanh(g, u);
    if (act == DG_MLP_SWIGLU && offset == 0 && !(clamp > 0)) return dg_swiglu(g, u);
    return dg_glu(g, u, act == DG_MLP_QUICK_GEGLU ? DG_GLU_QUICK_GELU : DG_GLU_SILU, offset, clamp);
}

/* ---- glu_bwd: (dy [..., F], x [..., 2F]) -> dx [..., 2F] ------------------------------- */

static int infer_glu_bwd(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    DG_INFER_DTYPE(g, n, 1, DG_F32, err);
    dg_tensor_desc y;
    DG_TRY(glu_out(n, DG_IN(g, n, 1), &y, err));
    const dg_tensor *dy = DG_IN(g, n, 0);
    int same = dy->ndim == y.ndim;
    for (int i = 0; same && i < y.ndim; i++) same = dy->shape[i] == y.shape[i];
    char a[64], b[64];
    if (!same)
        return DG_INFER_FAIL(err, "rule 'shape' broken: dy %s does not match glu(x %s)", dg_shape_str(dy, a),
                             dg_shape_str(DG_IN(g, n, 1), b));
    dg_desc_like(o, DG_IN(g, n, 1));
    return DG_OK;
}

static void cost_glu_bwd(const dg_graph *g, const dg_node *n, dg_cost *c) {
    double e = (double)dg_tensor_numel(DG_IN(g, n, 0));
    c->flops = 12.0 * e;
    c->bytes = 4.0 * 5.0 * e;
}

static int k_glu_bwd(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in, void *const *out) {
    const dg_tensor *x = DG_IN(g, n, 1);
    dg_cpu_glu_bwd(e->team, (int)n->attrs.i[0], (float)n->attrs.f[0], (float)n->attrs.f[1], in[0], in[1], out[0],
                   dg_rows(x), dg_cols(x) / 2);
    return DG_OK;
}

const dg_op_def dg_op_glu_bwd = {
    .name = "glu_bwd", .min_inputs = 2, .max_inputs = 2, .n_outputs = 1,
    .iattr_names = {"act", NULL}, .fattr_names = {"offset", "clamp", NULL},
    .infer = infer_glu_bwd, .cost = cost_glu_bwd, .kernel = k_glu_bwd,
};
