/* dg_op_dropout.h — dropout (the mask: dg_cpu_dropout.h).
 *
 *   dropout(x [B, ...], key i32 [4]) -> [B, ...]
 *       attrs f[0] = p (drop probability), i[0] = site (a number the
 *       builder gives each dropout of the model, so sites draw different
 *       masks). Dim 0 is the sample; key is the graph's "rng_key" input.
 * Backward: dropout(dy, key) with the same attrs: the mask is recomputed,
 * not stored, so recomputation and backward see the forward's mask.
 * Sharding: x and key replicated (a split would shift the sample or element
 * index the mask hashes; under SP dropout runs on the whole sequence).
 */
#ifndef DG_OP_DROPOUT_H
#define DG_OP_DROPOUT_H
#include "dg_op.h"
extern const dg_op_def dg_op_dropout;
int dg_dropout(dg_graph *g, int x, int key, double p, int site);
#endif /* DG_OP_DROPOUT_H */
