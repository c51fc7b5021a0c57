/* dg_op_mla.h — the shape ops multi-latent attention needs (moe/dg_model_mla.c):
 * unequal parts of the last dim and one head broadcast to all heads.
 *
 *   narrow(x [.., N], start, len)      -> [.., len]: x[.., start : start + len]
 *   pad_last(x [.., n], start, total)  -> [.., total]: x at start, zeros elsewhere
 *                                         (narrow's adjoint, and narrow its)
 *   expand_heads(x [B, S, 1, P], like [B, S, N, *]) -> [B, S, N, P]: x's one head
 *                                         copied to like's N heads (like gives only
 *                                         the shape and layout; no gradient)
 *   heads_sum(x [B, S, N, P])          -> [B, S, 1, P]: expand_heads' adjoint
 *
 * Attributes: narrow i[0] start, i[1] len; pad_last i[0] start, i[1] total.
 * f32. Sharding: narrow and pad_last take any layout whose last dim is whole
 * (a partial sum stays one: they are linear); expand_heads takes like's
 * layout on dims 0..2, x split alike on dims 0..1 and whole on 2..3 (the
 * TP pass reads x through a copy_to_group where like's heads are split over
 * tp, so x's gradient, summed over a rank's heads only, is all-reduced:
 * DG_TRAIT_BROADCAST); heads_sum of heads split over an axis is a partial
 * sum over it.
 */
#ifndef DG_OP_MLA_H
#define DG_OP_MLA_H

#include "dg_op.h"

extern const dg_op_def dg_op_narrow;
extern const dg_op_def dg_op_pad_last;
extern const dg_op_def dg_op_expand_heads;
extern const dg_op_def dg_op_heads_sum;

int dg_narrow(dg_graph *g, int x, int64_t start, int64_t len);
int dg_pad_last(dg_graph *g, int x, int64_t start, int64_t total);
int dg_expand_heads(dg_graph *g, int x, int like);
int dg_heads_sum(dg_graph *g, int x);

#endif /* DG_OP_MLA_H */
