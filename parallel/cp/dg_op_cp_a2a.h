/* dg_op_cp_a2a.h — context parallelism's all-to-all variant
 * (--cp-comm-type a2a, DeepSpeed-Ulysses): attention's CP lowering when the
 * pass's comm_type is DG_CP_COMM_A2A.
 *
 * On CP rank r, q [B, 2c, Hq, D] and k, v [B, 2c, Hkv, D] hold this rank's
 * chunks r and 2cp-1-r of every head. An all-to-all over cp trades the
 * sequence split for a head split: q becomes [B, S, Hq/cp, D], every token
 * of Hq/cp heads (k, v likewise with Hkv/cp: the grouped K/V travel, so cp
 * must divide the query groups). The tokens arrive in rank order, chunks
 * 0, 2cp-1, 1, 2cp-2, ...: cp_seq_permute puts them in sequence order,
 * causal attention runs over the whole sequence on those heads, and the
 * inverse permutation and all-to-all bring o (and lse) back to this rank's
 * chunks of every head. Autodiff derives the backward (the all-to-all's
 * adjoint is the transposed all-to-all; the permutation's, its inverse).
 *
 *   cp_seq_permute(x) -> x with its chunks along dim i[2] reordered
 *     attrs: i[0] = cp, i[1] = inverse (0: rank order -> sequence order),
 *     i[2] = dim. 2cp equal chunks; in rank order block b holds chunk
 *     b/2 when b is even, 2cp-1-b/2 when odd.
 */
#ifndef DG_OP_CP_A2A_H
#define DG_OP_CP_A2A_H

#include "dg_op.h"
#include "dg_op_attention.h" /* dg_attn_opts */

#ifndef DG_HD
#define DG_HD /* __host__ __device__ in the CUDA backend's files */
#endif

extern const dg_op_def dg_op_cp_seq_permute;

/* The sequence chunk that block b of the rank-ordered sequence holds
 * (cp_seq_permute's map, shared with its CUDA kernel). */
static inline DG_HD int64_t dg_cp_chunk_of_block(int64_t b, int64_t cp) {
    return b % 2 == 0 ? b / 2 : 2 * cp - 1 - b / 2;
}

/* o (and *lse_out) of causal attention for local q, k, v by all-to-all over
 * cp groups of the heads; o's scale, window, dropout (its key and site) as
 * dg_attention_opt's (causal and softmax ignored: causal, vanilla). Each
 * rank attends over the whole sequence in order, so a window (0: none)
 * carries over as it is, and dropout's key gets the rank's first head
 * (this rank's share of the heads: dg_op_attn_key.h). */
int dg_ulysses_attention(dg_graph *g, int q, int k, int v, int cp, const dg_attn_opts *o, int *lse_out);

#endif /* DG_OP_CP_A2A_H */
