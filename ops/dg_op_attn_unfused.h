/* dg_op_attn_unfused.h — attention as Megatron's unfused backends run it
 * (`--attention-backend unfused` / `local`): the scores written out, a
 * masked softmax, attention dropout on the probabilities, and the product
 * with V, each a node (kernels: kernels/cpu/dg_cpu_attn_unfused.h).
 *
 *   attn_scores(a [B, S, Ha, D], b [B, S, Hb, D]) -> s [B, Ha, S, S]
 *       s[b,h] = scale a_h b_{h/g}^T, g = Ha / Hb          f[0] = scale
 *   attn_context(p [B, Ha, S, S], b [B, S, Hb, D]) -> o [B, S, Ha, D]
 *       o_h = scale p_h b_{h/g}                            f[0] = scale
 *   attn_context_t(p [B, Ha, S, S], a [B, S, Ha, D]) -> o [B, S, Ha/g, D]
 *       o_k = scale sum over k's g heads of p_h^T a_h      f[0] = scale,
 *                                                          i[0] = g
 *   attn_softmax(s [B, H, S, S]) -> p                      i[0] = causal
 *   attn_softmax_bwd(p, dp) -> ds = p (dp - rowsum(p dp))  (no adjoint)
 *
 * The three products are each other's adjoints (scores: da = context(ds,
 * b), db = context_t(ds, a); context: dp = scores(do, b), db =
 * context_t(p, do); context_t: dp = scores(a, do), da = context(p, do)),
 * so the backward is made of the same nodes, costed as GEMMs over the
 * whole S x S (the masked half included, as Megatron's baddbmm computes
 * it), and the S x S tensors between them as memory traffic.
 *
 * Sharding (ops/dg_op_shard.h): batch and heads may be split (TP splits
 * heads: every rank runs its heads' chain, no communication); sequence,
 * head dim and the S x S dims may not. Under CP the fused attention's ring lowering is what runs,
 * so the model refuses this backend with CP.
 *
 * dg_attention_unfused(q, k, v, causal, scale, dropout p, key, site):
 *   the chain on q [B, S, Hq, D], k, v [B, S, Hkv, D]: o [B, S, Hq, D].
 *   With p > 0 the probabilities go through dropout (dg_op_dropout.h;
 *   key the graph's rng_key, site the model's number for this dropout).
 */
#ifndef DG_OP_ATTN_UNFUSED_H
#define DG_OP_ATTN_UNFUSED_H

#include "dg_op.h"

extern const dg_op_def dg_op_attn_scores;
extern const dg_op_def dg_op_attn_context;
extern const dg_op_def dg_op_attn_context_t;
extern const dg_op_def dg_op_attn_softmax;
extern const dg_op_def dg_op_attn_softmax_bwd;

int dg_attn_scores(dg_graph *g, int a, int b, double scale);
int dg_attn_context(dg_graph *g, int p, int b, double scale);
int dg_attn_context_t(dg_graph *g, int p, int a, double scale, int group);
int dg_attn_softmax(dg_graph *g, int s, int causal);

int dg_attention_unfused(dg_graph *g, int q, int k, int v, int causal, double scale, double dropout, int key,
                         int site);

#endif /* DG_OP_ATTN_UNFUSED_H */
