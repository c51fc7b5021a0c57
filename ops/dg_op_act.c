/* dg_op_act.c — swiglu, gelu and their backward ops. */
#include "dg_op_act.h"

#include "dg_cpu_act.h"
#include "dg_op_shard.h"
#include "dg_ops_util.h"

/* ---- swiglu ----------------------------------------------------------------------- */

/* swiglu's output for input x: [..., 2F] -> [..., F]. */
static int swiglu_out(const dg_tensor *x, dg_tensor_desc *o, dg_err *err) {
    char s[64];
    if (x->ndim < 1 || dg_cols(x) % 2)
        return DG_INFER_FAIL(err, "rule 'shape' broken: x is %s, the last dim must be even (2F)",
                             dg_shape_str(x, s));
    dg_desc_like(o, x);
    o->shape[x->ndim - 1] /= 2;
    return DG_OK;
}

static int infer_swiglu(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    return swiglu_out(DG_IN(g, n, 0), o, err);
}

static void cost_swiglu(const dg_graph *g, const dg_node *n, dg_cost *c) {
    double e = (double)dg_tensor_numel(DG_IN(g, n, 0)) / 2;
    c->flops = 6.0 * e; /* exp, add, div, mul, ... per output */
    c->bytes = 4.0 * 3.0 * e;
}

static int k_swiglu(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                    void *const *out) {
    const dg_tensor *x = DG_IN(g, n, 0);
    dg_cpu_swiglu_fwd(e->team, in[0], out[0], dg_rows(x), dg_cols(x) / 2);
    return DG_OK;
}

static int adj_swiglu(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    din[0] = dg_add1(g, &dg_op_swiglu_bwd, NULL, (int[]){dout[0], n->in[0]}, 2, NULL);
    return g->status;
}

const dg_op_def dg_op_swiglu = {
    .name = "swiglu", .min_inputs = 1, .max_inputs = 1, .n_outputs = 1,
    .infer = infer_swiglu, .cost = cost_swiglu, .adjoint = adj_swiglu, .kernel = k_swiglu,
    .shard = dg_shard_swiglu,
};

int dg_swiglu(dg_graph *g, int x) { return dg_add1(g, &dg_op_swiglu, NULL, &x, 1, NULL); }

/* ---- swiglu_bwd: (dy [..., F], x [..., 2F]) -> dx [..., 2F] ---------------------------- */

static int infer_swiglu_bwd(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    DG_INFER_DTYPE(g, n, 1, DG_F32, err);
    dg_tensor_desc y;
    DG_TRY(swiglu_out(DG_IN(g, n, 1), &y, err));
    const dg_tensor *dy = DG_IN(g, n, 0);
    int same = dy->ndim == y.ndim;
    for (int i = 0; same && i < y.ndim; i++) same = dy->shape[i] == y.shape[i];
    char a[64], b[64];
    if (!same)
        return DG_INFER_FAIL(err, "rule 'shape' broken: dy %s does not match swiglu(x %s)",
                             dg_shape_str(dy, a), dg_shape_str(DG_IN(g, n, 1), b));
    dg_desc_like(o, DG_IN(g, n, 1));
    return DG_OK;
}

static void cost_swiglu_bwd(const dg_graph *g, const dg_node *n, dg_cost *c) {
    double e = (double)dg_tensor_numel(DG_IN(g, n, 0));
    c->flops = 10.0 * e;
    c->bytes = 4.0 * 5.0 * e;
}

static int k_swiglu_bwd(const dg_exec_env *e, const dg_graph *g, const dg_node *n,
                        void *const *in, void *const *out) {
    const dg_tensor *x = DG_IN(g, n, 1);
    dg_cpu_swiglu_bwd(e->team, in[0], in[1], out[0], dg_rows(x), dg_cols(x) / 2);
    return DG_OK;
}

const dg_op_def dg_op_swiglu_bwd = {
    .name = "swiglu_bwd", .min_inputs = 2, .max_inputs = 2, .n_outputs = 1,
    .infer = infer_swiglu_bwd, .cost = cost_swiglu_bwd, .kernel = k_swiglu_bwd,
};

/* ---- gelu_tanh -------------------------------------------------------------------------- */

static int infer_gelu(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    dg_desc_like(o, DG_IN(g, n, 0));
    return DG_OK;
}

static void cost_gelu(const dg_graph *g, const dg_node *n, dg_cost *c) {
    double e = (double)dg_tensor_numel(DG_IN(g, n, 0));
    c->flops = 8.0 * e;
    c->bytes = 4.0 * (n->n_in + 1) * e;
}

static int k_gelu(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                  void *const *out) {
    dg_cpu_gelu_fwd(e->team, in[0], out[0], dg_tensor_numel(DG_IN(g, n, 0)));
    return DG_OK;
}

static int adj_gelu(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    din[0] = dg_add1(g, &dg_op_gelu_tanh_bwd, NULL, (int[]){dout[0], n->in[0]}, 2, NULL);
    return g->status;
}

const dg_op_def dg_op_gelu_tanh = {
    .name = "gelu_tanh", .min_inputs = 1, .max_inputs = 1, .n_outputs = 1,
    .infer = infer_gelu, .cost = cost_gelu, .adjoint = adj_gelu, .kernel = k_gelu,
    .shard = dg_shard_pointwise,
};

int dg_gelu_tanh(dg_graph *g, int x) { return dg_add1(g, &dg_op_gelu_tanh, NULL, &x, 1, NULL); }

/* ---- gelu_tanh_bwd: (dy, x) -> dx ----------------------------------------------------------- */

static int infer_gelu_bwd(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    DG_INFER_DTYPE(g, n, 1, DG_F32, err);
    char a[64], b[64];
    if (!dg_same_shape(DG_IN(g, n, 0), DG_IN(g, n, 1)))
        return DG_INFER_FAIL(err, "rule 'shape' broken: dy %s and x %s differ",
                             dg_shape_str(DG_IN(g, n, 0), a), dg_shape_str(DG_IN(g, n, 1), b));
    dg_desc_like(o, DG_IN(g, n, 1));
    return DG_OK;
}

static int k_gelu_bwd(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                      void *const *out) {
    dg_cpu_gelu_bwd(e->team, in[0], in[1], out[0], dg_tensor_numel(DG_IN(g, n, 1)));
    return DG_OK;
}

const dg_op_def dg_op_gelu_tanh_bwd = {
    .name = "gelu_tanh_bwd", .min_inputs = 2, .max_inputs = 2, .n_outputs = 1,
    .infer = infer_gelu_bwd, .cost = cost_gelu, .kernel = k_gelu_bwd,
};
