/* dg_op_dropout.h — dropout, and the other counter-based draws of one
 * random number per element (the arithmetic: dg_cpu_dropout.h).
 *
 *   dropout(x [B, ...], key i32 [4]) -> [B, ...]
 *       attrs f[0] = p (drop probability), i[0] = site (a number the
 *       builder gives each dropout of the model, so sites draw different
 *       masks), i[5] = kind (dg_noise_kind: 0 dropout; 1 jitter, x times
 *       a uniform draw in [1 - p, 1 + p); 2 a standard normal draw in
 *       place of x). Dim 0 is the sample; key is the graph's "rng_key" input.
 * Backward: dropout(dy, key) with the same attrs: the mask is recomputed,
 * not stored, so recomputation and backward see the forward's mask. The
 * normal draw's backward passes dy through (a straight-through estimator).
 *   dropout(x, key, coord i32 [1]) with attrs i[1] = axis: x is this
 *       rank's slice of dim 1 (SP's sequence split over axis) and coord the
 *       rank's coordinate on that axis (the graph's "<axis>_rank" input):
 *       its elements draw the whole sample's mask at their own places.
 *       With attrs i[2] = cp > 1 (CP's split, dg_pass_cp.h) each row is
 *       the rank's two chunks, coord r and 2cp-1-r, each half the row.
 *   dropout(x, key, coord, inner i32 [1]) with attrs i[1] = cp's axis,
 *       i[2] = cp, i[3] = inner axis, i[4] = its size: CP x SP, x is part
 *       `inner` (of i[4]) of the rank's two chunks (dim 1 split over cp,
 *       then the inner axis inside it); a part may straddle the chunks.
 * Sharding: no split but the coordinate form's dim 1 over its axis (and the
 * inner axis inside it; any other split would shift the sample or element
 * index the mask hashes); key and coords replicated. A pass that splits
 * dim 1 rewrites dropout to the coordinate form (DG_TRAIT_RANDOM: the TP and
 * CP passes' tables, parallel/tp/dg_pass_tp.c and parallel/cp/dg_pass_cp.c).
 */
#ifndef DG_OP_DROPOUT_H
#define DG_OP_DROPOUT_H
#include "dg_cpu_dropout.h" /* dg_noise_kind */
#include "dg_op.h"
extern const dg_op_def dg_op_dropout;
int dg_dropout(dg_graph *g, int x, int key, double p, int site);
/* The node of any kind (dg_noise_kind, kernels/cpu/dg_cpu_dropout.h). */
int dg_noise(dg_graph *g, int x, int key, int kind, double p, int site);
int dg_dropout_slice(dg_graph *g, int x, int key, int coord, dg_axis axis, double p, int site);
#endif /* DG_OP_DROPOUT_H */
