/* dg_ep_sort.h — the row-moving ops of expert parallelism.
 *
 * Chunk sorting (Megatron's sort_chunks_by_idxs). After the dispatch
 * all-to-all (graph/dg_collective_v.h) a rank holds the rows it received
 * grouped by (source rank r, local expert e), chunk (r, e) holding
 * counts[r*G + e] rows; the grouped GEMM wants them grouped by local expert:
 *
 *   "moe_ep_sort_chunks" (x [M, ...], counts i32 [P*G])
 *       i[0] P (source ranks)   i[1] inverse
 *     -> [M, ...]  inverse 0: (r, e) order -> (e, r) order; 1: back.
 *     Rows past sum(counts) are zero. counts is in (r, e) order both ways
 *     (it is the all-to-all's recv_counts). The adjoint is the same op with
 *     the other direction: a permutation's transpose is its inverse.
 *
 *   "moe_ep_count_sum" (counts i32 [P*G])  i[0] P   i[1] over_ranks
 *     -> i32 [G] (over_ranks 1: rows per local expert, the grouped GEMM's
 *        tokens_per_expert) or i32 [P] (over_ranks 0: rows per rank)
 *
 *   "moe_ep_transpose" (x [A*B*G])  i[0] A   i[1] B
 *     -> [A*B*G]: x viewed as [A, B, G] with the first two axes swapped
 *     ([B, A, G]); any dtype, no gradient. With overlap chunks, the EP block
 *     gathers the C chunks' per-expert counts, (chunk, rank, expert), into
 *     (rank, chunk, expert) so one all-to-all exchanges all of them.
 *
 * Row chunking, for the dispatch/compute overlap (dg_ep.h, opts.chunks):
 *
 *   "moe_ep_split_rows"  (x [T, ...])  -> C outputs [T/C, ...]  (C = 2..4;
 *       one op definition per C, since an op's output count is fixed)
 *   "moe_ep_concat_rows" (x_1 .. x_n)  -> [sum of rows, ...]    (n <= 8)
 *
 * Each is the other's adjoint. Any dtype; gradients flow for f32 only.
 *
 * Local expert selection, for the all-gather dispatcher:
 *
 *   "moe_ep_local_indices" (indices i32 [N, k], ep_rank i32 [1])  i[0] G  i[1] P
 *     -> i32 [N, k]: e - r*G for the experts e of rank r = ep_rank (the
 *        global experts r*G .. r*G+G-1), -1 for every other slot (and for
 *        slots already -1). The rank is a runtime input, not an attribute,
 *        so every rank of the EP group runs the same graph; a rank outside
 *        0..P-1 (an input nobody filled) fails the kernel.
 */
#ifndef DG_EP_SORT_H
#define DG_EP_SORT_H

#include "dg_op.h"

#define DG_EP_MAX_CHUNKS 4

extern const dg_op_def dg_op_moe_ep_sort_chunks;
extern const dg_op_def dg_op_moe_ep_count_sum;
extern const dg_op_def dg_op_moe_ep_concat_rows;
extern const dg_op_def dg_op_moe_ep_transpose;
/* dg_op_moe_ep_split_rows[C] for C = 2 .. DG_EP_MAX_CHUNKS (entries 0, 1 unused). */
extern const dg_op_def dg_op_moe_ep_split_rows[DG_EP_MAX_CHUNKS + 1];

extern const dg_op_def dg_op_moe_ep_local_indices;

/* Regroup x's rows from (rank, expert) to (expert, rank) chunks (inverse 0)
 * or back (inverse 1). Returns the output id, or -1. */
int dg_moe_ep_sort_chunks(dg_graph *g, int x, int counts, int P, int inverse);

/* Sum a [P, G] grid of i32 counts over ranks (-> [G]) or experts (-> [P]). */
int dg_moe_ep_count_sum(dg_graph *g, int counts, int P, int over_ranks);

/* x [A*B*G] as [A, B, G] -> [B, A, G] (G = numel / (A*B)). Returns the id or -1. */
int dg_moe_ep_transpose(dg_graph *g, int x, int A, int B);

/* Split x's rows into C equal chunks (C divides the row count, 2 <= C <=
 * DG_EP_MAX_CHUNKS); out[c] gets chunk c. C == 1 gives out[0] = x (no node).
 * Returns DG_OK or the builder error. */
int dg_moe_ep_split_rows(dg_graph *g, int x, int C, int *out);

/* Concatenate rows of xs[0..n). n == 1 returns xs[0]. Returns the id or -1. */
int dg_moe_ep_concat_rows(dg_graph *g, const int *xs, int n);

/* Indices of this rank's experts among G per rank on P ranks (see above).
 * Returns the output id or -1. */
int dg_moe_ep_local_indices(dg_graph *g, int indices, int ep_rank, int G, int P);

#endif /* DG_EP_SORT_H */
