/* dg_op_chunk.c — slice_dim, unslice_dim, concat_dim (see dg_op_chunk.h). */
#include "dg_op_chunk.h"

#include "dg_layout.h"
#include "dg_ops_util.h"

/* x viewed as [outer, shape[dim], inner]. */
static void around(const dg_tensor *x, int dim, int64_t *outer, int64_t *inner) {
    *outer = *inner = 1;
    for (int d = 0; d < dim; d++) *outer *= x->shape[d];
    for (int d = dim + 1; d < x->ndim; d++) *inner *= x->shape[d];
}

static int check_attrs(const dg_graph *g, const dg_node *n, dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    const dg_tensor *x = DG_IN(g, n, 0);
    int64_t d = n->attrs.i[0], j = n->attrs.i[1], C = n->attrs.i[2];
    if (d < 0 || d >= x->ndim || C < 1 || j < 0 || j >= C)
        return DG_INFER_FAIL(err, "rule 'attrs' broken: dim %lld, chunk %lld of %lld for a %d-dim input",
                             (long long)d, (long long)j, (long long)C, x->ndim);
    return DG_OK;
}

static int infer_slice(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_TRY(check_attrs(g, n, err));
    const dg_tensor *x = DG_IN(g, n, 0);
    int d = (int)n->attrs.i[0];
    if (x->shape[d] % n->attrs.i[2])
        return DG_INFER_FAIL(err, "rule 'shape' broken: dim %d (%lld) is not %lld equal chunks", d,
                             (long long)x->shape[d], (long long)n->attrs.i[2]);
    dg_desc_like(o, x);
    o->shape[d] /= n->attrs.i[2];
    return DG_OK;
}

static int infer_unslice(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_TRY(check_attrs(g, n, err));
    dg_desc_like(o, DG_IN(g, n, 0));
    o->shape[n->attrs.i[0]] *= n->attrs.i[2];
    return DG_OK;
}

static int infer_concat(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    const dg_tensor *x = DG_IN(g, n, 0);
    int64_t d = n->attrs.i[0];
    if (d < 0 || d >= x->ndim) return DG_INFER_FAIL(err, "rule 'attrs' broken: dim %lld", (long long)d);
    for (int k = 0; k < n->n_in; k++) {
        DG_INFER_DTYPE(g, n, k, DG_F32, err);
        if (!dg_same_shape(DG_IN(g, n, k), x))
            return DG_INFER_FAIL(err, "rule 'shape' broken: input %d's shape differs from input 0's", k);
    }
    dg_desc_like(o, x);
    o->shape[d] *= n->n_in;
    return DG_OK;
}

static void cost_copy(const dg_graph *g, const dg_node *n, dg_cost *c) {
    c->flops = 0;
    c->bytes = 2.0 * (double)dg_tensor_bytes(DG_OUT(g, n, 0));
}

/* Chunk j of C of big [outer, C*len*inner] <-> small [outer, len*inner]. */
static void move(float *big, float *small, int64_t outer, int64_t row, int64_t C, int64_t j, int to_small) {
    for (int64_t o = 0; o < outer; o++) {
        float *b = big + (o * C + j) * row, *s = small + o * row;
        memcpy(to_small ? s : b, to_small ? b : s, sizeof(float) * (size_t)row);
    }
}

static int k_slice(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in, void *const *out) {
    (void)e;
    const dg_tensor *y = DG_OUT(g, n, 0);
    int64_t outer, inner;
    around(y, (int)n->attrs.i[0], &outer, &inner);
    move(in[0], out[0], outer, y->shape[n->attrs.i[0]] * inner, n->attrs.i[2], n->attrs.i[1], 1);
    return DG_OK;
}

static int k_unslice(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                     void *const *out) {
    (void)e;
    const dg_tensor *x = DG_IN(g, n, 0);
    int64_t outer, inner;
    around(x, (int)n->attrs.i[0], &outer, &inner);
    memset(out[0], 0, sizeof(float) * (size_t)dg_tensor_numel(DG_OUT(g, n, 0))); /* f32: dg_kernel_call.h */
    move(out[0], in[0], outer, x->shape[n->attrs.i[0]] * inner, n->attrs.i[2], n->attrs.i[1], 0);
    return DG_OK;
}

static int k_concat(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                    void *const *out) {
    (void)e;
    const dg_tensor *x = DG_IN(g, n, 0);
    int64_t outer, inner;
    around(x, (int)n->attrs.i[0], &outer, &inner);
    for (int k = 0; k < n->n_in; k++)
        move(out[0], in[k], outer, x->shape[n->attrs.i[0]] * inner, n->n_in, k, 0);
    return DG_OK;
}

/* (adjoints copy the attrs first: adding a node may move g->nodes) */
static int adj_slice(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    dg_attrs a = n->attrs;
    din[0] = dg_add1(g, &dg_op_unslice_dim, &a, dout, 1, NULL);
    return g->status;
}

static int adj_unslice(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    dg_attrs a = n->attrs;
    din[0] = dg_add1(g, &dg_op_slice_dim, &a, dout, 1, NULL);
    return g->status;
}

static int adj_concat(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    int nin = n->n_in, d = (int)n->attrs.i[0];
    for (int k = 0; k < nin; k++) din[k] = dg_slice_dim(g, dout[0], d, k, nin);
    return g->status;
}

static int shard_chunk(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                       dg_attrs *attrs) {
    (void)g;
    int d = (int)attrs->i[0];
    if (d < 0 || d >= DG_MAX_DIMS) return DG_SHARD_CANNOT;
    for (int k = 1; k < n->n_in; k++)
        if (!dg_layout_equal(&in[k], &in[0])) return DG_SHARD_CANNOT;
    out[0] = in[0];
    return DG_OK;
}

const dg_op_def dg_op_slice_dim = {
    .name = "slice_dim", .min_inputs = 1, .max_inputs = 1, .n_outputs = 1,
    .iattr_names = {"dim", "chunk", "chunks"},
    .infer = infer_slice, .cost = cost_copy, .adjoint = adj_slice, .kernel = k_slice, .shard = shard_chunk,
};

const dg_op_def dg_op_unslice_dim = {
    .name = "unslice_dim", .min_inputs = 1, .max_inputs = 1, .n_outputs = 1,
    .iattr_names = {"dim", "chunk", "chunks"},
    .infer = infer_unslice, .cost = cost_copy, .adjoint = adj_unslice, .kernel = k_unslice,
    .shard = shard_chunk,
};

const dg_op_def dg_op_concat_dim = {
    .name = "concat_dim", .min_inputs = 1, .max_inputs = DG_MAX_INPUTS, .n_outputs = 1,
    .iattr_names = {"dim"},
    .infer = infer_concat, .cost = cost_copy, .adjoint = adj_concat, .kernel = k_concat, .shard = shard_chunk,
};

int dg_slice_dim(dg_graph *g, int x, int dim, int j, int C) {
    dg_attrs a = dg_attrs_zero();
    a.i[0] = dim;
    a.i[1] = j;
    a.i[2] = C;
    return dg_add1(g, &dg_op_slice_dim, &a, &x, 1, NULL);
}

int dg_unslice_dim(dg_graph *g, int x, int dim, int j, int C) {
    dg_attrs a = dg_attrs_zero();
    a.i[0] = dim;
    a.i[1] = j;
    a.i[2] = C;
    return dg_add1(g, &dg_op_unslice_dim, &a, &x, 1, NULL);
}

int dg_concat_dim(dg_graph *g, const int *xs, int n, int dim) {
    if (n == 1) return xs[0];
    dg_attrs a = dg_attrs_zero();
    a.i[0] = dim;
    return dg_add1(g, &dg_op_concat_dim, &a, xs, n, NULL);
}
