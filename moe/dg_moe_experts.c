/* dg_moe_experts.c — the logical experts node (see dg_moe_experts.h). */
#include "dg_moe_experts.h"

#include <string.h>

#include "dg_layout.h"
#include "dg_ops_util.h"

static int infer_experts(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    const dg_tensor *x = DG_IN(g, n, 0), *p = DG_IN(g, n, 1), *ix = DG_IN(g, n, 2);
    const dg_tensor *w1 = DG_IN(g, n, 3), *w2 = DG_IN(g, n, 4);
    if (x->ndim != 2 || p->ndim != 2 || ix->ndim != 2 || w1->ndim != 3 || w2->ndim != 3)
        return DG_INFER_FAIL(err, "moe_experts: x [T, H], probs and indices [T, k], w1 [E, 2F, H], "
                                  "w2 [E, H, F] expected");
    if (!dg_dtype_is_float(x->dtype) || !dg_dtype_is_float(p->dtype) || ix->dtype != DG_I32)
        return DG_INFER_FAIL(err, "moe_experts: x, probs f32 and indices i32 expected");
    if (p->shape[0] != x->shape[0] || ix->shape[0] != x->shape[0] || ix->shape[1] != p->shape[1])
        return DG_INFER_FAIL(err, "moe_experts: probs and indices must be [T, k] with T = %lld",
                             (long long)x->shape[0]);
    if (w1->shape[2] != x->shape[1] || w2->shape[1] != x->shape[1] || w1->shape[1] != 2 * w2->shape[2] ||
        w1->shape[0] != w2->shape[0])
        return DG_INFER_FAIL(err, "moe_experts: w1 [E, 2F, H] and w2 [E, H, F] do not fit x [T, %lld]",
                             (long long)x->shape[1]);
    dg_desc_like(o, x);
    return DG_OK;
}

/* Two GEMMs per routed slot: [2F, H] and [H, F]. */
static void cost_experts(const dg_graph *g, const dg_node *n, dg_cost *c) {
    const dg_tensor *x = DG_IN(g, n, 0), *ix = DG_IN(g, n, 2), *w2 = DG_IN(g, n, 4);
    double rows = (double)x->shape[0] * (double)ix->shape[1], H = (double)x->shape[1];
    double F = (double)w2->shape[2];
    c->flops = 2.0 * rows * (3.0 * F * H);
    c->bytes = 2.0 * (double)dg_tensor_bytes(x);
}

/* The weights' expert dim may be split over ep and, with expert tensor
 * parallelism, their F dims over tp (w1 dim 1, gate and up each split:
 * stride 2; w2 dim 2), both weights alike: the lowering reduces the
 * partial sums, so the output is replicated like the tokens. */
static int shard_experts(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                         dg_attrs *attrs) {
    (void)g;
    (void)n;
    (void)attrs;
    int tp_dim[5] = {-1, -1, -1, 1, 2}, tp_split[5] = {0};
    for (int k = 0; k < 5; k++) {
        dg_sharding s = in[k];
        if (k >= 3 && s.split[0] == DG_AXIS_EP && !s.split2[0]) s.split[0] = DG_AXIS_NONE;
        int d = tp_dim[k];
        if (d >= 0 && s.split[d] == DG_AXIS_TP && !s.split2[d] && s.stride[d] == (k == 3 ? 2 : 0)) {
            s.split[d] = DG_AXIS_NONE;
            s.stride[d] = 0;
            tp_split[k] = 1;
        }
        if (!dg_layout_is_replicated(&s)) return DG_SHARD_CANNOT;
    }
    if (tp_split[3] != tp_split[4]) return DG_SHARD_CANNOT;
    memset(out, 0, sizeof *out);
    return DG_OK;
}

const dg_op_def dg_op_moe_experts = {
    .name = "moe_experts", .min_inputs = 5, .max_inputs = 5, .n_outputs = 1,
    .iattr_names = {"num_experts", NULL}, .fattr_names = {"capacity_factor", NULL},
    .infer = infer_experts, .cost = cost_experts, .shard = shard_experts, .traits = DG_TRAIT_EXPERTS,
};

int dg_moe_experts(dg_graph *g, int x, int probs, int indices, int w1, int w2, int num_experts,
                   double capacity_factor) {
    dg_attrs a;
    memset(&a, 0, sizeof a);
    a.i[0] = num_experts;
    a.f[0] = capacity_factor;
    return dg_graph_add(g, &dg_op_moe_experts, &a, (int[]){x, probs, indices, w1, w2}, 5, NULL, NULL);
}
