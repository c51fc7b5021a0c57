/* dg_op_basic.c — add, mul, scale, fill, sum/mean, broadcast_scalar. */
#include "dg_op_basic.h"

#include "dg_autodiff.h"
#include "dg_cpu_elementwise.h"
#include "dg_op_shard.h"
#include "dg_ops_util.h"

/* ---- shared rules ----------------------------------------------------------- */

static int infer_same2(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    DG_INFER_DTYPE(g, n, 1, DG_F32, err);
    char a[64], b[64];
    if (!dg_same_shape(DG_IN(g, n, 0), DG_IN(g, n, 1)))
        return DG_INFER_FAIL(err, "rule 'shape' broken: inputs %s and %s differ",
                             dg_shape_str(DG_IN(g, n, 0), a), dg_shape_str(DG_IN(g, n, 1), b));
    dg_desc_like(o, DG_IN(g, n, 0));
    return DG_OK;
}

static int infer_same1(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    dg_desc_like(o, DG_IN(g, n, 0));
    return DG_OK;
}

/* Shape stored in attrs: i[0] = ndim, i[1..4] = dims. */
static int infer_attr_shape(const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    int nd = (int)n->attrs.i[0];
    if (nd < 0 || nd > DG_MAX_DIMS) return DG_INFER_FAIL(err, "rule 'attrs' broken: ndim %d", nd);
    for (int i = 0; i < nd; i++)
        if (n->attrs.i[1 + i] <= 0)
            return DG_INFER_FAIL(err, "rule 'attrs' broken: dim %d is %lld", i,
                                 (long long)n->attrs.i[1 + i]);
    dg_desc_set(o, DG_F32, nd, &n->attrs.i[1]);
    return DG_OK;
}

static void cost_ew(const dg_graph *g, const dg_node *n, dg_cost *c) {
    double e = (double)dg_tensor_numel(DG_OUT(g, n, 0));
    c->flops = e;
    c->bytes = 4.0 * e * (n->n_in + 1);
}

static void attrs_shape(dg_attrs *a, int ndim, const int64_t *shape) {
    a->i[0] = ndim;
    for (int i = 0; i < ndim; i++) a->i[1 + i] = shape[i];
}

/* ---- add ---------------------------------------------------------------------- */

static int k_add(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                 void *const *out) {
    dg_cpu_add(e->team, in[0], in[1], out[0], dg_tensor_numel(DG_OUT(g, n, 0)));
    return DG_OK;
}

static int adj_add(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    (void)g;
    (void)n;
    din[0] = dout[0];
    din[1] = dout[0];
    return DG_OK;
}

const dg_op_def dg_op_add = {
    .name = "add", .min_inputs = 2, .max_inputs = 2, .n_outputs = 1,
    .infer = infer_same2, .cost = cost_ew, .adjoint = adj_add, .kernel = k_add,
    .shard = dg_shard_elementwise,
};

int dg_add(dg_graph *g, int a, int b) { return dg_add1(g, &dg_op_add, NULL, (int[]){a, b}, 2, NULL); }

/* ---- mul ---------------------------------------------------------------------- */

static int k_mul(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                 void *const *out) {
    dg_cpu_mul(e->team, in[0], in[1], out[0], dg_tensor_numel(DG_OUT(g, n, 0)));
    return DG_OK;
}

/* d(a*b) = b*dy, a*dy */
static int adj_mul(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    int a = n->in[0], b = n->in[1];
    if (g->tensors[a].requires_grad) din[0] = dg_mul(g, dout[0], b);
    if (g->tensors[b].requires_grad) din[1] = dg_mul(g, dout[0], a);
    return g->status;
}

const dg_op_def dg_op_mul = {
    .name = "mul", .min_inputs = 2, .max_inputs = 2, .n_outputs = 1,
    .infer = infer_same2, .cost = cost_ew, .adjoint = adj_mul, .kernel = k_mul,
    .shard = dg_shard_elementwise,
};

int dg_mul(dg_graph *g, int a, int b) { return dg_add1(g, &dg_op_mul, NULL, (int[]){a, b}, 2, NULL); }

/* ---- scale -------------------------------------------------------------------- */

static int k_scale(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                   void *const *out) {
    dg_cpu_scale(e->team, in[0], (float)n->attrs.f[0], out[0], dg_tensor_numel(DG_OUT(g, n, 0)));
    return DG_OK;
}

static int adj_scale(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    din[0] = dg_scale(g, dout[0], n->attrs.f[0]);
    return g->status;
}

const dg_op_def dg_op_scale = {
    .name = "scale", .min_inputs = 1, .max_inputs = 1, .n_outputs = 1,
    .fattr_names = {"alpha"},
    .infer = infer_same1, .cost = cost_ew, .adjoint = adj_scale, .kernel = k_scale,
    .shard = dg_shard_linear_unary,
};

int dg_scale(dg_graph *g, int x, double alpha) {
    dg_attrs a = dg_attrs_zero();
    a.f[0] = alpha;
    return dg_add1(g, &dg_op_scale, &a, &x, 1, NULL);
}

/* ---- fill --------------------------------------------------------------------- */

static int infer_fill(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    (void)g;
    return infer_attr_shape(n, o, err);
}

static int k_fill(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                  void *const *out) {
    (void)in;
    dg_cpu_fill(e->team, (float)n->attrs.f[0], out[0], dg_tensor_numel(DG_OUT(g, n, 0)));
    return DG_OK;
}

const dg_op_def dg_op_fill = {
    .name = "fill", .min_inputs = 0, .max_inputs = 0, .n_outputs = 1,
    .iattr_names = {"ndim", "d0", "d1", "d2", "d3"}, .fattr_names = {"value"},
    .infer = infer_fill, .cost = cost_ew, .kernel = k_fill,
};

int dg_fill(dg_graph *g, int ndim, const int64_t *shape, double value) {
    dg_attrs a = dg_attrs_zero();
    attrs_shape(&a, ndim, shape);
    a.f[0] = value;
    return dg_add1(g, &dg_op_fill, &a, NULL, 0, NULL);
}

/* ---- sum / mean --------------------------------------------------------------- */

static int infer_sum(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    dg_desc_set(o, DG_F32, 0, NULL);
    return DG_OK;
}

static int k_sum(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                 void *const *out) {
    int64_t cnt = dg_tensor_numel(DG_IN(g, n, 0));
    double s = dg_cpu_sum(e->team, in[0], cnt);
    if (n->attrs.i[0]) s /= (double)cnt;
    *(float *)out[0] = (float)s;
    return DG_OK;
}

static int adj_sum(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    const dg_tensor *x = DG_IN(g, n, 0);
    double alpha = n->attrs.i[0] ? 1.0 / (double)dg_tensor_numel(x) : 1.0;
    int64_t shape[DG_MAX_DIMS];
    int nd = x->ndim;
    for (int i = 0; i < nd; i++) shape[i] = x->shape[i];
    din[0] = dg_broadcast_scalar(g, dout[0], nd, shape, alpha);
    return g->status;
}

const dg_op_def dg_op_sum = {
    .name = "sum", .min_inputs = 1, .max_inputs = 1, .n_outputs = 1,
    .iattr_names = {"mean"},
    .infer = infer_sum, .cost = cost_ew, .adjoint = adj_sum, .kernel = k_sum,
    .shard = dg_shard_sum,
};

int dg_sum(dg_graph *g, int x) { return dg_add1(g, &dg_op_sum, NULL, &x, 1, NULL); }

int dg_mean(dg_graph *g, int x) {
    dg_attrs a = dg_attrs_zero();
    a.i[0] = 1;
    return dg_add1(g, &dg_op_sum, &a, &x, 1, NULL);
}

/* ---- broadcast_scalar ----------------------------------------------------------- */

static int infer_bcast(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    if (dg_tensor_numel(DG_IN(g, n, 0)) != 1)
        return DG_INFER_FAIL(err, "rule 'shape' broken: input must be a scalar");
    return infer_attr_shape(n, o, err);
}

static int k_bcast(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                   void *const *out) {
    float v = (float)n->attrs.f[0] * *(const float *)in[0];
    dg_cpu_fill(e->team, v, out[0], dg_tensor_numel(DG_OUT(g, n, 0)));
    return DG_OK;
}

static int adj_bcast(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    int s = dg_sum(g, dout[0]);
    din[0] = n->attrs.f[0] == 1.0 ? s : dg_scale(g, s, n->attrs.f[0]);
    return g->status;
}

const dg_op_def dg_op_broadcast_scalar = {
    .name = "broadcast_scalar", .min_inputs = 1, .max_inputs = 1, .n_outputs = 1,
    .iattr_names = {"ndim", "d0", "d1", "d2", "d3"}, .fattr_names = {"alpha"},
    .infer = infer_bcast, .cost = cost_ew, .adjoint = adj_bcast, .kernel = k_bcast,
    .shard = dg_shard_linear_unary,
};

int dg_broadcast_scalar(dg_graph *g, int scalar, int ndim, const int64_t *shape, double alpha) {
    dg_attrs a = dg_attrs_zero();
    attrs_shape(&a, ndim, shape);
    a.f[0] = alpha;
    return dg_add1(g, &dg_op_broadcast_scalar, &a, &scalar, 1, NULL);
}

/* ---- what autodiff needs ------------------------------------------------------ */

static const dg_autodiff_ops dg_basic_autodiff_ops = {&dg_op_add, &dg_op_fill};

const dg_autodiff_ops *dg_ops_autodiff(void) { return &dg_basic_autodiff_ops; }
