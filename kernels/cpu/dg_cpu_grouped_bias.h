/* dg_cpu_grouped_bias.h — a per-expert bias over rows grouped by expert
 * (the expert MLP's linear_fc1 / linear_fc2 biases, moe/dg_grouped_bias.h).
 *
 * Rows of x [N, M] are grouped by expert: expert e owns counts[e]
 * consecutive rows; rows past sum(counts) belong to no expert.
 *   fwd:  y[r] = x[r] + b[e(r)]   (rows of no expert copied unchanged)
 *   grad: db[e] = sum of dy over expert e's rows (zeros for an expert
 *         without rows), summed in row order for every column, so the
 *         result does not depend on the thread count.
 * Both return 0, or -1 when a count is negative or the counts sum past N.
 */
#ifndef DG_CPU_GROUPED_BIAS_H
#define DG_CPU_GROUPED_BIAS_H

#include <stdint.h>

#include "dg_team.h"

int dg_cpu_grouped_bias_fwd(const dg_team *team, int64_t E, const int32_t *counts, int64_t N, int64_t M,
                            const float *x, const float *b, float *y);
int dg_cpu_grouped_bias_grad(const dg_team *team, int64_t E, const int32_t *counts, int64_t N, int64_t M,
                             const float *dy, float *db);

#endif /* DG_CPU_GROUPED_BIAS_H */
