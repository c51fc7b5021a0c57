/* dg_op_shape.c — reshape. */
#include "dg_op_shape.h"

#include "dg_cpu_shape.h"
#include "dg_op_shard.h"
#include "dg_ops_util.h"

static int infer_reshape(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    const dg_tensor *x = DG_IN(g, n, 0);
    int nd = (int)n->attrs.i[0];
    if (nd < 0 || nd > DG_MAX_DIMS)
        return DG_INFER_FAIL(err, "rule 'attrs' broken: ndim %d outside 0..%d", nd, DG_MAX_DIMS);
    int64_t shape[DG_MAX_DIMS] = {0}, known = 1;
    int free_dim = -1;
    for (int i = 0; i < nd; i++) {
        shape[i] = n->attrs.i[1 + i];
        if (shape[i] == -1 && free_dim < 0) {
            free_dim = i;
        } else if (shape[i] <= 0) {
            return DG_INFER_FAIL(err, "rule 'attrs' broken: dim %d is %lld (only one -1 allowed)",
                                 i, (long long)shape[i]);
        } else {
            known *= shape[i];
        }
    }
    int64_t numel = dg_tensor_numel(x);
    char s[64];
    if (free_dim >= 0) {
        if (numel % known)
            return DG_INFER_FAIL(err, "rule 'shape' broken: cannot reshape %s (%lld elements) with "
                                      "a -1 dim: %lld does not divide it",
                                 dg_shape_str(x, s), (long long)numel, (long long)known);
        shape[free_dim] = numel / known;
        known = numel;
    }
    if (known != numel)
        return DG_INFER_FAIL(err, "rule 'shape' broken: cannot reshape %s (%lld elements) into "
                                  "%lld elements",
                             dg_shape_str(x, s), (long long)numel, (long long)known);
    dg_desc_set(o, DG_F32, nd, shape);
    return DG_OK;
}

static void cost_reshape(const dg_graph *g, const dg_node *n, dg_cost *c) {
    c->flops = 0;
    c->bytes = 8.0 * (double)dg_tensor_numel(DG_IN(g, n, 0));
}

static int k_reshape(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                     void *const *out) {
    dg_cpu_copy(e->team, in[0], out[0], dg_tensor_numel(DG_IN(g, n, 0)));
    return DG_OK;
}

static int adj_reshape(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    const dg_tensor *x = DG_IN(g, n, 0);
    int64_t shape[DG_MAX_DIMS];
    int nd = x->ndim;
    for (int i = 0; i < nd; i++) shape[i] = x->shape[i];
    din[0] = dg_reshape(g, dout[0], nd, shape);
    return g->status;
}

const dg_op_def dg_op_reshape = {
    .name = "reshape", .min_inputs = 1, .max_inputs = 1, .n_outputs = 1,
    .iattr_names = {"ndim", "d0", "d1", "d2", "d3"},
    .infer = infer_reshape, .cost = cost_reshape, .adjoint = adj_reshape, .kernel = k_reshape,
    .shard = dg_shard_reshape,
    .traits = DG_TRAIT_REGROUP,
};

int dg_reshape(dg_graph *g, int x, int ndim, const int64_t *shape) {
    dg_attrs a = dg_attrs_zero();
    a.i[0] = ndim;
    for (int i = 0; i < ndim && i < DG_MAX_DIMS; i++) a.i[1 + i] = shape[i];
    return dg_add1(g, &dg_op_reshape, &a, &x, 1, NULL);
}
