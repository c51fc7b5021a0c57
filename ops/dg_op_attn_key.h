/* dg_op_attn_key.h — the attention key: what the fused attention's dropout
 * (kernels/cpu/dg_cpu_attention.h, dg_attn_drop) draws from.
 *
 *   attn_key(key i32 [4 or 5] [, coord i32 [1]]) -> i32 [5]
 *       key's first four ints (the graph's rng_key: seed, iteration, global
 *       first sample, training flag) and, at [4], the global index of the
 *       attention node's first query head: key[4] (0 for a 4-int key) plus
 *       coord times attrs i[0] (heads per coordinate). TP's pass adds the
 *       tp coordinate times the rank's heads when it splits the heads, CP's
 *       all-to-all the cp coordinate times its share of those.
 *   attn_key(key i32 [5], coord i32 [1]) with attrs i[1] = 1 -> i32 [6]
 *       {coord, key[0..4]}: ring attention's rank input (dg_op_ring_attn.h),
 *       the cp rank first, then the attention key.
 * Replicated; no gradient.
 */
#ifndef DG_OP_ATTN_KEY_H
#define DG_OP_ATTN_KEY_H

#include "dg_op.h"

#ifndef DG_HD
#define DG_HD /* __host__ __device__ in the CUDA backend's files */
#endif

extern const dg_op_def dg_op_attn_key;

/* The kernel's arithmetic, shared with the CUDA one: y from key (len ints),
 * coord and the attrs (heads per coordinate, ring). */
static inline DG_HD void dg_attn_key_fill(const int32_t *key, int64_t len, int32_t coord, int64_t per, int ring,
                                          int32_t *y) {
    if (ring) { /* the ring's rank input: the cp rank, then the key */
        y[0] = coord;
        for (int i = 0; i < 5; i++) y[1 + i] = key[i];
        return;
    }
    for (int i = 0; i < 4; i++) y[i] = key[i];
    y[4] = (int32_t)((len > 4 ? key[4] : 0) + (int64_t)coord * per);
}

/* The key of an attention node from the graph's rng_key (coord -1: none). */
int dg_attn_key(dg_graph *g, int key, int coord, int64_t heads_per_coord);

/* Ring attention's rank input: {cp_rank, key[0..4]}. */
int dg_attn_ring_key(dg_graph *g, int key, int cp_rank);

#endif /* DG_OP_ATTN_KEY_H */
