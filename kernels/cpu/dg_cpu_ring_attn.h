/* dg_cpu_ring_attn.h — ring attention's pieces on the CPU: block attention
 * of a CP rank's local queries against one K/V chunk pair, and the
 * online-softmax merge of two partial results by their log-sum-exp.
 *
 * A CP rank holds 2 chunks of c tokens (parallel/cp/dg_pass_cp.h): local
 * rows [0, c) are half A (an early chunk), [c, 2c) half B (a late one).
 * Buffers (row-major):
 *   q, o, do, dq  [B, 2c, Hq, D]     k, v, dk, dv  [B, 2c, Hkv, D]
 *   lse, dlse     [B, Hq, 2c]        d->S = 2c; d->causal, d->scale as in
 *                                    dg_cpu_attention.h (causal ignored)
 * Dropout (d->drop.p > 0): d->drop's places are the rank's chunks (qa, qb:
 * r, 2cp-1-r) and the K/V's (ka, kb: j, 2cp-1-j) with qc = kc = c, and
 * d->drop.S the whole sequence; each c x c block draws at its two chunks.
 * Blocks merge by lse as without: the sums l are undropped.
 * Modes, by where the K/V pair in hand came from (rank j, this rank r):
 *   DIAG   j == r: causal attention over the local 2c tokens, which is
 *          exactly the right mask (A sees A causally, B sees A fully and B
 *          causally, A never sees B);
 *   LOWER  j < r: both halves see the K/V's half A (chunk j) fully and
 *          nothing of its half B (chunk 2cp-1-j, later than both);
 *   UPPER  j > r: half A sees nothing (o = 0, lse = -inf) and half B sees
 *          both K/V halves fully.
 * LOWER and UPPER each run two c x c non-causal blocks (Megatron's balance:
 * every step costs the same on every rank). The backward of a block reads
 * its (o, lse), so a block split into sub-blocks needs no more than the
 * combined (o, lse): flash attention's tiling identity.
 */
#ifndef DG_CPU_RING_ATTN_H
#define DG_CPU_RING_ATTN_H

#include <math.h>

#include "dg_cpu_attention.h"

typedef enum dg_ring_mode { DG_RING_DIAG = 0, DG_RING_LOWER, DG_RING_UPPER } dg_ring_mode;

/* The mode of ring step `step` on rank r of cp (K/V from rank r - step). */
static inline DG_HD dg_ring_mode dg_ring_mode_of(int r, int step, int cp) {
    int j = ((r - step) % cp + cp) % cp;
    return j == r ? DG_RING_DIAG : j < r ? DG_RING_LOWER : DG_RING_UPPER;
}

size_t dg_cpu_ring_block_fwd_workspace(const dg_attn_dims *d, int nthreads);
size_t dg_cpu_ring_block_bwd_workspace(const dg_attn_dims *d, int nthreads);

/* o, lse of the block; ws: the workspace above, 64-byte aligned. */
void dg_cpu_ring_block_fwd(const dg_team *team, const dg_attn_dims *d, dg_ring_mode mode,
                           const float *q, const float *k, const float *v, float *o, float *lse,
                           void *ws);

/* dq, dk, dv of the block from its (o, lse) and their gradients (dlse may
 * be NULL for zero); all three are overwritten. */
void dg_cpu_ring_block_bwd(const dg_team *team, const dg_attn_dims *d, dg_ring_mode mode,
                           const float *q, const float *k, const float *v, const float *o,
                           const float *dout, const float *lse, const float *dlse, float *dq,
                           float *dk, float *dv, void *ws);

/* The same with a window (d->window > 0), which needs the chunks' places,
 * not only the mode: rank r's query chunks r, 2cp-1-r against rank j's K/V
 * chunks j, 2cp-1-j (j = r - step mod cp). Each (query chunk, key chunk)
 * pair that the causal window reaches runs as one c x c block with the
 * query chunk's offset (dg_attn_dims.qoff): the same chunk causally, an
 * earlier one whole but for the window; a query chunk's blocks are merged
 * by log-sum-exp, and a row that sees nothing gets o = 0, lse = -inf.
 * Workspaces as above. */
void dg_cpu_ring_block_fwd_window(const dg_team *team, const dg_attn_dims *d, int r, int step, int cp,
                                  const float *q, const float *k, const float *v, float *o, float *lse, void *ws);
void dg_cpu_ring_block_bwd_window(const dg_team *team, const dg_attn_dims *d, int r, int step, int cp,
                                  const float *q, const float *k, const float *v, const float *o,
                                  const float *dout, const float *lse, const float *dlse, float *dq, float *dk,
                                  float *dv, void *ws);

/* (o, l) = merge((o1, l1), (o2, l2)) over rows of D values:
 *   l = log(e^l1 + e^l2), o = e^(l1-l) o1 + e^(l2-l) o2;
 * o* [B, S, H, D], l* [B, H, S]; a row with l1 = l2 = -inf gives o = 0,
 * l = -inf. */
void dg_cpu_lse_merge_fwd(int64_t B, int64_t S, int64_t H, int64_t D, const float *o1, const float *l1,
                          const float *o2, const float *l2, float *o, float *l);

/* The adjoint: with w_j = e^(l_j - l),
 *   do_j = w_j do,   dl_j = w_j (dl + do . o_j - do . o)
 * (dl may be NULL for zero). */
void dg_cpu_lse_merge_bwd(int64_t B, int64_t S, int64_t H, int64_t D, const float *o1, const float *l1,
                          const float *o2, const float *l2, const float *o, const float *l,
                          const float *dout, const float *dl, float *do1, float *dl1, float *do2,
                          float *dl2);

/* One row of the merge (D values at o1, o2 -> o; their lse a, c -> *l),
 * shared with the CUDA kernel. a and c are read before o or *l is written,
 * so *l may alias an input's lse. */
static inline DG_HD void dg_lse_merge_row(int64_t D, const float *o1, float a_lse, const float *o2, float c_lse,
                                          float *o, float *l) {
    double a = a_lse, c = c_lse, m = a > c ? a : c;
    if (m == -INFINITY) {
        for (int64_t x = 0; x < D; x++) o[x] = 0.0f;
        *l = -INFINITY;
        return;
    }
    double lse = m + log(exp(a - m) + exp(c - m));
    float w1 = (float)exp(a - lse), w2 = (float)exp(c - lse);
    for (int64_t x = 0; x < D; x++) o[x] = w1 * o1[x] + w2 * o2[x];
    *l = (float)lse;
}

/* One row of the merge's adjoint (dl: the row's lse gradient, 0 for none). */
static inline DG_HD void dg_lse_merge_bwd_row(int64_t D, const float *o1, float l1, const float *o2, float l2,
                                              const float *o, float l, const float *dout, float dl, float *do1,
                                              float *dl1, float *do2, float *dl2) {
    double lt = l;
    double w1 = lt == -INFINITY ? 0.0 : exp((double)l1 - lt);
    double w2 = lt == -INFINITY ? 0.0 : exp((double)l2 - lt);
    double p1 = 0, p2 = 0, p = 0;
    for (int64_t x = 0; x < D; x++) {
        double g = dout[x];
        p1 += g * o1[x];
        p2 += g * o2[x];
        p += g * o[x];
        do1[x] = (float)(w1 * g);
        do2[x] = (float)(w2 * g);
    }
    double g_l = dl;
    *dl1 = (float)(w1 * (g_l + p1 - p));
    *dl2 = (float)(w2 * (g_l + p2 - p));
}

#endif /* DG_CPU_RING_ATTN_H */
