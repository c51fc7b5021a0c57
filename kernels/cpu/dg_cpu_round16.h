/* dg_cpu_round16.h — rounding an fp32 value to the nearest bf16 or fp16
 * value, ties to even, kept as fp32 (the round16 op: ops/dg_op_round16.h).
 *
 * `static inline DG_HD` so the CUDA kernel (DG_HD = __host__ __device__
 * there) rounds with the same code the CPU tests cover: both sides give the
 * same bits.
 */
#ifndef DG_CPU_ROUND16_H
#define DG_CPU_ROUND16_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifndef DG_HD
#define DG_HD
#endif

/* bf16: fp32's range, 8 mantissa bits; inf and NaN pass through. */
static inline DG_HD float dg_round_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7f800000u) == 0x7f800000u) return x; /* inf, NaN */
    u += 0x7fffu + ((u >> 16) & 1u);                /* to nearest, ties to even */
    u &= 0xffff0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* fp16: +-inf past 65504's half ulp, subnormals down to 2^-24. */
static inline DG_HD float dg_round_fp16(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7f800000u) == 0x7f800000u) return x; /* inf, NaN */
    float a = fabsf(x);
    if (a >= 65520.0f) return copysignf(INFINITY, x); /* past the largest value's half ulp */
    if (a < 0x1p-14f) return rintf(x * 0x1p24f) * 0x1p-24f; /* subnormal: a fixed step of 2^-24 */
    u += 0xfffu + ((u >> 13) & 1u); /* keep 10 of the 23 mantissa bits, ties to even */
    u &= ~0x1fffu;
    memcpy(&x, &u, sizeof x);
    return x;
}

#endif /* DG_CPU_ROUND16_H */
