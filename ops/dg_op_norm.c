/* dg_op_norm.c — rmsnorm, layernorm and their backward ops. */
#include "dg_op_norm.h"

#include "dg_cpu_norm.h"
#include "dg_op_shard.h"
#include "dg_ops_util.h"

/* ---- shared rules ------------------------------------------------------------ */

/* Inputs x_at (f32, >= 1 dim) and then vectors [H] at in[vec0 .. vec0+nvec). */
static int check_norm_inputs(const dg_graph *g, const dg_node *n, int x_at, int vec0, int nvec,
                             dg_err *err) {
    for (int i = 0; i < n->n_in; i++) DG_INFER_DTYPE(g, n, i, DG_F32, err);
    const dg_tensor *x = DG_IN(g, n, x_at);
    if (x->ndim < 1) return DG_INFER_FAIL(err, "rule 'shape' broken: x must have at least 1 dim");
    int64_t H = dg_cols(x);
    char s[64];
    for (int i = vec0; i < vec0 + nvec; i++) {
        const dg_tensor *v = DG_IN(g, n, i);
        if (v->ndim != 1 || v->shape[0] != H)
            return DG_INFER_FAIL(err, "rule 'shape' broken: input %d ('%s') is %s, expected [%lld] "
                                      "(the last dim of x)",
                                 i, v->name, dg_shape_str(v, s), (long long)H);
    }
    if (!(n->attrs.f[0] > 0))
        return DG_INFER_FAIL(err, "rule 'attrs' broken: eps must be > 0, got %g", n->attrs.f[0]);
    return DG_OK;
}

/* Scratch for the backward: `nrow` float vectors [rows], then `nacc` double
 * vectors [H], each 64-byte aligned. */
static size_t ws_offset_acc(int64_t rows, int nrow) {
    size_t b = sizeof(float) * (size_t)rows * (size_t)nrow;
    return (b + 63) & ~(size_t)63;
}

static size_t ws_norm_bwd(const dg_graph *g, const dg_node *n, int nrow, int nacc) {
    const dg_tensor *x = DG_IN(g, n, 1);
    return ws_offset_acc(dg_rows(x), nrow) + sizeof(double) * (size_t)dg_cols(x) * (size_t)nacc;
}

/* x is input x_at; tensors_per_elem counts the [rows, H] tensors moved. */
static void cost_norm(const dg_graph *g, const dg_node *n, dg_cost *c, int x_at,
                      double flops_per_elem, double tensors_per_elem) {
    const dg_tensor *x = DG_IN(g, n, x_at);
    double e = (double)dg_tensor_numel(x), H = (double)dg_cols(x);
    c->flops = flops_per_elem * e;
    c->bytes = 4.0 * (tensors_per_elem * e + 3.0 * H);
}

/* ---- rmsnorm ------------------------------------------------------------------- */

static int infer_rmsnorm(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_TRY(check_norm_inputs(g, n, 0, 1, 1, err));
    dg_desc_like(o, DG_IN(g, n, 0));
    return DG_OK;
}

static void cost_rmsnorm(const dg_graph *g, const dg_node *n, dg_cost *c) { cost_norm(g, n, c, 0, 4, 2); }

static int k_rmsnorm(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                     void *const *out) {
    const dg_tensor *x = DG_IN(g, n, 0);
    dg_cpu_rmsnorm_fwd(e->team, in[0], in[1], out[0], NULL, dg_rows(x), dg_cols(x),
                       (float)n->attrs.f[0]);
    return DG_OK;
}

static int adj_rmsnorm(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    dg_attrs a = n->attrs;
    int outs[2];
    if (dg_graph_add(g, &dg_op_rmsnorm_bwd, &a, (int[]){dout[0], n->in[0], n->in[1]}, 3, outs,
                     NULL) < 0)
        return g->status;
    din[0] = outs[0];
    din[1] = outs[1];
    return DG_OK;
}

const dg_op_def dg_op_rmsnorm = {
    .name = "rmsnorm", .min_inputs = 2, .max_inputs = 2, .n_outputs = 1,
    .fattr_names = {"eps"},
    .infer = infer_rmsnorm, .cost = cost_rmsnorm, .adjoint = adj_rmsnorm, .kernel = k_rmsnorm,
    .shard = dg_shard_rowwise,
};

int dg_rmsnorm(dg_graph *g, int x, int w, double eps) {
    dg_attrs a = dg_attrs_zero();
    a.f[0] = eps;
    return dg_add1(g, &dg_op_rmsnorm, &a, (int[]){x, w}, 2, NULL);
}

/* ---- rmsnorm_bwd: (dy, x, w) -> (dx, dw) ------------------------------------------ */

static int infer_rmsnorm_bwd(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_TRY(check_norm_inputs(g, n, 1, 2, 1, err));
    char a[64], b[64];
    if (!dg_same_shape(DG_IN(g, n, 0), DG_IN(g, n, 1)))
        return DG_INFER_FAIL(err, "rule 'shape' broken: dy %s and x %s differ",
                             dg_shape_str(DG_IN(g, n, 0), a), dg_shape_str(DG_IN(g, n, 1), b));
    dg_desc_like(&o[0], DG_IN(g, n, 1));
    dg_desc_like(&o[1], DG_IN(g, n, 2));
    return DG_OK;
}

static void cost_rmsnorm_bwd(const dg_graph *g, const dg_node *n, dg_cost *c) {
    cost_norm(g, n, c, 1, 10, 4);
}

static size_t ws_rmsnorm_bwd(const dg_graph *g, const dg_node *n, int nthreads) {
    (void)nthreads;
    return ws_norm_bwd(g, n, 1, 1);
}

static int k_rmsnorm_bwd(const dg_exec_env *e, const dg_graph *g, const dg_node *n,
                         void *const *in, void *const *out) {
    const dg_tensor *x = DG_IN(g, n, 1);
    int64_t rows = dg_rows(x), H = dg_cols(x);
    DG_ASSERT(e->workspace_bytes >= ws_norm_bwd(g, n, 1, 1));
    char *ws = e->workspace;
    dg_cpu_rmsnorm_bwd(e->team, in[0], in[1], in[2], out[0], out[1], rows, H,
                       (float)n->attrs.f[0], (float *)ws, (double *)(ws + ws_offset_acc(rows, 1)));
    return DG_OK;
}

const dg_op_def dg_op_rmsnorm_bwd = {
    .name = "rmsnorm_bwd", .min_inputs = 3, .max_inputs = 3, .n_outputs = 2,
    .fattr_names = {"eps"},
    .infer = infer_rmsnorm_bwd, .cost = cost_rmsnorm_bwd, .workspace = ws_rmsnorm_bwd,
    .kernel = k_rmsnorm_bwd,
};

/* ---- layernorm --------------------------------------------------------------------- */

static int infer_layernorm(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_TRY(check_norm_inputs(g, n, 0, 1, 2, err));
    dg_desc_like(o, DG_IN(g, n, 0));
    return DG_OK;
}

static void cost_layernorm(const dg_graph *g, const dg_node *n, dg_cost *c) {
    cost_norm(g, n, c, 0, 7, 2);
}

static int k_layernorm(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                       void *const *out) {
    const dg_tensor *x = DG_IN(g, n, 0);
    dg_cpu_layernorm_fwd(e->team, in[0], in[1], in[2], out[0], NULL, NULL, dg_rows(x),
                         dg_cols(x), (float)n->attrs.f[0]);
    return DG_OK;
}

static int adj_layernorm(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    dg_attrs a = n->attrs;
    int outs[3];
    if (dg_graph_add(g, &dg_op_layernorm_bwd, &a, (int[]){dout[0], n->in[0], n->in[1]}, 3, outs,
                     NULL) < 0)
        return g->status;
    din[0] = outs[0];
    din[1] = outs[1];
    din[2] = outs[2];
    return DG_OK;
}

const dg_op_def dg_op_layernorm = {
    .name = "layernorm", .min_inputs = 3, .max_inputs = 3, .n_outputs = 1,
    .fattr_names = {"eps"},
    .infer = infer_layernorm, .cost = cost_layernorm, .adjoint = adj_layernorm,
    .kernel = k_layernorm,
    .shard = dg_shard_rowwise,
};

int dg_layernorm(dg_graph *g, int x, int w, int b, double eps) {
    dg_attrs a = dg_attrs_zero();
    a.f[0] = eps;
    return dg_add1(g, &dg_op_layernorm, &a, (int[]){x, w, b}, 3, NULL);
}

/* ---- layernorm_bwd: (dy, x, w) -> (dx, dw, db) ---------------------------------------- */

static int infer_layernorm_bwd(const dg_graph *g, const dg_node *n, dg_tensor_desc *o,
                               dg_err *err) {
    DG_TRY(infer_rmsnorm_bwd(g, n, o, err));
    dg_desc_like(&o[2], DG_IN(g, n, 2));
    return DG_OK;
}

static void cost_layernorm_bwd(const dg_graph *g, const dg_node *n, dg_cost *c) {
    cost_norm(g, n, c, 1, 12, 4);
}

static size_t ws_layernorm_bwd(const dg_graph *g, const dg_node *n, int nthreads) {
    (void)nthreads;
    return ws_norm_bwd(g, n, 2, 2);
}

static int k_layernorm_bwd(const dg_exec_env *e, const dg_graph *g, const dg_node *n,
                           void *const *in, void *const *out) {
    const dg_tensor *x = DG_IN(g, n, 1);
    int64_t rows = dg_rows(x), H = dg_cols(x);
    DG_ASSERT(e->workspace_bytes >= ws_norm_bwd(g, n, 2, 2));
    char *ws = e->workspace;
    dg_cpu_layernorm_bwd(e->team, in[0], in[1], in[2], out[0], out[1], out[2], rows, H,
                         (float)n->attrs.f[0], (float *)ws, (float *)ws + rows,
                         (double *)(ws + ws_offset_acc(rows, 2)));
    return DG_OK;
}

const dg_op_def dg_op_layernorm_bwd = {
    .name = "layernorm_bwd", .min_inputs = 3, .max_inputs = 3, .n_outputs = 3,
    .fattr_names = {"eps"},
    .infer = infer_layernorm_bwd, .cost = cost_layernorm_bwd, .workspace = ws_layernorm_bwd,
    .kernel = k_layernorm_bwd,
};
