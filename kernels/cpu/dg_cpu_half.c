/* dg_cpu_half.c — see dg_cpu_half.h.
 *
 * The array conversions run 8 lanes at a time with AVX2 (bf16: the same
 * integer rounding as dg_bf16_bits; fp16: F16C's conversion, IEEE's round to
 * nearest even with subnormals, which is dg_fp16_bits's), the scalar
 * functions for the tail and where the CPU has neither. Not AVX-512 BF16's
 * VCVTNEPS2BF16: it flushes subnormals to zero, so a run's bits would
 * depend on the CPU. */
#include "dg_cpu_half.h"

#if defined(__AVX2__) && defined(__F16C__)
#include <immintrin.h>
#define DG_HALF_SIMD 8
#else
#define DG_HALF_SIMD 0
#endif

typedef struct half_job {
    const void *x;
    void *y;
    int fp16;
} half_job;

#if DG_HALF_SIMD
/* 8 floats -> 8 bf16, dg_bf16_bits lane-wise. */
static inline __m128i bf16x8(const float *x) {
    const __m256i u = _mm256_loadu_si256((const __m256i *)x);
    const __m256i hi = _mm256_srli_epi32(u, 16);
    __m256i r = _mm256_add_epi32(u, _mm256_set1_epi32(0x7fff));
    r = _mm256_srli_epi32(_mm256_add_epi32(r, _mm256_and_si256(hi, _mm256_set1_epi32(1))), 16);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                           _mm256_set1_epi32(0x7f800000));
    r = _mm256_blendv_epi8(r, _mm256_or_si256(hi, _mm256_set1_epi32(0x40)), nan);
    r = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08); /* lanes 0..3, 4..7 */
    return _mm256_castsi256_si128(r);
}
#endif

static void to_half_range(void *arg, int64_t b, int64_t e) {
    const half_job *j = arg;
    const float *x = j->x;
    uint16_t *y = j->y;
    int64_t i = b;
#if DG_HALF_SIMD
    if (j->fp16)
        for (; i + 8 <= e; i += 8)
            _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    else
        for (; i + 8 <= e; i += 8) _mm_storeu_si128((__m128i *)(y + i), bf16x8(x + i));
#endif
    if (j->fp16)
        for (; i < e; i++) y[i] = dg_fp16_bits(x[i]);
    else
        for (; i < e; i++) y[i] = dg_bf16_bits(x[i]);
}

static void from_half_range(void *arg, int64_t b, int64_t e) {
    const half_job *j = arg;
    const uint16_t *x = j->x;
    float *y = j->y;
    int64_t i = b;
#if DG_HALF_SIMD
    if (j->fp16)
        for (; i + 8 <= e; i += 8) _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
    else
        for (; i + 8 <= e; i += 8)
            _mm256_storeu_si256((__m256i *)(y + i),
                                _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(x + i))), 16));
#endif
    if (j->fp16)
        for (; i < e; i++) y[i] = dg_fp16_value(x[i]);
    else
        for (; i < e; i++) y[i] = dg_bf16_value(x[i]);
}

/* Below this many elements one thread converts (a team's wake-up costs more). */
#define DG_HALF_SERIAL 65536

void dg_cpu_to_half(const dg_team *team, const float *x, uint16_t *y, int64_t n, int fp16) {
    half_job j = {x, y, fp16};
    if (!team || n < DG_HALF_SERIAL) to_half_range(&j, 0, n);
    else dg_team_run(team, n, to_half_range, &j);
}

void dg_cpu_from_half(const dg_team *team, const uint16_t *x, float *y, int64_t n, int fp16) {
    half_job j = {x, y, fp16};
    if (!team || n < DG_HALF_SERIAL) from_half_range(&j, 0, n);
    else dg_team_run(team, n, from_half_range, &j);
}
