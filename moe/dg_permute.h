/* dg_permute.h — token permutation for the experts and its inverse.
 *
 * permute (Megatron's moe_utils.permute, the dropless alltoall/allgather
 * dispatchers' local step): copies each token's row once per routed slot so
 * that rows are grouped by expert in ascending expert order, in token order
 * within an expert:
 *     x [T, H] f32, indices [T, k] i32  ->
 *         x_perm            f32 [T*k, H]
 *         tokens_per_expert i32 [E]      rows each expert owns (kept slots)
 *         row_map           i32 [T*k]    row r came from slot row_map[r] =
 *                                        t*k + j (token t, slot j); -1 for
 *                                        unused tail rows
 * Slots with index -1 (dropped by the router's capacity) are skipped; their
 * rows are missing from the front part, so the last T*k - sum(counts) rows
 * are zero padding (static shapes are upper bounds).
 *
 * unpermute (Megatron's unpermute with probs): the weighted sum back
 *     y[t] = sum over slots j, in slot order, of probs[t, j] * y_perm[row(t, j)]
 * giving [T, H]. Its gradient w.r.t. y_perm scales each row by its prob, the
 * gradient w.r.t. probs is <dy[t], y_perm[row(t, j)]>.
 *
 * The backward of permute is the same sum without probs (a scatter-add of
 * the k copies, in slot order), so it is "moe_unpermute" without the probs
 * input. Everything is deterministic: each output row is written by one
 * thread and sums run in slot order.
 *
 * Ops and attr slots:
 *   "moe_permute"  (x, indices)                    i[0] num_experts E
 *   "moe_unpermute" (y_perm, row_map [, probs])    i[0] T, i[1] k  -> [T, H]
 *   "moe_gather"   (x, row_map [, probs])          i[0] k          -> [N, H]
 *       out[r] = probs[s] * x[s / k] for s = row_map[r] (the backward of
 *       unpermute w.r.t. y_perm; also the data movement of permute)
 *   "moe_unpermute_probs_grad" (dy, y_perm, row_map) i[0] k        -> [T, k]
 */
#ifndef DG_PERMUTE_H
#define DG_PERMUTE_H

#include "dg_op.h"

extern const dg_op_def dg_op_moe_permute;
extern const dg_op_def dg_op_moe_unpermute;
extern const dg_op_def dg_op_moe_gather;
extern const dg_op_def dg_op_moe_unpermute_probs_grad;

typedef struct dg_permute_out {
    int x_perm;            /* f32 [T*k, H] */
    int tokens_per_expert; /* i32 [E] */
    int row_map;           /* i32 [T*k] */
} dg_permute_out;

/* Permute x [T, H] by the router's indices [T, k] over num_experts experts.
 * Fills *out (may be NULL) and returns x_perm's id, or -1 after an error. */
int dg_moe_permute(dg_graph *g, int x, int indices, int num_experts, dg_permute_out *out);

/* y [T, H] = sum_j probs[t, j] * y_perm[row(t, j)]; probs [T, k] f32.
 * Returns y's id, or -1. */
int dg_moe_unpermute(dg_graph *g, int y_perm, int probs, int row_map);

/* The unweighted sum back to [num_tokens, H]: permute's backward. */
int dg_moe_unpermute_sum(dg_graph *g, int y_perm, int row_map, int64_t num_tokens, int topk);

/* out [N, H] with N = len(row_map): x's rows at the permuted positions,
 * scaled by probs when probs >= 0. */
int dg_moe_gather(dg_graph *g, int x, int row_map, int probs, int topk);

#endif /* DG_PERMUTE_H */
