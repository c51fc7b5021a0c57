/* dg_flops.h — model FLOPs per iteration by Megatron's formula
 * (num_floating_point_operations in megatron/training/training.py):
 *
 *   12 * batch * S * L * H^2 * (
 *        (1 + G/A + S/H) * (A*D/H)          attention: QKV + proj, scores
 *      + (F_moe/H) * topk * g               routed experts
 *      + (F_shared/H) * g                   shared expert
 *      + V / (2 * L * H) )                  LM head
 *
 * with g = 3/2 for SwiGLU MLPs (three matrices), 1 for GeLU ones (two),
 * A heads, G query groups, D = H/A, and F_moe the expert width (the
 * dense MLP width, top-k 1, for dense layers). The 12 is 3 (forward +
 * two backward GEMMs) x 2 (multiply-add) x 2 (the H^2 terms count pairs).
 * It counts model FLOPs only: no recompute, no router or norms.
 * With multi-latent attention the attention term is Megatron's MLA branch
 * (per token and layer, q_head = qk_head_dim + qk_pos_emb_head_dim):
 *   6 (q + kv_lora_rank (H + A (qk_head_dim + v_head_dim) + 1)
 *      + H qk_pos_emb_head_dim + A v_head_dim H)
 *   + 6 S (A q_head / 2 + A v_head_dim / 2)
 * with q = q_lora_rank (H + A q_head + 1), or H A q_head without --q-lora-rank.
 */
#ifndef DG_FLOPS_H
#define DG_FLOPS_H

#include "dg_model.h"

/* FLOPs of one training iteration over `batch` samples of c's seq length. */
double dg_model_flops(const dg_model_config *c, double batch);

/* Measured single-thread sgemm rate (FLOP/s) on a 1024^3 problem, the
 * reference for MFU: a rank's peak is this times its compute threads. */
double dg_measure_sgemm_peak(void);

#endif /* DG_FLOPS_H */
