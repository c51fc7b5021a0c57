/* dg_op_cp_vocab.c — cp_vocab_xent_sum (dg_op_cp.h): the vocab-parallel
 * cross entropy (dg_op_vocab.h) as a sum and a token count, for the loss
 * under CP x TP. */
#include <string.h>

#include "dg_cpu_xent.h"
#include "dg_layout.h"
#include "dg_op_basic.h"
#include "dg_op_cp.h"
#include "dg_op_vocab.h"
#include "dg_ops_util.h"

/* vocab_xent's shape rules, then two scalars. */
static int infer_vsum(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_TRY(dg_op_vocab_xent.infer(g, n, o, err));
    dg_desc_set(&o[1], DG_F32, 0, NULL);
    return DG_OK;
}

static int k_vsum(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in, void *const *out) {
    (void)e;
    int64_t rows = dg_tensor_numel(DG_IN(g, n, 1));
    const float *mask = n->n_in > 5 ? in[5] : NULL;
    DG_TRY(dg_cpu_vocab_xent_loss(in[1], mask, in[3], in[4], out[0], rows, n->attrs.i[0], NULL));
    dg_cp_mean_to_sum(out[0], out[1], mask, rows);
    return DG_OK;
}

/* vocab_xent's gradient of the mean, times the count. */
static int adj_vsum(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    if (dout[0] < 0) return DG_OK;
    dg_attrs a = dg_attrs_zero();
    a.i[0] = n->attrs.i[0];
    int scaled = dg_mul(g, dout[0], n->out[1]);
    int in[6] = {n->in[0], n->in[1], n->in[2], n->in[3], scaled, n->n_in > 5 ? n->in[5] : -1};
    din[0] = dg_add1(g, &dg_op_vocab_xent_bwd, &a, in, n->n_in > 5 ? 6 : 5, NULL);
    return g->status;
}

/* Logits split on the vocabulary, rows over one other axis b (targets, lse,
 * target logits and mask alike) -> both sums partial over b. */
static int shard_vsum(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                      dg_attrs *attrs) {
    (void)attrs;
    if (dg_vocab_split_axis(g, n->in[0]) == DG_AXIS_NONE || !dg_layout_is_replicated(&in[2])) return DG_SHARD_CANNOT;
    for (int k = 3; k < n->n_in; k++)
        if (!dg_layout_equal(&in[k], &in[1])) return DG_SHARD_CANNOT;
    dg_axis b = DG_AXIS_NONE;
    for (int d = 0; d < g->tensors[n->in[1]].ndim; d++) {
        if (in[1].split[d] == DG_AXIS_NONE) continue;
        if ((b != DG_AXIS_NONE && b != in[1].split[d]) || in[1].split2[d] != DG_AXIS_NONE ||
            in[1].split[d] != in[0].split[d])
            return DG_SHARD_CANNOT;
        b = (dg_axis)in[1].split[d];
    }
    memset(out, 0, 2 * sizeof *out);
    out[0].partial = out[1].partial = (uint8_t)b;
    return DG_OK;
}

const dg_op_def dg_op_cp_vocab_xent_sum = {
    .name = "cp_vocab_xent_sum", .min_inputs = 5, .max_inputs = 6, .n_outputs = 2,
    .iattr_names = {"vocab"},
    .infer = infer_vsum, .adjoint = adj_vsum, .kernel = k_vsum, .shard = shard_vsum,
    .f32_outputs = 3u,
};
