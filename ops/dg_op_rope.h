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
 *   f[0] = base         e.g. 10000
 * The adjoint of a rotation is the inverse rotation, so the backward is the
 * same op with i[1] flipped.
 */
#ifndef DG_OP_ROPE_H
#define DG_OP_ROPE_H

#include "dg_op.h"

extern const dg_op_def dg_op_rope;

int dg_rope(dg_graph *g, int x, double base, int64_t pos_offset);
/* Rotate only the first rotary_dim (even) dims of each head (0: all). */
int dg_rope_partial(dg_graph *g, int x, double base, int64_t pos_offset, int64_t rotary_dim);

#endif /* DG_OP_ROPE_H */
