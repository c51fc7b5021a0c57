/* dg_op_kv.h — ops of incremental decoding with a KV cache (dagatron
 * generate). Math in kernels/cpu/dg_cpu_kv.h. None is differentiable: they
 * exist for inference only (adjoint NULL, so autodiff refuses them).
 *
 * Positions are a runtime value: an i32 [B] input tensor `pos` (sequence
 * b's first new token sits at position pos[b]), so one graph serves every
 * decoding step instead of being rebuilt per position.
 *
 *   kv_append(cache [B, Smax, H, D], x [B, L, H, D], pos [B] i32)
 *       -> cache_out [B, Smax, H, D] = cache with rows pos[b] .. pos[b]+L-1
 *          of sequence b replaced by x[b]
 *   kv_attention(q [B, L, Hq, D], k [B, Smax, Hkv, D], v [B, Smax, Hkv, D], pos [B] i32)
 *       -> o [B, L, Hq, D]; query i of sequence b (at position pos[b] + i)
 *          sees keys 0 .. pos[b] + i. attrs f[0] = scale (> 0).
 *   rope_at(x [B, L, NH, D], pos [B] i32) -> y: dg_rope at position
 *          pos[b] + s for token s of sequence b. attrs f[0] = base, i[0] =
 *          rotary dim (0: the whole head, as dg_rope_partial). Uses the
 *          rope op's own table and rotation kernels, so a token rotated
 *          here is bitwise the one the training graph rotates.
 *   seq_last(x [B, L, H]) -> [B, 1, H]: each sequence's last token.
 *
 * How the in-place cache update fits a single-assignment graph.
 * Graph tensors are SSA (one producer each), which is what the verifier,
 * the memory planner and the dumps rely on. So kv_append is a pure function
 * from the old cache (a leaf input) to a new cache tensor, and readers take
 * the new one: the verifier accepts the graph unchanged, and any executor
 * computes the right values (without aliasing, the kernel copies the whole
 * cache first). Decoding makes it in place by binding cache and cache_out to
 * the same buffer: the kernel sees out == in and writes only the L new rows,
 * and after the step the buffer already is the next step's input cache, as
 * adamw's outputs alias its inputs (dg_op_adamw.h). That aliasing is sound
 * because the old cache has exactly one reader, the kv_append itself, which
 * dg_model_build_decode guarantees (every other reader takes cache_out, so
 * it runs after the write by a data edge).
 *
 * A position outside the cache (pos[b] < 0 or pos[b] + L > Smax) makes the
 * kernels fail with DG_EINPUT.
 */
#ifndef DG_OP_KV_H
#define DG_OP_KV_H

#include "dg_op.h"

extern const dg_op_def dg_op_kv_append;
extern const dg_op_def dg_op_kv_attention;
extern const dg_op_def dg_op_rope_at;
extern const dg_op_def dg_op_seq_last;

/* Each returns its output tensor id, or -1 after a builder error. */
int dg_kv_append(dg_graph *g, int cache, int x, int pos);
/* scale <= 0 means 1/sqrt(D). */
int dg_kv_attention(dg_graph *g, int q, int k_cache, int v_cache, int pos, double scale);
int dg_rope_at(dg_graph *g, int x, int pos, double base, int64_t rotary_dim);
int dg_seq_last(dg_graph *g, int x);

#endif /* DG_OP_KV_H */
