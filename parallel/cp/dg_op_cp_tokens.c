/* dg_op_cp_tokens.c — cp_relabel (dg_op_cp.h): where CP's tokens stop
 * being a split of the sequence and become data, as Megatron folds CP into
 * the expert grid, and back. */
#include <string.h>

#include "dg_cpu_shape.h"
#include "dg_layout.h"
#include "dg_op_cp.h"
#include "dg_ops_util.h"

static int infer_relabel(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    const dg_tensor *x = DG_IN(g, n, 0);
    if (n->attrs.i[0] < DG_CP_TOKENS_TO_DATA || n->attrs.i[0] > DG_CP_SUMMAND)
        return DG_INFER_FAIL(err, "rule 'attrs' broken: cp_relabel mode %lld", (long long)n->attrs.i[0]);
    if ((!dg_dtype_is_float(x->dtype) && x->dtype != DG_I32) || (n->attrs.i[0] != DG_CP_SUMMAND && x->ndim < 1))
        return DG_INFER_FAIL(err, "rule 'shape' broken: cp_relabel takes f32 tokens [T, ..], or f32 or i32 summands");
    dg_desc_like(o, x);
    return DG_OK;
}

static void cost_relabel(const dg_graph *g, const dg_node *n, dg_cost *c) {
    c->flops = 0;
    c->bytes = 8.0 * (double)dg_tensor_numel(DG_IN(g, n, 0));
}

static int k_relabel(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                     void *const *out) {
    dg_cpu_copy(e->team, in[0], out[0], dg_tensor_numel(DG_IN(g, n, 0))); /* f32 or i32: 4-byte words */
    return DG_OK;
}

/* The data is the same; the gradient is relabelled the other way. */
static int adj_relabel(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    if (dout[0] < 0) return DG_OK;
    int64_t m = n->attrs.i[0];
    din[0] = m == DG_CP_SUMMAND ? dout[0] : dg_cp_relabel(g, dout[0], m == DG_CP_TOKENS_TO_DATA ? DG_CP_DATA_TO_TOKENS
                                                                                           : DG_CP_TOKENS_TO_DATA);
    return g->status;
}

/* tokens to data: dim 0 split over cp -> each rank's rows as data (as on
 * EP ranks); data to tokens: the reverse; summand: replicated -> partial
 * over cp (this rank's term of a sum). An inner split of the tokens (SP's
 * tp inside the rank's chunks, which a one-sequence micro-batch's flatten
 * keeps: [1, S, H] -> [S, H]) is the data's split, contiguous in either. */
static int shard_relabel(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                         dg_attrs *attrs) {
    int nd = g->tensors[n->in[0]].ndim;
    out[0] = in[0];
    if (attrs->i[0] == DG_CP_SUMMAND) {
        if (!dg_layout_is_replicated(&in[0])) return DG_SHARD_CANNOT;
        out[0].partial = DG_AXIS_CP;
        return DG_OK;
    }
    if (in[0].partial != DG_AXIS_NONE || in[0].stride[0] > 1) return DG_SHARD_CANNOT;
    for (int d = 1; d < nd; d++)
        if (dg_layout_dim_split(&in[0], d)) return DG_SHARD_CANNOT;
    if (attrs->i[0] == DG_CP_TOKENS_TO_DATA) {
        if (in[0].split[0] != DG_AXIS_CP) return DG_SHARD_CANNOT;
        out[0].split[0] = in[0].split2[0];
        out[0].split2[0] = DG_AXIS_NONE;
    } else {
        if (in[0].split[0] == DG_AXIS_CP || in[0].split2[0] != DG_AXIS_NONE) return DG_SHARD_CANNOT;
        out[0].split[0] = DG_AXIS_CP;
        out[0].split2[0] = in[0].split[0];
    }
    return DG_OK;
}

const dg_op_def dg_op_cp_relabel = {
    .name = "cp_relabel", .min_inputs = 1, .max_inputs = 1, .n_outputs = 1,
    .iattr_names = {"mode"},
    .infer = infer_relabel, .cost = cost_relabel, .adjoint = adj_relabel, .kernel = k_relabel,
    .shard = shard_relabel,
};

int dg_cp_relabel(dg_graph *g, int x, int mode) {
    dg_attrs a = dg_attrs_zero();
    a.i[0] = mode;
    return dg_add1(g, &dg_op_cp_relabel, &a, &x, 1, "cp_relabel");
}
