/* dg_model_mla.h — multi-latent attention (DeepSeek-V2/V3's MLA, Megatron-
 * Core's MLASelfAttention) lowered into graph nodes for the training forward.
 *
 * With N heads, Dn = --qk-head-dim, P = --qk-pos-emb-head-dim, Dv =
 * --v-head-dim, Q = Dn + P, on x [B, S, H] (parameters: dg_model.h):
 *   q      = linear_q_proj(x), or linear_q_up_proj(q_layernorm(linear_q_down_proj(x)))
 *            -> [B, S, N, Q] = [q_nope | q_pe]
 *   kv_c, k_pe = linear_kv_down_proj(x)  split [kv_lora_rank | P]
 *   [k_nope | v] = linear_kv_up_proj(kv_layernorm(kv_c)) -> [B, S, N, Dn + Dv]
 *   q_pe, k_pe rotated (RoPE or YaRN on P dims, pairs (2i, 2i+1) as Megatron's
 *   MLA deinterleaves them; k_pe is one head shared by all)
 *   attention([q_nope | q_pe], [k_nope | k_pe], v) with Megatron's softmax
 *   scale (dg_model_mla_softmax_scale), then linear_proj [H, N * Dv].
 * The q/kv latent norms exist only with --qk-layernorm, as in Megatron's
 * specs. Down projections are replicated over tp, up projections column-
 * parallel by heads, linear_proj row-parallel (Megatron's TP for MLA).
 * The up projections and RoPE are module mla_up_proj (graph/dg_module.h),
 * the rest of the projections attn.
 */
#ifndef DG_MODEL_MLA_H
#define DG_MODEL_MLA_H

#include "dg_model.h"

/* MLA on x [B, S, H] for the layer whose parameters start with pre; key and
 * site as attention_block's (unfused attention's dropout). Returns [B, S, H]. */
int dg_model_mla_attention(dg_graph *g, const dg_model_config *c, const char *pre, int x, int key, int site);

/* Check MLA's settings in c (called by dg_model_config_check). */
int dg_model_mla_check(const dg_model_config *c, dg_err *err);

#endif /* DG_MODEL_MLA_H */
