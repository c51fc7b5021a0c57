/* dg_cpu_glu.h — the gated linear units with options, as Megatron's MLP and
 * experts compute them (megatron/core/transformer/mlp.py's glu(), and the
 * fused weighted_bias_quick_geglu / weighted_bias_swiglu with a clamp):
 *
 *   x [rows, 2F] = [a | b] (gate half first, linear half second)
 *   a' = min(a, c),  b' = clamp(b, -c, c)       (c: --activation-func-clamp-value;
 *                                                 no clamp when c <= 0)
 *   y  = act(a') * (b' + offset)                 (offset: --glu-linear-offset)
 *   act = silu (SwiGLU) or quick_gelu(z) = z sigmoid(1.702 z) (--quick-geglu)
 *
 * The clamps pass the gradient where the value is inside [min, max], ends
 * included (torch.clamp's backward). Per-element math is static inline
 * (DG_HD) so a CUDA kernel can run the same arithmetic; splits are over rows,
 * so results do not depend on the thread count.
 */
#ifndef DG_CPU_GLU_H
#define DG_CPU_GLU_H

#include <stdint.h>

#include "dg_cpu_math.h"
#include "dg_team.h"

typedef enum dg_glu_act { DG_GLU_SILU = 0, DG_GLU_QUICK_GELU = 1 } dg_glu_act;

/* quick_gelu(z) = z sigmoid(1.702 z) and its derivative s (1 + 1.702 z (1 - s)). */
static inline DG_HD float dg_quick_gelu(float z) { return z * dg_sigmoid(1.702f * z); }
static inline DG_HD float dg_quick_gelu_grad(float z) {
    float s = dg_sigmoid(1.702f * z);
    return s * (1.0f + 1.702f * z * (1.0f - s));
}

static inline DG_HD float dg_glu_actf(int act, float z) { return act == DG_GLU_QUICK_GELU ? dg_quick_gelu(z) : dg_silu(z); }
static inline DG_HD float dg_glu_actf_grad(int act, float z) {
    return act == DG_GLU_QUICK_GELU ? dg_quick_gelu_grad(z) : dg_silu_grad(z);
}

/* y = act(min(a, c)) * (clamp(b, -c, c) + offset); c <= 0: no clamp. */
static inline DG_HD float dg_glu1(int act, float offset, float c, float a, float b) {
    if (c > 0) {
        a = a > c ? c : a;
        b = b > c ? c : (b < -c ? -c : b);
    }
    return dg_glu_actf(act, a) * (b + offset);
}

/* Gradients of dg_glu1 given dy. */
static inline DG_HD void dg_glu1_grad(int act, float offset, float c, float a, float b, float dy, float *da,
                                      float *db) {
    float pa = 1.0f, pb = 1.0f;
    if (c > 0) {
        if (a > c) {
            a = c;
            pa = 0.0f;
        }
        if (b > c || b < -c) {
            b = b > c ? c : -c;
            pb = 0.0f;
        }
    }
    *da = pa * dy * (b + offset) * dg_glu_actf_grad(act, a);
    *db = pb * dy * dg_glu_actf(act, a);
}

/* x [rows, 2F] -> y [rows, F] */
void dg_cpu_glu_fwd(const dg_team *team, int act, float offset, float clamp, const float *x, float *y,
                    int64_t rows, int64_t F);
/* dy [rows, F], x [rows, 2F] -> dx [rows, 2F] */
void dg_cpu_glu_bwd(const dg_team *team, int act, float offset, float clamp, const float *dy, const float *x,
                    float *dx, int64_t rows, int64_t F);

#endif /* DG_CPU_GLU_H */
