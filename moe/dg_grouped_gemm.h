/* dg_grouped_gemm.h — per-expert GEMMs over rows grouped by expert.
 *
 * The expert MLP runs on permuted tokens (dg_permute.h): rows of x are
 * grouped by expert, expert e owning tokens_per_expert[e] consecutive rows.
 * The counts are runtime values read from the i32 tensor by the kernel; the
 * row count N is a static upper bound (T*k when dropless), and rows past
 * sum(counts) come out zero.
 *
 *   "grouped_gemm" (x [N, K], counts [E] i32, w)          i[0] transpose_w,
 *                                                         i[1] expected rows
 *       transpose_w = 1: w [E, M, K], y_e = x_e @ w_e^T  -> y [N, M]
 *                        (Megatron's expert weight layout: fc1 [E, 2F, H],
 *                        fc2 [E, H, F]; what the model builder uses)
 *       transpose_w = 0: w [E, K, M], y_e = x_e @ w_e    -> y [N, M]
 *   "grouped_gemm_wgrad" (a [N, A], b [N, B], counts [E] i32)   i[0] expected rows
 *       out_e = a_e^T @ b_e                               -> out [E, A, B]
 *       (an expert with no tokens gets zeros)
 *
 * Backward of y = x w_e^T: dx = grouped_gemm(dy, counts, w, 0) and
 * dw = grouped_gemm_wgrad(dy, x, counts); of y = x w_e: dx =
 * grouped_gemm(dy, counts, w, 1) and dw = grouped_gemm_wgrad(x, dy, counts).
 * Each weight gradient element sums its expert's tokens inside one sgemm
 * call, so results do not depend on the thread count.
 *
 * Expected rows: a node's cost (priorities, the plan's timeline and its
 * memory) is over the static bound N, the worst case. An EP rank's receive
 * buffer is bounded by ep x its tokens x k, but under balanced routing it
 * receives its tokens x k: the EP lowering says so
 * (dg_grouped_linear_expect), the backward's grouped GEMMs inherit it (0
 * means N), and `dagatron simulate`, which predicts time rather than plans
 * for the worst, scales the work by dg_grouped_gemm_routed_fraction.
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

/* The same, costed at `expected_rows` routed rows (0: x's rows; see above). */
int dg_grouped_linear_expect(dg_graph *g, int x, int tokens_per_expert, int w, int64_t expected_rows);

/* expected rows / N of a grouped_gemm or grouped_gemm_wgrad node (1 for any
 * other node, or when no expectation was given). */
double dg_grouped_gemm_routed_fraction(const dg_graph *g, const dg_node *n);

/* out [E, A, B] = a_e^T @ b_e per expert. Returns out's id, or -1. */
int dg_grouped_gemm_wgrad(dg_graph *g, int a, int b, int tokens_per_expert);

#endif /* DG_GROUPED_GEMM_H */
