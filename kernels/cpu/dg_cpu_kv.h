/* dg_cpu_kv.h — the KV-cache kernels of incremental decoding.
 *
 * Decoding keeps, per layer, the keys and values of every position seen so
 * far in caches [B, Smax, Hkv, D]. A step feeds L new tokens per sequence
 * (L = the prompt length for the prefill, 1 afterwards); sequence b's new
 * tokens sit at positions pos[b] .. pos[b] + L - 1.
 *
 *   append     cache[b, pos[b] + i] = x[b, i] for i < L
 *   attention  o[b, i, h] = softmax_j(scale q[b, i, h] . k[b, j, h/G]) v[b, j, h/G]
 *              over keys j = 0 .. pos[b] + i (causal: a query sees its own
 *              position and everything before it), G = Hq / Hkv.
 *
 * The attention runs one (b, i, h) row per work item, online softmax over
 * blocks of DG_KV_BLOCK keys (one block of scores on the stack, no
 * workspace): the running max m and sum l rescale the output row in place.
 * The exp is dg_attn_exp, the same ~1 ulp polynomial the training
 * attention uses, so the two agree to float rounding. Each output row has
 * one writer and a fixed key order: bitwise the same for any thread count.
 *
 * Callers check 0 <= pos[b] and pos[b] + L <= Smax (dg_cpu_kv_check).
 */
#ifndef DG_CPU_KV_H
#define DG_CPU_KV_H

#include <stdint.h>

#include "dg_team.h"

#define DG_KV_BLOCK 64

/* Is every sequence's window [pos[b], pos[b] + L) inside [0, Smax)? Returns
 * the first offending b, or -1 when all are. */
int64_t dg_cpu_kv_check(const int32_t *pos, int64_t B, int64_t L, int64_t Smax);

/* cache_out = cache_in with rows [pos[b], pos[b] + L) of sequence b replaced
 * by x [B, L, row]. cache_out may equal cache_in (then only the new rows are
 * written: the in-place update decoding uses); otherwise the whole cache is
 * copied first. Caches are [B, Smax, row]. */
void dg_cpu_kv_append(const dg_team *team, const float *cache_in, float *cache_out, const float *x,
                      const int32_t *pos, int64_t B, int64_t Smax, int64_t L, int64_t row);

typedef struct dg_kv_attn_dims {
    int64_t B, L, Smax, Hq, Hkv, D;
    float scale;
} dg_kv_attn_dims;

/* o [B, L, Hq, D] from q [B, L, Hq, D] and caches k, v [B, Smax, Hkv, D]. */
void dg_cpu_kv_attention(const dg_team *team, const dg_kv_attn_dims *d, const float *q,
                         const float *k, const float *v, const int32_t *pos, float *o);

/* y [B, 1, H] = x[:, L - 1, :] for x [B, L, H]: the last new token of each
 * sequence (the only one whose logits sampling needs). */
void dg_cpu_seq_last(const float *x, float *y, int64_t B, int64_t L, int64_t H);

#endif /* DG_CPU_KV_H */
