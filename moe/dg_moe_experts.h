/* dg_moe_experts.h — the logical MoE experts node.
 *
 *   "moe_experts" (x [T, H], probs [T, k], indices i32 [T, k],
 *                  w1 [E, W F, H], w2 [E, H, F] [, b1 [E, W F], b2 [E, H]])
 *                  i[0] E   i[1] activation (dg_mlp_act)
 *                  f[0] capacity factor   f[1] GLU offset   f[2] clamp
 *     -> y [T, H] = sum_j probs[t, j] * expert_{indices[t, j]}(x[t])
 *        with expert_e(x) = w2[e] act(w1[e] x + b1[e]) + b2[e]
 *        (W = 2 for the gated activations, fc1's gate rows then linear
 *        rows; 1 for GeLU; the activation, offset and clamp as
 *        ops/dg_op_glu.h). The routing prob weights fc2's bias too, as
 *        Megatron's experts do (p * (fc2(h) + b2): TEGroupedMLP's
 *        _apply_bias, MLP's per_token_scale), with moe_apply_probs_on_input off.
 *
 * The model builder emits one per MoE layer over all E experts (global
 * shapes); it has no kernel (DG_TRAIT_EXPERTS). The EP pass's rewrite
 * (parallel/ep/dg_pass_ep.h) emits the parallel form for the pass's EP
 * size, dispatcher and overlap chunks through dg_etp_experts
 * (parallel/ep/dg_etp.h): at EP size 1 with one chunk that is the
 * single-rank block (permute, grouped GEMMs and biases, unpermute). Its
 * sharding rule lets the weights and biases be split on dim 0 over ep (the
 * output is an ordinary activation) and, under expert tensor parallelism,
 * the F dims over tp; anything else split is "cannot".
 */
#ifndef DG_MOE_EXPERTS_H
#define DG_MOE_EXPERTS_H

#include "dg_op.h"
#include "dg_op_glu.h"

extern const dg_op_def dg_op_moe_experts;

/* The expert MLP's variant: activation, GLU options and biases. */
typedef struct dg_moe_expert_mlp {
    dg_mlp_act act;    /* DG_MLP_SWIGLU, DG_MLP_GELU or DG_MLP_QUICK_GEGLU */
    double glu_offset; /* --glu-linear-offset */
    double clamp;      /* --activation-func-clamp-value (<= 0: none) */
    int b1, b2;        /* linear_fc1.bias [E, W F], linear_fc2.bias [E, H]; -1: none (both or neither) */
} dg_moe_expert_mlp;

/* SwiGLU without biases: what a NULL variant means. */
dg_moe_expert_mlp dg_moe_expert_mlp_swiglu(void);

/* Add the node; returns y's id or -1 (g->err). capacity_factor <= 0:
 * dropless; mlp NULL: SwiGLU without biases. */
int dg_moe_experts(dg_graph *g, int x, int probs, int indices, int w1, int w2, int num_experts,
                   double capacity_factor, const dg_moe_expert_mlp *mlp);

/* The variant a moe_experts node n carries (its attributes and biases). */
dg_moe_expert_mlp dg_moe_experts_mlp_of(const dg_node *n, const int *in);

#endif /* DG_MOE_EXPERTS_H */
