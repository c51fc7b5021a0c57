/* dg_cpu_rope.h — rotary position embedding, non-interleaved ("rotate_half")
 * form, as in Megatron-Core and Hugging Face.
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

/* Angle of pair i (of D/2) at position pos: pos * base^(-2i/D). */
static inline DG_HD double dg_rope_angle(int64_t pos, int64_t i, int64_t D, double base) {
    return (double)pos * pow(base, -2.0 * (double)i / (double)D);
}

/* Rotate one pair by the angle whose cosine and sine are c and s (pass -s
 * for the inverse rotation). */
static inline DG_HD void dg_rope_pair(float x1, float x2, float c, float s, float *y1, float *y2) {
    *y1 = x1 * c - x2 * s;
    *y2 = x2 * c + x1 * s;
}

/* cos_t, sin_t [S, R/2]: tables for positions pos0 .. pos0 + S - 1, for
 * rotary dim R. */
void dg_cpu_rope_table(const dg_team *team, int64_t S, int64_t R, double base, int64_t pos0,
                       float *cos_t, float *sin_t);

/* x [B, S, NH, D] -> y [B, S, NH, D] (y may equal x), rotating the first R
 * (even, <= D) dims with tables from dg_cpu_rope_table for that R.
 * inverse = 1 rotates by -theta. */
void dg_cpu_rope_apply(const dg_team *team, const float *x, float *y, const float *cos_t,
                       const float *sin_t, int64_t B, int64_t S, int64_t NH, int64_t D, int64_t R,
                       int inverse);

#endif /* DG_CPU_ROPE_H */
