/* dg_cpu_act.h — activation functions: SwiGLU and GeLU, forward and backward.
 *
 * swiglu: x [rows, 2F] -> y [rows, F], y = silu(x[:, :F]) * x[:, F:], the
 * layout of Megatron's fused fc1 (gate first, up second; torch.chunk(x, 2, -1)).
 * gelu: the tanh approximation (dg_cpu_math.h), element-wise over [n].
 * Per-element math is in static inline helpers (DG_HD-ready) so a CUDA
 * kernel runs the same arithmetic. All splits are over rows / elements:
 * there is no reduction, results do not depend on the thread count.
 */
#ifndef DG_CPU_ACT_H
#define DG_CPU_ACT_H

#include <stdint.h>

#include "dg_cpu_math.h"
#include "dg_team.h"

/* y = silu(a) * b */
static inline DG_HD float dg_swiglu1(float a, float b) { return dg_silu(a) * b; }

/* Gradients of y = silu(a) * b given dy: da = dy * b * silu'(a), db = dy * silu(a). */
static inline DG_HD void dg_swiglu1_grad(float a, float b, float dy, float *da, float *db) {
    *da = dy * b * dg_silu_grad(a);
    *db = dy * dg_silu(a);
}

/* x [rows, 2F] -> y [rows, F] */
void dg_cpu_swiglu_fwd(const dg_team *team, const float *x, float *y, int64_t rows, int64_t F);
/* dy [rows, F], x [rows, 2F] -> dx [rows, 2F] */
void dg_cpu_swiglu_bwd(const dg_team *team, const float *dy, const float *x, float *dx,
                       int64_t rows, int64_t F);

/* x [n] -> y [n] */
void dg_cpu_gelu_fwd(const dg_team *team, const float *x, float *y, int64_t n);
/* dy [n], x [n] -> dx [n] = dy * gelu'(x) */
void dg_cpu_gelu_bwd(const dg_team *team, const float *dy, const float *x, float *dx, int64_t n);

#endif /* DG_CPU_ACT_H */
