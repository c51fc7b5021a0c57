/* dg_op_chunk.h — equal chunks of a dimension, for graph rewrites that
 * split work into pieces (the TP communication overlap: parallel/tp/dg_tp_seq.h,
 * dg_tp_overlap).
 *
 *   slice_dim(x)      i[0] dim  i[1] j  i[2] C  -> chunk j of C equal ones of
 *                     x along dim (shape[dim] / C)
 *   unslice_dim(x)    same attrs -> [.., shape[dim] * C, ..]: x at chunk j,
 *                     zeros elsewhere (slice_dim's adjoint)
 *   concat_dim(x_0 .. x_{n-1})  i[0] dim -> the inputs (same shapes) one
 *                     after the other along dim; its adjoint slices
 *
 * f32. Sharding: any layout passes through (the inputs of concat_dim laid
 * out alike): each rank chunks its own tensor, so on a split dim the
 * chunks are chunks of the rank's slice (the TP overlap's reduce-scattered
 * pieces concatenate to the rank's run of the sequence), and the ops are
 * linear, so a partial sum stays one.
 */
#ifndef DG_OP_CHUNK_H
#define DG_OP_CHUNK_H

#include "dg_op.h"

extern const dg_op_def dg_op_slice_dim;
extern const dg_op_def dg_op_unslice_dim;
extern const dg_op_def dg_op_concat_dim;

int dg_slice_dim(dg_graph *g, int x, int dim, int j, int C);
int dg_unslice_dim(dg_graph *g, int x, int dim, int j, int C);
/* n in 1 .. DG_MAX_INPUTS; n == 1 returns xs[0]. */
int dg_concat_dim(dg_graph *g, const int *xs, int n, int dim);

#endif /* DG_OP_CHUNK_H */
