/* dg_op_xent.h — fused softmax cross-entropy with Megatron's masked mean.
 *
 *   softmax_xent(logits [..., V], targets int32 [...], mask f32 [...])
 *     -> loss []     = sum(mask * ce) / sum(mask),  ce = logsumexp(logits) - logits[target]
 *        lse [...]   the per-row logsumexp, saved for the backward
 *
 * targets has one entry per row of logits (logits [B, S, V] with targets
 * [B, S], or logits [N, V] with targets [B, S] and N = B * S); the mask,
 * when given, has targets' shape. Without a mask every row counts (plain
 * mean). Rows with mask 0 never read their target; a target outside
 * [0, V) elsewhere makes the kernel fail with DG_EINPUT. sum(mask) == 0
 * gives loss 0 and zero gradients (see dg_cpu_xent.h).
 *
 * No attributes. The backward op
 *   softmax_xent_bwd(logits, targets, lse, dloss [, mask]) -> dlogits [..., V]
 *     dlogits = (softmax(logits) - onehot(target)) * mask / sum(mask) * dloss
 * Gradients flow to logits only (not to the mask, not through lse).
 */
#ifndef DG_OP_XENT_H
#define DG_OP_XENT_H

#include "dg_op.h"

extern const dg_op_def dg_op_softmax_xent;
extern const dg_op_def dg_op_softmax_xent_bwd;

/* mask may be -1 (no mask). Returns the loss tensor; *lse (may be NULL)
 * receives the logsumexp tensor. */
int dg_softmax_xent(dg_graph *g, int logits, int targets, int mask, int *lse);

#endif /* DG_OP_XENT_H */
