/* dg_cpu_half.h — 16-bit floats (bf16, fp16) as stored in a graph's
 * tensors, and their conversions to and from f32.
 *
 * A 16-bit tensor holds the values' bit patterns (uint16_t). f32 -> 16 bits
 * rounds to nearest, ties to even; NaN stays a (quiet) NaN; bf16 keeps f32's
 * range; fp16 overflows to +-inf past 65504's half ulp and has subnormals
 * down to 2^-24. 16 bits -> f32 is exact. The scalar functions are `static
 * inline DG_HD` so the CUDA kernels (DG_HD = __host__ __device__ there)
 * convert with the code the CPU tests cover: both sides give the same bits.
 * The array loops are branch-free so the compiler vectorizes them (same
 * bits on every CPU: no instruction that flushes subnormals).
 */
#ifndef DG_CPU_HALF_H
#define DG_CPU_HALF_H

#include <stdint.h>
#include <string.h>

#include "dg_team.h"

#ifndef DG_HD
#define DG_HD
#endif

/* bf16: the top 16 bits of the f32, rounded. */
static inline DG_HD uint16_t dg_bf16_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    uint32_t nan = (u & 0x7fffffffu) > 0x7f800000u;
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16; /* to nearest, ties to even */
    return (uint16_t)(nan ? (u >> 16) | 0x40u : r);
}

static inline DG_HD float dg_bf16_value(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* fp16: 5 exponent bits (bias 15), 10 mantissa bits. */
static inline DG_HD uint16_t dg_fp16_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);  /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520: inf */
    if (a < 0x38800000u) {                                   /* < 2^-14: subnormal, a step of 2^-24 */
        if (a < 0x33000000u) return (uint16_t)sign;          /* <= 2^-25: rounds to 0 */
        uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e;                           /* 14..24: keep m >> shift */
        uint32_t half = 1u << (shift - 1), rest = m & ((1u << shift) - 1u), q = m >> shift;
        q += rest > half || (rest == half && (q & 1u));
        return (uint16_t)(sign | q);
    }
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u); /* keep 10 of 23 mantissa bits, ties to even */
    return (uint16_t)(sign | ((r - 0x38000000u) >> 13)); /* rebias 127 -> 15; a carry bumps the exponent */
}

static inline DG_HD float dg_fp16_value(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
    if (e == 0x1f) {
        u = sign | 0x7f800000u | (m << 13); /* inf, NaN */
    } else if (e == 0) {                    /* zero, subnormal: m * 2^-24 */
        float v = (float)m * 0x1p-24f;
        memcpy(&u, &v, sizeof u);
        u |= sign;
    } else {
        u = sign | ((e + 112u) << 23) | (m << 13);
    }
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* 16 bits of `dtype` kind: fp16 != 0 for fp16, else bf16. */
static inline DG_HD uint16_t dg_half_bits(float x, int fp16) { return fp16 ? dg_fp16_bits(x) : dg_bf16_bits(x); }
static inline DG_HD float dg_half_value(uint16_t h, int fp16) { return fp16 ? dg_fp16_value(h) : dg_bf16_value(h); }

/* y[0..n) = x[0..n) converted; over team's threads when given (may be NULL). */
void dg_cpu_to_half(const dg_team *team, const float *x, uint16_t *y, int64_t n, int fp16);
void dg_cpu_from_half(const dg_team *team, const uint16_t *x, float *y, int64_t n, int fp16);

#endif /* DG_CPU_HALF_H */
