/* dg_cpu_math.h — scalar math shared by CPU kernels and (later) CUDA kernels.
 *
 * Everything here is `static inline` over plain floats so a .cu file can
 * include it with DG_HD defined as __host__ __device__ and the CPU tests
 * cover the same arithmetic the GPU will run.
 */
#ifndef DG_CPU_MATH_H
#define DG_CPU_MATH_H

#include <math.h>

#ifndef DG_HD
#define DG_HD
#endif

static inline DG_HD float dg_silu(float x) { return x / (1.0f + expf(-x)); }

/* d silu(x) / dx = s(x) * (1 + x * (1 - s(x))), s = sigmoid */
static inline DG_HD float dg_silu_grad(float x) {
    float s = 1.0f / (1.0f + expf(-x));
    return s * (1.0f + x * (1.0f - s));
}

static inline DG_HD float dg_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

/* GeLU, tanh approximation (what Megatron's bias_gelu uses). */
static inline DG_HD float dg_gelu(float x) {
    const float c = 0.7978845608028654f; /* sqrt(2/pi) */
    float u = c * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + tanhf(u));
}

static inline DG_HD float dg_gelu_grad(float x) {
    const float c = 0.7978845608028654f;
    float x2 = x * x;
    float u = c * (x + 0.044715f * x2 * x);
    float t = tanhf(u);
    float du = c * (1.0f + 3.0f * 0.044715f * x2);
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

#endif /* DG_CPU_MATH_H */
