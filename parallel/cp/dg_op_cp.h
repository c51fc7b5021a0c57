/* dg_op_cp.h — the ops context parallelism adds besides ring attention
 * (dg_op_ring_attn.h): only the CP pass's rewrites emit them
 * (dg_cp_rewrites.c).
 *
 *   cp_positions(cp_rank i32 [1]) -> pos i32 [S]
 *     The global position of each of this rank's S = 2c local tokens
 *     (dg_layout_cp_position) plus i[2]. attrs: i[0] = cp, i[1] = S, i[2] = offset.
 *     Laid out split[0] = cp. Not differentiable (no float input).
 *   rope_pos(x [B, S, NH, D], pos i32 [S]) -> [B, S, NH, D]
 *     rope (dg_op_rope.h) with token s at position pos[s]: the same angles,
 *     in double, as rope's tables. attrs: i[1] = inverse, i[2] = rotary_dim,
 *     f[0] = base. Its adjoint is itself with inverse flipped.
 *   pos_embed_pos(x [B, S, H], table [P, H], pos i32 [S]) -> [B, S, H]
 *     y[b, s] = x[b, s] + table[pos[s]]; a position outside [0, P) fails
 *     with DG_EINPUT. Adjoint: dx = dy, dtable = pos_embed_pos_grad.
 *   pos_embed_pos_grad(dy [B, S, H], pos i32 [S]) -> dtable [P, H]
 *     rows pos[s] get the sum over the batch of dy[:, s]; the rest zero.
 *     attrs: i[0] = P.
 *   cp_xent_sum(logits [.., V], targets i32 [..], mask f32 [..]?) -> loss_sum [],
 *       lse [..], count []
 *     softmax_xent's terms summed, not averaged: loss_sum = sum(mask * ce),
 *     count = sum(mask) (or the rows without a mask). With the rows split
 *     over an axis both are partial sums over it. Adjoint: softmax_xent_bwd
 *     with dloss * count (its mean's gradient times the count).
 *   cp_vocab_xent_sum(logits [.., Vl], targets, rank, lse, tlogit [, mask]) ->
 *       loss_sum [], count []
 *     vocab_xent (dg_op_vocab.h) summed, not averaged, as cp_xent_sum: the
 *     loss of CP x TP, whose logits are split on the vocabulary over tp and
 *     on the rows over cp (both sums partial over cp). attrs: i[0] = V.
 *     Adjoint: vocab_xent_bwd with dloss * count.
 *   cp_relabel(x) -> x, attrs i[0] = mode (the data is copied as it is):
 *     DG_CP_TOKENS_TO_DATA  flat tokens [B * S/cp, H] split over cp -> the
 *                           same rows as data (replicated layout), as EP
 *                           ranks' tokens: the MoE layer runs on this rank's
 *                           tokens, CP folded into the expert grid; an
 *                           inner split (SP's tp, kept by the flatten of a
 *                           one-sequence micro-batch) stays the rows' split;
 *     DG_CP_DATA_TO_TOKENS  the reverse, where the MoE output goes back to
 *                           the sequence (a split of the rows becomes the
 *                           inner split inside cp's);
 *     DG_CP_SUMMAND         replicated (f32 or i32) -> partial over cp:
 *                           this rank's term of a sum over cp (the MoE aux
 *                           and z losses, the tokens per expert).
 *     Adjoint: the other direction (the summand's gradient as it is).
 *   cp_div(num [], den []) -> num / den
 *     The gradient flows to num only (den is a token count).
 */
#ifndef DG_OP_CP_H
#define DG_OP_CP_H

#include "dg_op.h"

extern const dg_op_def dg_op_cp_positions;
extern const dg_op_def dg_op_rope_pos;
extern const dg_op_def dg_op_pos_embed_pos;
extern const dg_op_def dg_op_pos_embed_pos_grad;
extern const dg_op_def dg_op_cp_xent_sum;
extern const dg_op_def dg_op_cp_div;
extern const dg_op_def dg_op_cp_vocab_xent_sum;
extern const dg_op_def dg_op_cp_relabel;

/* A masked mean over rows (mask NULL: all rows) -> its sum; *count = the
 * rows it averaged (sum of the mask). The kernels of the cp_*_sum ops. */
void dg_cp_mean_to_sum(float *loss, float *count, const float *mask, int64_t rows);

enum { DG_CP_TOKENS_TO_DATA = 0, DG_CP_DATA_TO_TOKENS = 1, DG_CP_SUMMAND = 2 };
int dg_cp_relabel(dg_graph *g, int x, int mode);

/* The positions of this rank's S local tokens plus offset: one cp_positions
 * node per graph and (S, offset), reading the "cp_rank" input. */
int dg_cp_positions(dg_graph *g, int cp, int64_t S, int64_t offset);

#endif /* DG_OP_CP_H */
