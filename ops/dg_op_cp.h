/* dg_op_cp.h — the ops context parallelism adds besides ring attention
 * (ops/dg_op_ring_attn.h), and the CP lowerings of rope, pos_embed_add and
 * softmax_xent (graph/passes/dg_pass_cp.h calls them through each op's
 * `lower` callback, with dg_pass_cp_opts as options).
 *
 *   cp_positions(cp_rank i32 [1]) -> pos i32 [S]
 *     The global position of each of this rank's S = 2c local tokens
 *     (dg_cp_position) plus i[2]. attrs: i[0] = cp, i[1] = S, i[2] = offset.
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
 *                           tokens, CP folded into the expert grid;
 *     DG_CP_DATA_TO_TOKENS  the reverse, where the MoE output goes back to
 *                           the sequence;
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

/* `lower` callbacks under CP (opts: const dg_pass_cp_opts *). They lower
 * a node whose tokens (dim 1 of its input t: dg_cp_lowers) are split over
 * cp; any other (a graph without CP; another pass, such as EP, lowering
 * every op that has a callback; attention over whole sequences under
 * --cp-comm-type a2a) they copy as it is, reading no options. */
int dg_cp_lowers(const dg_graph *g, int t);
int dg_cp_lower_copy(dg_graph *g, const dg_node *n, const int *in, int *out, dg_err *err);
int dg_cp_lower_rope(dg_graph *g, const dg_graph *src, const dg_node *n, const int *in, int *out,
                     const void *opts, dg_err *err);
int dg_cp_lower_pos_embed(dg_graph *g, const dg_graph *src, const dg_node *n, const int *in, int *out,
                          const void *opts, dg_err *err);
int dg_cp_lower_xent(dg_graph *g, const dg_graph *src, const dg_node *n, const int *in, int *out,
                     const void *opts, dg_err *err);
/* vocab_xent (TP's loss) under CP: cp_vocab_xent_sum, its sums all-reduced
 * over cp and divided, as dg_cp_lower_xent. */
int dg_cp_lower_vocab_xent(dg_graph *g, const dg_graph *src, const dg_node *n, const int *in, int *out,
                           const void *opts, dg_err *err);
/* reshape under CP: flattening the tokens [B, S, H] -> [B * S, H] (the MoE
 * layer's input) ends in cp_relabel to data, and [B * S, H] -> [B, S, H]
 * of data starts with the relabel back; any other reshape as it is
 * (DG_LOWER_AS_IS: the sharding rule rewrites its dims). */
int dg_cp_lower_reshape(dg_graph *g, const dg_graph *src, const dg_node *n, const int *in, int *out,
                        const void *opts, dg_err *err);
/* The MoE aux and z losses of this rank's tokens under CP, made the one
 * rank's: the aux loss's tokens per expert all-reduced over cp (Megatron
 * reduces them over its tp x cp group) and its coefficient over cp^2, the
 * z loss's coefficient over cp (a mean over cp equal token counts); each
 * then all-reduced over cp as this rank's summand. */
int dg_cp_lower_moe_aux(dg_graph *g, const dg_graph *src, const dg_node *n, const int *in, int *out,
                        const void *opts, dg_err *err);
int dg_cp_lower_moe_z(dg_graph *g, const dg_graph *src, const dg_node *n, const int *in, int *out,
                      const void *opts, dg_err *err);
/* dropout of x split over cp on dim 1 (called by dropout's own lowering):
 * the coordinate form with attrs i[2] = cp, and with SP's split inside
 * cp's (CP x TP x SP) the inner axis' coordinate too, so each element draws
 * the one rank's mask at its global token (dg_op_dropout.h). */
int dg_cp_lower_dropout(dg_graph *g, const dg_graph *src, const dg_node *n, const int *in, int *out,
                        const void *opts, dg_err *err);

#endif /* DG_OP_CP_H */
