/* sched_test_ops.h — test-only ops for the scheduler tests.
 *
 * The real ops (ops/, moe/) are written concurrently, so the executor is
 * tested with small ops of its own. They follow the kernel rules: rows are
 * split over the team, every reduction runs in one fixed order inside a row,
 * so results are bitwise reproducible for any worker count.
 *
 *   t_mix(a, b?, c?, d?) -> [R, C]: out[r][c] = a[r][c] + sum over inputs i>0
 *        of w_i * b_i[r][c], plus 1e-3 * (the row sum of the last input,
 *        accumulated left to right), then tanh. attrs.i[0] = jitter: if set,
 *        the kernel sleeps a random 0..jitter microseconds to shake timing.
 *   t_sum(a) -> [1]: the sum of all elements, in index order (a loss).
 *   t_fail(a) -> [R, C]: a kernel that fails (error propagation).
 *
 * Every compute kernel stamps the node's start and end from a global atomic
 * counter into t_ops_start/t_ops_end (test-only state) so tests can check
 * that each edge's producer ended before its consumer started.
 */
#ifndef SCHED_TEST_OPS_H
#define SCHED_TEST_OPS_H

#include "dg_op.h"

extern const dg_op_def t_op_mix;
extern const dg_op_def t_op_sum;
extern const dg_op_def t_op_fail;

#define T_OPS_MAX_NODES 4096
extern long t_ops_start[T_OPS_MAX_NODES], t_ops_end[T_OPS_MAX_NODES];
void t_ops_reset_stamps(void);

/* Builders: return the output tensor id. */
int t_mix(dg_graph *g, const int *in, int n_in, int jitter_us, const char *name);
int t_sum(dg_graph *g, int a, const char *name);

/* Fill a tensor's buffer with a deterministic pattern from `seed`. */
void t_fill(float *x, int64_t n, unsigned seed);

#endif
