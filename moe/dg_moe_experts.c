/* dg_moe_experts.c — the logical experts node (see dg_moe_experts.h). */
#include "dg_moe_experts.h"

#include <string.h>

#include "dg_layout.h"
#include "dg_ops_util.h"

static int infer_experts(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    const dg_tensor *x = DG_IN(g, n, 0), *p = DG_IN(g, n, 1), *ix = DG_IN(g, n, 2);
    const dg_tensor *w1 = DG_IN(g, n, 3), *w2 = DG_IN(g, n, 4);
    int64_t act = n->attrs.i[1];
    if (act < DG_MLP_SWIGLU || act > DG_MLP_QUICK_GEGLU)
        return DG_INFER_FAIL(err, "moe_experts: activation %lld: expected 0 (swiglu), 1 (gelu) or 2 (quick_geglu)",
                             (long long)act);
    int64_t W = dg_mlp_act_width((dg_mlp_act)act);
    if (x->ndim != 2 || p->ndim != 2 || ix->ndim != 2 || w1->ndim != 3 || w2->ndim != 3)
        return DG_INFER_FAIL(err, "moe_experts: x [T, H], probs and indices [T, k], w1 [E, %sF, H], "
                                  "w2 [E, H, F] expected", W == 2 ? "2" : "");
    if (!dg_dtype_is_float(x->dtype) || !dg_dtype_is_float(p->dtype) || ix->dtype != DG_I32)
        return DG_INFER_FAIL(err, "moe_experts: x, probs f32 and indices i32 expected");
    if (p->shape[0] != x->shape[0] || ix->shape[0] != x->shape[0] || ix->shape[1] != p->shape[1])
        return DG_INFER_FAIL(err, "moe_experts: probs and indices must be [T, k] with T = %lld",
                             (long long)x->shape[0]);
    if (w1->shape[2] != x->shape[1] || w2->shape[1] != x->shape[1] || w1->shape[1] != W * w2->shape[2] ||
        w1->shape[0] != w2->shape[0])
        return DG_INFER_FAIL(err, "moe_experts: w1 [E, %sF, H] and w2 [E, H, F] do not fit x [T, %lld]",
                             W == 2 ? "2" : "", (long long)x->shape[1]);
    if (n->n_in == 7) {
        const dg_tensor *b1 = DG_IN(g, n, 5), *b2 = DG_IN(g, n, 6);
        if (b1->ndim != 2 || b2->ndim != 2 || b1->shape[0] != w1->shape[0] || b1->shape[1] != w1->shape[1] ||
            b2->shape[0] != w1->shape[0] || b2->shape[1] != x->shape[1])
            return DG_INFER_FAIL(err, "moe_experts: biases b1 [E, %lld] and b2 [E, %lld] expected",
                                 (long long)w1->shape[1], (long long)x->shape[1]);
    } else if (n->n_in != 5) {
        return DG_INFER_FAIL(err, "moe_experts: both biases or neither expected");
    }
    dg_desc_like(o, x);
    return DG_OK;
}

/* Two GEMMs per routed slot: [W F, H] and [H, F]. */
static void cost_experts(const dg_graph *g, const dg_node *n, dg_cost *c) {
    const dg_tensor *x = DG_IN(g, n, 0), *ix = DG_IN(g, n, 2), *w2 = DG_IN(g, n, 4);
    double rows = (double)x->shape[0] * (double)ix->shape[1], H = (double)x->shape[1];
    double F = (double)w2->shape[2], W = dg_mlp_act_width((dg_mlp_act)n->attrs.i[1]);
    c->flops = 2.0 * rows * ((W + 1.0) * F * H);
    c->bytes = 2.0 * (double)dg_tensor_bytes(x);
}

/* The weights' and biases' expert dim may be split over ep and, with
 * expert tensor parallelism, their F dims over tp (w1 and b1 dim 1, the
 * gate and linear halves each split: stride 2 for the gated activations;
 * w2 dim 2), all alike: the lowering reduces the partial sums, so the
 * output is replicated like the tokens. b2 [E, H] stays whole over tp. */
static int shard_experts(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                         dg_attrs *attrs) {
    (void)g;
    (void)attrs;
    int glu_stride = dg_mlp_act_width((dg_mlp_act)n->attrs.i[1]) == 2 ? 2 : 0;
    int tp_dim[7] = {-1, -1, -1, 1, 2, 1, -1}, tp_split[7] = {0};
    for (int k = 0; k < n->n_in; k++) {
        dg_sharding s = in[k];
        if (k >= 3 && s.split[0] == DG_AXIS_EP && !s.split2[0]) s.split[0] = DG_AXIS_NONE;
        int d = tp_dim[k];
        if (d >= 0 && s.split[d] == DG_AXIS_TP && !s.split2[d] && s.stride[d] == (k == 4 ? 0 : glu_stride)) {
            s.split[d] = DG_AXIS_NONE;
            s.stride[d] = 0;
            tp_split[k] = 1;
        }
        if (!dg_layout_is_replicated(&s)) return DG_SHARD_CANNOT;
    }
    if (tp_split[3] != tp_split[4] || (n->n_in == 7 && tp_split[5] != tp_split[3])) return DG_SHARD_CANNOT;
    memset(out, 0, sizeof *out);
    return DG_OK;
}

const dg_op_def dg_op_moe_experts = {
    .name = "moe_experts", .min_inputs = 5, .max_inputs = 7, .n_outputs = 1,
    .iattr_names = {"num_experts", "activation", NULL},
    .fattr_names = {"capacity_factor", "glu_offset", "clamp", NULL},
    .infer = infer_experts, .cost = cost_experts, .shard = shard_experts, .traits = DG_TRAIT_EXPERTS,
};

dg_moe_expert_mlp dg_moe_expert_mlp_swiglu(void) {
    dg_moe_expert_mlp m;
    memset(&m, 0, sizeof m);
    m.act = DG_MLP_SWIGLU;
    m.b1 = m.b2 = -1;
    return m;
}

int dg_moe_experts(dg_graph *g, int x, int probs, int indices, int w1, int w2, int num_experts,
                   double capacity_factor, const dg_moe_expert_mlp *mlp) {
    dg_moe_expert_mlp m = mlp ? *mlp : dg_moe_expert_mlp_swiglu();
    if ((m.b1 >= 0) != (m.b2 >= 0)) return dg_graph_fail(g, "moe_experts: both biases or neither expected");
    dg_attrs a;
    memset(&a, 0, sizeof a);
    a.i[0] = num_experts;
    a.i[1] = m.act;
    a.f[0] = capacity_factor;
    a.f[1] = m.glu_offset;
    a.f[2] = m.clamp > 0 ? m.clamp : 0;
    return dg_graph_add(g, &dg_op_moe_experts, &a, (int[]){x, probs, indices, w1, w2, m.b1, m.b2}, m.b1 >= 0 ? 7 : 5,
                        NULL, NULL);
}

dg_moe_expert_mlp dg_moe_experts_mlp_of(const dg_node *n, const int *in) {
    dg_moe_expert_mlp m = dg_moe_expert_mlp_swiglu();
    m.act = (dg_mlp_act)n->attrs.i[1];
    m.glu_offset = n->attrs.f[1];
    m.clamp = n->attrs.f[2];
    if (n->n_in == 7) {
        m.b1 = in[5];
        m.b2 = in[6];
    }
    return m;
}
