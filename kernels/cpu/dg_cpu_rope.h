/* dg_cpu_rope.h — rotary position embedding, non-interleaved ("rotate_half")
 * form, as in Megatron-Core and Hugging Face (interleaved pairs too, below).
 *
 * x is [B, S, NH, D] (batch, sequence, heads, head dim), D even. The head
 * dimension splits into halves x1 = x[..., :D/2], x2 = x[..., D/2:], and
 * pair i of a token at position p = pos0 + s is rotated by theta = p * f_i:
 *   y1 = x1 * cos(theta) - x2 * sin(theta)
 *   y2 = x2 * cos(theta) + x1 * sin(theta)
 * with f_i = 1 / base^(2i / D), i = 0 .. D/2 - 1 (rotary dim = D).
 * With a rotary dim R < D (Megatron's --rotary-percent), only x[..., :R]
 * rotates, as above with R in place of D; x[..., R:] passes through.
 *
 * The rotation is orthogonal, so its adjoint is the rotation by -theta:
 * `inverse` = 1 applies that (the backward pass).
 *
 * YaRN (Megatron's --rope-type yarn, yarn_rotary_pos_embedding.py) changes
 * the frequencies and scales cos and sin (dg_rope_spec below); the rotation
 * stays a rotation times a constant, so the adjoint is still the inverse
 * flag with the same scale.
 *
 * The cos/sin tables are computed in double and rounded to float once.
 * (Megatron and HF form the angle p * inv_freq in float32, whose rounding
 * error grows with the position: up to ~2e-4 rad at p = 4096. The double angle is
 * the exact value those approximate, is independent of the libm's powf, and
 * is what the PyTorch oracle test, tests/reference/, computes.)
 */
#ifndef DG_CPU_ROPE_H
#define DG_CPU_ROPE_H

#include <math.h>
#include <stdint.h>

#include "dg_cpu_math.h"
#include "dg_team.h"

/* The frequencies of a rope: plain (base) or YaRN. yarn_factor > 1 turns
 * YaRN on (--rotary-scaling-factor): pair i's frequency blends the plain
 * one f_i (extrapolation) and f_i / factor (interpolation) by a linear ramp
 * over i between the correction dims of beta_fast and beta_slow rotations at
 * orig_max_pos positions (floor / ceil unless unrounded, clamped to
 * [0, R - 1]), and cos and sin are multiplied by mscale (the concentration
 * factor, dg_rope_yarn_mscale). */
typedef struct dg_rope_spec {
    double base;
    double yarn_factor;            /* <= 1: plain rope */
    double beta_fast, beta_slow;   /* the correction range's rotations (MLA: 32, 1) */
    double orig_max_pos;           /* the original context (MLA: 4096) */
    double mscale;                 /* multiplies cos and sin (1: none) */
    int unrounded;                 /* 1: the correction dims stay fractional (Megatron's
                                    * --no-yarn-correction-range-round-to-int, HF's truncate false) */
} dg_rope_spec;

/* Megatron's _yarn_get_mscale(scale, m): 1 for scale <= 1, else 0.1 m ln(scale) + 1. */
static inline DG_HD double dg_rope_yarn_get_mscale(double scale, double m) {
    return scale <= 1.0 ? 1.0 : 0.1 * m * log(scale) + 1.0;
}

/* The concentration factor multiplying cos and sin under YaRN:
 * mscale(factor, --mscale) / mscale(factor, --mscale-all-dim). */
static inline DG_HD double dg_rope_yarn_mscale(double factor, double mscale, double mscale_all_dim) {
    return dg_rope_yarn_get_mscale(factor, mscale) / dg_rope_yarn_get_mscale(factor, mscale_all_dim);
}

/* The dim of pair frequencies that makes num_rotations turns over orig positions. */
static inline DG_HD double dg_rope_yarn_corr_dim(double rot, int64_t R, double base, double orig) {
    return ((double)R * log(orig / (rot * 2.0 * 3.14159265358979323846))) / (2.0 * log(base));
}

/* Pair i's (of R/2) frequency under s. */
static inline DG_HD double dg_rope_inv_freq(const dg_rope_spec *s, int64_t i, int64_t R) {
    double f = pow(s->base, -2.0 * (double)i / (double)R);
    if (!(s->yarn_factor > 1.0)) return f;
    double lo = dg_rope_yarn_corr_dim(s->beta_fast, R, s->base, s->orig_max_pos);
    double hi = dg_rope_yarn_corr_dim(s->beta_slow, R, s->base, s->orig_max_pos);
    if (!s->unrounded) {
        lo = floor(lo);
        hi = ceil(hi);
    }
    if (lo < 0) lo = 0;
    if (hi > (double)(R - 1)) hi = (double)(R - 1);
    if (lo == hi) hi += 0.001; /* Megatron's guard against a zero-width ramp */
    double ramp = ((double)i - lo) / (hi - lo);
    ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
    return f / s->yarn_factor * ramp + f * (1.0 - ramp);
}

/* Rotate one pair by the angle whose cosine and sine are c and s (pass -s
 * for the inverse rotation). */
static inline DG_HD void dg_rope_pair(float x1, float x2, float c, float s, float *y1, float *y2) {
    *y1 = x1 * c - x2 * s;
    *y2 = x2 * c + x1 * s;
}

/* cos_t, sin_t [S, R/2]: tables for positions pos0 .. pos0 + S - 1, for
 * rotary dim R, times s's mscale. */
void dg_cpu_rope_table(const dg_team *team, int64_t S, int64_t R, const dg_rope_spec *s, int64_t pos0,
                       float *cos_t, float *sin_t);
/* One (s, i) entry of those tables at position pos. */
static inline DG_HD void dg_rope_cos_sin(const dg_rope_spec *s, int64_t pos, int64_t i, int64_t R, float *c,
                                         float *sn) {
    double th = (double)pos * dg_rope_inv_freq(s, i, R);
    *c = (float)(cos(th) * s->mscale);
    *sn = (float)(sin(th) * s->mscale);
}

/* x [B, S, NH, D] -> y [B, S, NH, D] (y may equal x), rotating the first R
 * (even, <= D) dims with tables from dg_cpu_rope_table for that R.
 * inverse = 1 rotates by -theta. dg_cpu_rope_apply2 with interleaved = 1
 * rotates the pairs (2i, 2i+1) in place instead of (i, i + R/2) (Megatron's
 * rotary_interleaved; MLA's rope pairs alike, dg_model_mla.c). */
void dg_cpu_rope_apply(const dg_team *team, const float *x, float *y, const float *cos_t,
                       const float *sin_t, int64_t B, int64_t S, int64_t NH, int64_t D, int64_t R,
                       int inverse);
void dg_cpu_rope_apply2(const dg_team *team, const float *x, float *y, const float *cos_t,
                        const float *sin_t, int64_t B, int64_t S, int64_t NH, int64_t D, int64_t R,
                        int inverse, int interleaved);

/* Where pair i (of R/2) sits: dims (i, i + R/2), or (2i, 2i + 1) interleaved. */
static inline DG_HD void dg_rope_pair_dims(int64_t i, int64_t R, int interleaved, int64_t *a, int64_t *b) {
    *a = interleaved ? 2 * i : i;
    *b = interleaved ? 2 * i + 1 : i + R / 2;
}

#endif /* DG_CPU_ROPE_H */
