/* dg_cpu_elementwise.h — element-wise and reduction kernels over flat float
 * arrays. Every buffer is [n] floats unless stated. */
#ifndef DG_CPU_ELEMENTWISE_H
#define DG_CPU_ELEMENTWISE_H

#include <stdint.h>

#include "dg_team.h"

/* y = a + b */
void dg_cpu_add(const dg_team *team, const float *a, const float *b, float *y, int64_t n);
/* y = a * b */
void dg_cpu_mul(const dg_team *team, const float *a, const float *b, float *y, int64_t n);
/* y = alpha * x */
void dg_cpu_scale(const dg_team *team, const float *x, float alpha, float *y, int64_t n);
/* y = value */
void dg_cpu_fill(const dg_team *team, float value, float *y, int64_t n);

/* Sum of x in a fixed order: x is cut into DG_SUM_CHUNK-element chunks
 * whose partial sums (in double) are added in chunk order, whatever the
 * number of threads. Returns the sum. */
#define DG_SUM_CHUNK 4096
double dg_cpu_sum(const dg_team *team, const float *x, int64_t n);

#endif /* DG_CPU_ELEMENTWISE_H */
