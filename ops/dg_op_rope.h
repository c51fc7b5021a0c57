/* dg_op_rope.h — rotary position embedding (Megatron-Core / Hugging Face
 * non-interleaved "rotate_half" form; see dg_cpu_rope.h for the formula).
 *
 *   rope(x [B, S, NH, D], base, pos_offset) -> [B, S, NH, D]
 *
 * Token s of every sequence sits at position pos_offset + s; rotary dim = D
 * (all of the head dim), D even, or R < D (Megatron's --rotary-percent):
 * then x[..., R:] passes through. pos_offset is for decoding with a KV cache.
 *
 * Attributes:
 *   i[0] = pos_offset   first position
 *   i[1] = inverse      1: rotate by -theta
 *   i[2] = rotary_dim   even, <= D; 0 means D
 *   i[3] = YaRN's original_max_position_embeddings
 *   i[4] = interleaved  1: pairs (2i, 2i+1) rotate in place, not (i, i + R/2)
 *   i[5] = YaRN's correction range unrounded (dg_rope_spec's unrounded)
 *   f[0] = base         e.g. 10000
 *   f[1] = YaRN's scaling factor (> 1: YaRN frequencies, dg_cpu_rope.h; else plain)
 *   f[2], f[3] = YaRN's beta_fast, beta_slow;  f[4] = the factor on cos and sin
 * The adjoint of a rotation is the inverse rotation, so the backward is the
 * same op with i[1] flipped.
 */
#ifndef DG_OP_ROPE_H
#define DG_OP_ROPE_H

#include "dg_cpu_rope.h"
#include "dg_op.h"

extern const dg_op_def dg_op_rope;

int dg_rope(dg_graph *g, int x, double base, int64_t pos_offset);
/* Rotate only the first rotary_dim (even) dims of each head (0: all). */
int dg_rope_partial(dg_graph *g, int x, double base, int64_t pos_offset, int64_t rotary_dim);

/* YaRN (Megatron's YarnRotaryEmbedding): factor > 1 (--rotary-scaling-factor),
 * the correction range's betas, original_max_position_embeddings, and the
 * factor on cos and sin (dg_rope_yarn_mscale of --mscale, --mscale-all-dim). */
typedef struct dg_rope_yarn_opts {
    double factor, beta_fast, beta_slow, mscale;
    int64_t original_max_position_embeddings;
    int interleaved; /* pairs (2i, 2i+1): MLA's pairing (also without YaRN) */
    int unrounded;   /* the correction range's dims not rounded to integers */
} dg_rope_yarn_opts;
/* rope of the first rotary_dim dims at positions 0.. with y's frequencies
 * (plain when y is NULL or y->factor <= 1) and pairing. */
int dg_rope_yarn(dg_graph *g, int x, double base, int64_t rotary_dim, const dg_rope_yarn_opts *y);

/* The frequencies a rope node's attrs ask for (f[0..4], i[3] as above; the
 * rope_pos nodes CP makes of rope nodes keep their attrs). */
dg_rope_spec dg_rope_spec_of(const dg_attrs *a);

#endif /* DG_OP_ROPE_H */
