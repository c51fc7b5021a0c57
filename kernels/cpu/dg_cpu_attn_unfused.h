/* dg_cpu_attn_unfused.h — the kernels of unfused attention (Megatron's
 * "local" / "unfused" backends): the S x S scores written to memory,
 * softmax over them, and the products that read them back.
 *
 * Layouts (row-major, the last dim contiguous):
 *   a [B, S, Ha, D], b [B, S, Hb, D]  heads interleaved per token, as the
 *                                     QKV linears write them; Ha % Hb == 0
 *                                     and head h of a pairs with head
 *                                     h / (Ha / Hb) of b (GQA)
 *   p, s [B, Ha, S, S]                one S x S matrix per (sample, head):
 *                                     row i is query i, column j key j
 *
 *   scores:     s[b,h]   = scale a[b,:,h,:] b[b,:,h/g,:]^T           [S, S]
 *   context:    o[b,:,h] = scale p[b,h] b[b,:,h/g,:]                 [S, D]
 *   context_t:  o[b,:,k] = scale sum_{h: h/g = k} p[b,h]^T a[b,:,h,:] [S, D]
 *               (o is [B, S, Hb, D]; heads of a group summed in order)
 *   softmax:    p = softmax of each row of s; with causal, row i over
 *               columns j <= i and zero beyond (the upper triangle masked)
 *   softmax_bwd: ds = p * (dp - rowsum(p * dp))
 *
 * Each (sample, head) product is one single-threaded cblas_sgemm of a fixed
 * shape; the team takes turns over those units, so results do not depend on
 * the thread count. All full S x S: as Megatron's baddbmm / bmm, the
 * products compute the masked upper triangle too.
 */
#ifndef DG_CPU_ATTN_UNFUSED_H
#define DG_CPU_ATTN_UNFUSED_H

#include <stdint.h>

#include "dg_team.h"

typedef struct dg_unfused_dims {
    int64_t B, S, Ha, Hb, D;
} dg_unfused_dims;

void dg_cpu_attn_scores(const dg_team *t, const dg_unfused_dims *d, float scale, const float *a, const float *b,
                        float *s);
void dg_cpu_attn_context(const dg_team *t, const dg_unfused_dims *d, float scale, const float *p, const float *b,
                         float *o);
void dg_cpu_attn_context_t(const dg_team *t, const dg_unfused_dims *d, float scale, const float *p,
                           const float *a, float *o);
/* rows = B * H * S rows of S columns; a row's query index is row % S */
void dg_cpu_attn_softmax(const dg_team *t, int64_t rows, int64_t S, int causal, const float *s, float *p);
void dg_cpu_attn_softmax_bwd(const dg_team *t, int64_t rows, int64_t S, const float *p, const float *dp,
                             float *ds);

#endif /* DG_CPU_ATTN_UNFUSED_H */
