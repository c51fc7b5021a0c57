/* dg_cpu_ep.h — row movement for expert parallelism (parallel/ep/dg_ep.h).
 *
 * After the dispatch all-to-all a rank holds its received token rows grouped
 * by (source rank, local expert); the grouped GEMM wants them grouped by
 * (local expert, source rank). Megatron's sort_chunks_by_idxs does this
 * regrouping and, with the inverse order, undoes it before the combine.
 * Here the chunk grid is P source ranks x G local experts with the sizes
 * counts[r*G + e] (rows), exactly the receive counts of the all-to-all.
 *
 * All functions move whole rows of `row` bytes with memcpy, in a fixed
 * order; they are serial because they are memory copies dwarfed by the
 * expert GEMMs around them. Rows past the total count are zeroed.
 */
#ifndef DG_CPU_EP_H
#define DG_CPU_EP_H

#include <stddef.h>
#include <stdint.h>

/* out = x with chunk (r, e) moved from rank-major to expert-major order
 * (inverse = 0), or back (inverse = 1). x and out hold n_rows rows of `row`
 * bytes; counts is i32 [P*G] in (r, e) order in both directions. Returns 0,
 * or -1 if a count is negative or the counts sum past n_rows. */
int dg_cpu_ep_sort_chunks(const void *x, const int32_t *counts, int64_t P, int64_t G, int inverse,
                          int64_t n_rows, size_t row, void *out);

/* Sums over a [P, G] grid of i32 counts: over_ranks = 1 gives the per-local-
 * expert totals out[e] = sum_r counts[r*G+e] ([G]); 0 gives the per-rank
 * totals out[r] = sum_e counts[r*G+e] ([P]). */
void dg_cpu_ep_count_sum(const int32_t *counts, int64_t P, int64_t G, int over_ranks, int32_t *out);

/* out [B, A, G] = x [A, B, G] with the first two axes swapped (elements of
 * `elem` bytes): how the EP block turns per-chunk count grids into the
 * layout of one all-to-all and back. */
void dg_cpu_ep_transpose(const void *x, int64_t A, int64_t B, int64_t G, size_t elem, void *out);

/* Copy rows [r0, r0 + n) of x (rows of `row` bytes) to out. */
void dg_cpu_ep_copy_rows(const void *x, int64_t r0, int64_t n, size_t row, void *out);

#endif /* DG_CPU_EP_H */
