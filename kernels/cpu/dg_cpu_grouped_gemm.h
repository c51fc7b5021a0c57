/* dg_cpu_grouped_gemm.h — one GEMM per expert over a row-grouped batch.
 *
 * Rows of x are grouped by expert: expert e owns the counts[e] rows starting
 * at off_e = counts[0] + ... + counts[e-1]. Counts are runtime values (read
 * from the i32 buffer here), the row count N is a static upper bound: rows
 * past sum(counts) are padding and come out zero.
 *
 * Work is cut into fixed blocks that depend only on the counts, never on the
 * thread count: (expert, block of DG_GG_BLOCK rows). Each block is one
 * single-threaded dg_cpu_sgemm call and the team takes whole blocks, so the
 * result is bitwise the same for any number of threads. A reduction over
 * tokens (the weight gradient) is never split: a block there is a block of
 * output rows, each with the expert's whole token range.
 */
#ifndef DG_CPU_GROUPED_GEMM_H
#define DG_CPU_GROUPED_GEMM_H

#include <stdint.h>

#include "dg_team.h"

#define DG_GG_BLOCK 64

/* y = x_e @ op(w_e) for each expert's rows.
 *   x [N, K], counts [E] i32, y [N, M]
 *   tw = 1: w [E, M, K], y_e = x_e @ w_e^T   (Megatron's layout, fc1/fc2 forward)
 *   tw = 0: w [E, K, M], y_e = x_e @ w_e     (the data gradient)
 * Returns 0, or -1 if a count is negative or they sum to more than N. */
int dg_cpu_grouped_gemm(const dg_team *team, int tw, int64_t E, const int32_t *counts, int64_t N,
                        int64_t K, int64_t M, const float *x, const float *w, float *y);

/* Weight gradient: out_e = a_e^T @ b_e for each expert.
 *   a [N, A], b [N, B], counts [E] i32, out [E, A, B]
 * An expert with no rows gets zeros. Same return as above. */
int dg_cpu_grouped_gemm_wgrad(const dg_team *team, int64_t E, const int32_t *counts, int64_t N,
                              int64_t A, int64_t B, const float *a, const float *b, float *out);

#endif /* DG_CPU_GROUPED_GEMM_H */
