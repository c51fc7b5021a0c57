/* dg_grouped_bias.h — the experts' biases over rows grouped by expert (the
 * rows of dg_grouped_gemm.h: expert e owns tokens_per_expert[e] consecutive
 * rows, rows past their sum belong to none). Megatron's expert linear_fc1 /
 * linear_fc2 biases, one row per expert:
 *
 *   "grouped_bias_add" (x [N, M], counts [E] i32, b [E, M]) -> y [N, M]
 *       y[r] = x[r] + b[expert of r]; rows of no expert unchanged
 *   "grouped_bias_grad" (dy [N, M], counts [E] i32) -> db [E, M]
 *       db[e] = sum of dy over expert e's rows (zeros for an empty expert)
 *
 * Adjoint of the add: dx = dy, db = grouped_bias_grad(dy, counts).
 * Sharding of the add: b may be this rank's experts (dim 0 over ep, as the
 * weights); b's features split over tp exactly as x's (the column-parallel
 * fc1 output under expert tensor parallelism, stride kept) give the same
 * split output; x may not be a partial sum (the bias would be added once
 * per rank: fc2's bias follows the all-reduce, as RowParallelLinear's).
 */
#ifndef DG_GROUPED_BIAS_H
#define DG_GROUPED_BIAS_H

#include "dg_op.h"

extern const dg_op_def dg_op_grouped_bias_add;
extern const dg_op_def dg_op_grouped_bias_grad;

/* y = x + b[expert of each row]. Returns y's id, or -1. */
int dg_grouped_bias_add(dg_graph *g, int x, int tokens_per_expert, int b);

#endif /* DG_GROUPED_BIAS_H */
