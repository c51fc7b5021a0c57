/* dg_cpu_embedding.h — token embedding lookup and its backward.
 *
 * forward:  out[i, :] = table[tokens[i], :]
 * backward: dtable[v, :] = sum over i with tokens[i] == v of dout[i, :]
 *
 * table [V, H], tokens [N] int32, out / dout [N, H], dtable [V, H].
 * A token outside [0, V) is an input error (DG_EINPUT), checked before any
 * work starts.
 *
 * Determinism: the forward splits tokens over the team. The backward is a
 * scatter-add; instead of atomics it splits VOCAB ROWS: each thread owns a
 * range of rows of dtable, zeroes it, and scans all tokens in order, adding
 * the ones that fall in its range. Every row of dtable is so accumulated in
 * token order, bitwise the same for any thread count.
 */
#ifndef DG_CPU_EMBEDDING_H
#define DG_CPU_EMBEDDING_H

#include <stdint.h>

#include "dg_team.h"

/* Returns DG_OK, or DG_EINPUT (*bad_index = the offending position, when
 * bad_index is not NULL). */
int dg_cpu_embedding_fwd(const dg_team *team, const float *table, const int32_t *tokens,
                         float *out, int64_t N, int64_t V, int64_t H, int64_t *bad_index);

int dg_cpu_embedding_bwd(const dg_team *team, const float *dout, const int32_t *tokens,
                         float *dtable, int64_t N, int64_t V, int64_t H, int64_t *bad_index);

/* Vocab-parallel (Megatron's VocabParallelEmbedding): this rank holds rows
 * [lo, lo + vl) of the whole [V, vl * tp] table as table [vl, H]. The
 * forward gives a zero row for a token outside them (the tp group's sum is
 * the lookup); the backward fills dtable [vl, H] from the tokens inside
 * only. A token outside [0, V) is still DG_EINPUT. The whole-table calls
 * above are these with lo = 0, vl = V. */
int dg_cpu_vocab_embedding_fwd(const dg_team *team, const float *table, const int32_t *tokens,
                               float *out, int64_t N, int64_t vl, int64_t H, int64_t lo, int64_t V,
                               int64_t *bad_index);
int dg_cpu_vocab_embedding_bwd(const dg_team *team, const float *dout, const int32_t *tokens,
                               float *dtable, int64_t N, int64_t vl, int64_t H, int64_t lo, int64_t V,
                               int64_t *bad_index);

#endif /* DG_CPU_EMBEDDING_H */
