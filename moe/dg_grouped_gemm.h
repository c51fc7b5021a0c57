/* dg_grouped_gemm.h — per-expert GEMMs over rows grouped by expert.
 *
 * The expert MLP runs on permuted tokens (dg_permute.h): rows of x are
 * grouped by expert, expert e owning tokens_per_expert[e] consecutive rows.
 * The counts are runtime values read from the i32 tensor by the kernel; the
 * row count N is a static upper bound (T*k when dropless), and rows past
 * sum(counts) come out zero.
 *
 *   "grouped_gemm" (x [N, K], counts [E] i32, w)          i[0] transpose_w
 *       transpose_w = 1: w [E, M, K], y_e = x_e @ w_e^T  -> y [N, M]
 *                        (Megatron's expert weight layout: fc1 [E, 2F, H],
 *                        fc2 [E, H, F]; what the model builder uses)
 *       transpose_w = 0: w [E, K, M], y_e = x_e @ w_e    -> y [N, M]
 *   "grouped_gemm_wgrad" (a [N, A], b [N, B], counts [E] i32)
 *       out_e = a_e^T @ b_e                               -> out [E, A, B]
 *       (an expert with no tokens gets zeros)
 *
 * Backward of y = x w_e^T: dx = grouped_gemm(dy, counts, w, 0) and
 * dw = grouped_gemm_wgrad(dy, x, counts); of y = x w_e: dx =
 * grouped_gemm(dy, counts, w, 1) and dw = grouped_gemm_wgrad(x, dy, counts).
 * Each weight gradient element sums its expert's tokens inside one sgemm
 * call, so results do not depend on the thread count.
 */
#ifndef DG_GROUPED_GEMM_H
#define DG_GROUPED_GEMM_H

#include "dg_op.h"

extern const dg_op_def dg_op_grouped_gemm;
extern const dg_op_def dg_op_grouped_gemm_wgrad;

/* y = x_e @ op(w_e) per expert (see above). Returns y's id, or -1. */
int dg_grouped_gemm(dg_graph *g, int x, int tokens_per_expert, int w, int transpose_w);

/* The expert linear layer: dg_grouped_gemm(g, x, tokens_per_expert, w, 1). */
int dg_grouped_linear(dg_graph *g, int x, int tokens_per_expert, int w);

/* out [E, A, B] = a_e^T @ b_e per expert. Returns out's id, or -1. */
int dg_grouped_gemm_wgrad(dg_graph *g, int a, int b, int tokens_per_expert);

#endif /* DG_GROUPED_GEMM_H */
