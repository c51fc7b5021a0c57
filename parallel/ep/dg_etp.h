/* dg_etp.h — the MoE experts under tensor parallelism (expert tensor
 * parallelism, --expert-tensor-parallel-size; the grid is in sched/dg_grid.h).
 *
 * Under TP the MoE layer's input x [T, H] is replicated over the tp group
 * (it follows the attention's row-parallel all-reduce and a norm), and so
 * are the router's probs and indices (the router's weight is replicated and
 * every tp rank computes the same routing). dg_etp_experts lowers the
 * logical moe_experts node for the mesh's tp size:
 *
 *   tp 1           dg_ep_experts (dg_ep.h) as it is.
 *   ETP = TP       the expert weights are tp-split (fc1 [G, 2F/tp, H],
 *                  gate and up each split; fc2 [G, H, F/tp]); every tp rank
 *                  dispatches every token, and inside dg_ep_experts each
 *                  chunk's expert MLP is Megatron's column/row-parallel
 *                  pair on the dispatched rows: copy_to_group (identity;
 *                  backward all-reduce over tp) -> fc1 -> swiglu -> fc2
 *                  (a partial sum over tp) -> all_reduce over tp.
 *                  The all-reduce moves the chunk's dispatch buffer (its
 *                  static receive bound of rows, dg_ep.h); reducing y
 *                  [T, H] after the combine instead would move less, but
 *                  needs partial sums to pass through the dispatch ops'
 *                  layout rules (not built).
 *   ETP = 1        the expert weights are whole on every tp rank. Tp rank r
 *                  serves token rows [r T / tp, (r + 1) T / tp) only:
 *                    x', probs' = copy_to_group(x), copy_to_group(probs)
 *                    indices'   = moe_tp_mask_indices(indices, tp_rank):
 *                                 the other rows' slots -1 (dropped), so
 *                                 the EP dispatch carries only this
 *                                 rank's tokens
 *                    y          = dg_ep_experts(x', probs', indices')
 *                    y'         = moe_tp_mask_rows(y, tp_rank): the other
 *                                 rows zeroed, laid out partial(tp)
 *                    out        = all_reduce(y') over tp
 *                  The slices are disjoint and cover every row, so the sum
 *                  over tp is the full output, and no token is counted
 *                  twice: each expert gradient on a tp rank holds its
 *                  slice's tokens (hence expert gradients reduce over
 *                  EDP = TP x CP x DP), and the gradients of x and probs,
 *                  nonzero on the rank's slice only, are summed over tp by
 *                  the copy_to_group adjoints, so the router and the
 *                  attention below see the full, replicated gradient.
 *
 * The tp rank is the i32 input "tp_rank" (dg_mesh_coord_input), which the
 * trainer fills. Rows are sliced with floor division, so T need not divide.
 */
#ifndef DG_ETP_H
#define DG_ETP_H

#include "dg_ep.h"

/* "moe_tp_mask_indices" (indices i32 [T, k], tp_rank i32 [1]) i[0] tp size
 *   -> indices with the slots of rows outside this rank's slice set to -1. */
extern const dg_op_def dg_op_moe_tp_mask_indices;
/* "moe_tp_mask_rows" (y f32 [T, H], tp_rank i32 [1]) i[0] tp size
 *   -> y with rows outside this rank's slice zeroed; y replicated over tp
 *      gives a partial sum over tp. Adjoint: the same mask on dy. */
extern const dg_op_def dg_op_moe_tp_mask_rows;

int dg_moe_tp_mask_indices(dg_graph *g, int indices, int tp_rank, int tp);
int dg_moe_tp_mask_rows(dg_graph *g, int y, int tp_rank, int tp);

/* The experts for the mesh's tp size (above); returns y's id or -1 (g->err). */
int dg_etp_experts(dg_graph *g, const dg_ep_opts *o, const dg_ep_experts_args *a);

#endif /* DG_ETP_H */
