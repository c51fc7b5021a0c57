/* dg_moe_experts.h — the logical MoE experts node.
 *
 *   "moe_experts" (x [T, H], probs [T, k], indices i32 [T, k],
 *                  w1 [E, 2F, H], w2 [E, H, F])   i[0] E   f[0] capacity factor
 *     -> y [T, H] = sum_j probs[t, j] * expert_{indices[t, j]}(x[t])
 *        with expert_e(x) = w2[e] swiglu(w1[e] x) (SwiGLU's gate rows, then up).
 *
 * The model builder emits one per MoE layer over all E experts (global
 * shapes); it has no kernel (DG_TRAIT_EXPERTS). The EP pass's rewrite
 * (parallel/ep/dg_pass_ep.h) emits the parallel form for the pass's EP
 * size, dispatcher and overlap chunks through dg_etp_experts
 * (parallel/ep/dg_etp.h): at EP size 1 with one chunk that is the
 * single-rank block (permute, grouped GEMMs, unpermute). Its sharding rule lets w1 and w2 be split on dim 0
 * over ep (the output is an ordinary activation); anything else split is
 * "cannot".
 */
#ifndef DG_MOE_EXPERTS_H
#define DG_MOE_EXPERTS_H

#include "dg_op.h"

extern const dg_op_def dg_op_moe_experts;

/* Add the node; returns y's id or -1 (g->err). capacity_factor <= 0: dropless. */
int dg_moe_experts(dg_graph *g, int x, int probs, int indices, int w1, int w2, int num_experts,
                   double capacity_factor);

#endif /* DG_MOE_EXPERTS_H */
