/* dg_cpu_attention.h — fused (flash-style) self-attention on the CPU, with
 * grouped-query / multi-query heads, causal or not.
 *
 * Layouts (row-major, the last dim contiguous):
 *   q, o, dq, do   [B, S, Hq, D]
 *   k, v, dk, dv   [B, S, Hkv, D]     Hq % Hkv == 0; query head h reads
 *                                     kv head h / (Hq / Hkv)
 *   lse, dlse      [B, Hq, S]         log-sum-exp of each query row's
 *                                     scaled scores (natural log)
 *
 * Forward: for each (b, h, query tile) the key tiles up to the diagonal are
 * visited in order, keeping a running row max m, a running sum l and an
 * output accumulator (online softmax). Scores never exist beyond one
 * DG_ATTN_TILE x DG_ATTN_TILE tile per thread, so memory is O(S), not O(S^2).
 *
 * Backward (flash-attention-2): P is recomputed per tile from lse,
 *   Delta_i = rowsum(dO_i * O_i) - dlse_i,   dS = P * (dP - Delta),
 *   dV = P^T dO,   dK = scale dS^T Q,   dQ = scale dS K.
 * It runs as three passes so every output row has exactly one writer and a
 * fixed summation order:
 *   1. Delta, parallel over (b, q head, query tile);
 *   2. dK, dV, parallel over (b, kv head, key tile): the thread owning a key
 *      tile adds the contributions of the group's query heads in head order,
 *      then query tiles in order;
 *   3. dQ, parallel over (b, q head, query tile), key tiles in order.
 * Pass 3 recomputes S and dP (7 tile products instead of 5) — the price of
 * not needing atomics or an O(S^2) buffer. Results are bitwise identical for
 * any number of threads.
 *
 * The tile products are single-threaded cblas_sgemm calls on tiles read in
 * place (a head's rows are H * D apart). The operand that a product would
 * need as "A B^T" (Q, dO per query tile; K, V per key tile in pass 2) is
 * transposed once per work unit into a [D, tile] scratch tile, so every
 * product is of the forms OpenBLAS 0.3.21 serves with its small-matrix
 * kernels (about sgemm's full speed at 64 x 64; "A B^T" takes its packed
 * path at ~60%). The softmax between products runs in fixed-width loops
 * over whole tile rows, which -O2 vectorizes, with the polynomial exp below
 * (libm's expf does not vectorize and would dominate).
 * OpenBLAS must be single-threaded (dg_cpu_init()): the team is the
 * parallelism.
 *
 * A window (d->window) skips the key tiles wholly before it and masks the
 * columns of the rest by a per-row range [lo, hi); a sink (d->sink) joins
 * each row's log-sum-exp once, after the key tiles, and rescales the row.
 *
 * Work units are dealt to threads in rounds of nth, alternating direction
 * (thread t takes unit t of even rounds, unit nth-1-t of odd ones): causal
 * query tiles differ in cost (tile i visits i+1 key tiles) and neighbours
 * differ least, so this balances the load without splitting a reduction.
 */
#ifndef DG_CPU_ATTENTION_H
#define DG_CPU_ATTENTION_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "dg_cpu_dropout.h" /* the counter-based draw; defines DG_HD */
#include "dg_team.h"

/* Attention dropout (Megatron's --attention-dropout): each probability
 * P[b, h, i, j] is kept, times 1 / (1 - p), or dropped by the dropout op's
 * counter-based draw (dg_cpu_dropout.h) at the probability's place in its
 * sample's whole [H, S, S] tensor, element (h S + i) S + j with the global
 * head and positions. The unfused chain's dropout on the probabilities
 * (ops/dg_op_attn_unfused.h) draws the same mask, and every TP / CP layout
 * draws one rank's. The softmax's sum (and lse) keeps the undropped
 * exponentials; the output sums the kept ones: o_i = sum_j P_ij Z_ij v_j.
 * The backward (flash attention with dropout): Delta_i = rowsum(dO_i * O_i)
 * - dlse_i still, dS = P * (Z * dP - Delta), dV = (P * Z)^T dO. */
typedef struct dg_attn_drop {
    float p;            /* drop probability; 0: none (and outside training) */
    float keep_scale;   /* 1 / (1 - p) */
    uint32_t threshold; /* dg_dropout_threshold(p) */
    uint64_t stream;    /* dg_dropout_stream(key, site) */
    int64_t sample0;    /* global index of local sample 0 (key[2]) */
    int64_t head0;      /* global index of local query head 0 */
    int64_t S;          /* the whole sequence's length (0: dg_attn_dims.S) */
    /* places (CP's chunks): local query row s < qc is global position
     * qa qc + s, a row s >= qc is qb qc + s - qc; qc 0: position s. Keys
     * alike with kc, ka, kb. */
    int64_t qc, qa, qb, kc, ka, kb;
} dg_attn_drop;

/* The attention key (the attention op's dropout input, i32 [5]): the
 * graph's rng_key (seed, iteration, first sample, training) and the global
 * index of the node's first query head (ops/dg_op_attn_key.h). */
#define DG_ATTN_KEY_LEN 5

/* z for drop probability p at `site` from the attention key; p 0 outside
 * training (key[3] 0), as Megatron's model.eval(). */
static inline DG_HD dg_attn_drop dg_attn_drop_make(const int32_t *key, int64_t site, double p) {
    dg_attn_drop z;
    memset(&z, 0, sizeof z);
    if (!(p > 0) || !key[3]) return z;
    z.p = (float)p;
    z.keep_scale = dg_dropout_scale(p);
    z.threshold = dg_dropout_threshold(p);
    z.stream = dg_dropout_stream(key, site);
    z.sample0 = key[2];
    z.head0 = key[4];
    return z;
}

static inline DG_HD int64_t dg_attn_place(int64_t c, int64_t a, int64_t b, int64_t s) {
    return c <= 0 ? s : s < c ? a * c + s : b * c + s - c;
}

/* The factor Z of P[b, h, i, j] for local sample b, head h, query row i,
 * key row j (S: the local sequence, the default whole one): 1 / (1 - p)
 * or 0. */
static inline DG_HD float dg_attn_drop_factor(const dg_attn_drop *z, int64_t S, int64_t b, int64_t h, int64_t i,
                                              int64_t j) {
    int64_t sg = z->S > 0 ? z->S : S;
    int64_t pi = dg_attn_place(z->qc, z->qa, z->qb, i), pj = dg_attn_place(z->kc, z->ka, z->kb, j);
    uint64_t elem = (uint64_t)(((z->head0 + h) * sg + pi) * sg + pj);
    return dg_dropout1(z->stream, (uint64_t)(z->sample0 + b), elem, z->threshold, z->keep_scale, 1.0f);
}

/* Rows (queries) and columns (keys) of a score tile. */
#define DG_ATTN_TILE 64

typedef struct dg_attn_dims {
    int64_t B, S, Hq, Hkv, D;
    int causal;  /* 1: key j is visible to query i only when j <= i */
    float scale; /* scores are scale * q . k */
    /* attention variants (issue 29); zero is plain attention */
    int64_t window; /* 0: unbounded; W > 0: query i sees keys i - W < j <= i,
                     * its own and the W - 1 before it (with qoff: i + qoff
                     * in place of i; the attention op: causal only) */
    int sink;       /* softmax sink, a logit with no value that joins each
                     * row's denominator: 0 none, 1 a zero logit (Megatron's
                     * off-by-one), 2 one logit per query head (learnable) */
    int64_t qoff;   /* query i stands at position i + qoff of the keys' (0:
                     * self-attention; ring attention's blocks of chunks, only
                     * with a window: kernels/cpu/dg_cpu_ring_attn.h). A row
                     * that sees no key then gets o = 0, lse = -inf */
    dg_attn_drop drop; /* attention dropout (zero: none) */
} dg_attn_dims;

/* Workspace bytes for nthreads threads (per-thread tiles, plus Delta for
 * the backward: B * Hq * S floats). Linear in S. */
size_t dg_cpu_attention_fwd_workspace(const dg_attn_dims *d, int nthreads);
size_t dg_cpu_attention_bwd_workspace(const dg_attn_dims *d, int nthreads);

/* o, lse = attention(q, k, v). ws: dg_cpu_attention_fwd_workspace(d,
 * team's nthreads) bytes, 64-byte aligned. */
void dg_cpu_attention_fwd(const dg_team *team, const dg_attn_dims *d, const float *q,
                          const float *k, const float *v, float *o, float *lse, void *ws);

/* The same with d->sink == 2's logits, sink [Hq] (NULL otherwise). With a
 * sink, lse is log(sum_j exp(s_ij) + exp(sink_h)): the backward's P =
 * exp(s - lse) is then the sink-softmax's, and dg_cpu_attention_bwd needs
 * no sink of its own (o is still sum_j p_ij v_j). */
void dg_cpu_attention_fwd_ex(const dg_team *team, const dg_attn_dims *d, const float *q,
                             const float *k, const float *v, const float *sink, float *o,
                             float *lse, void *ws);

/* The gradient of the learnable sink logits, dsink [Hq] (overwritten):
 *   dsink_h = -sum_{b, i} exp(sink_h - lse_bhi) (rowsum(dO_bih * O_bih) - dlse_bhi)
 * (p_sink of row i times -Delta_i; dlse may be NULL for zero). Summed in
 * double, b then i in order: the same for any thread count. */
void dg_cpu_attention_sink_grad(const dg_attn_dims *d, const float *sink, const float *o,
                                const float *dout, const float *lse, const float *dlse,
                                float *dsink);

/* dq, dk, dv from the forward's inputs and outputs and the gradient of o
 * (and of lse: dlse may be NULL for zero). dq, dk, dv are overwritten.
 * ws: dg_cpu_attention_bwd_workspace(d, team's nthreads) bytes. */
void dg_cpu_attention_bwd(const dg_team *team, const dg_attn_dims *d, const float *q,
                          const float *k, const float *v, const float *o, const float *dout,
                          const float *lse, const float *dlse, float *dq, float *dk, float *dv,
                          void *ws);

/* A sink folded into finished attention (ops/dg_op_attn_sink.h), per row
 * of o [B, S, H, D] / lse [B, H, S]; sink NULL: a zero logit.
 *   lse' = log(exp(lse) + exp(s_h)), o' = o exp(lse - lse'). */
void dg_cpu_attn_sink_fwd(int64_t B, int64_t S, int64_t H, int64_t D, const float *o, const float *lse,
                          const float *sink, float *o2, float *lse2);
/* Its backward from o', do', lse, lse' and dlse' (NULL: zero): do, dlse
 * and (dsink not NULL) the sink's gradient [H], summed in double over b
 * then s in order. */
void dg_cpu_attn_sink_bwd(int64_t B, int64_t S, int64_t H, int64_t D, const float *o2, const float *do2,
                          const float *lse, const float *lse2, const float *dlse2, float *dout,
                          float *dlse, float *dsink);

/* ---- element-wise math (C and, later, CUDA) ----------------------------------- */

/* exp(x) for the softmax, vectorizable: Cody-Waite reduction x = n ln2 + g,
 * |g| <= ln2/2, Cephes' degree-7 polynomial for e^g (about 1 ulp), and 2^n
 * put into the exponent bits. Exactly 0 for x below -87.3 (and -inf), so a
 * running max of -inf rescales to 0; x is clamped at 88.3 (FLT_MAX range). */
static inline DG_HD float dg_attn_exp(float x) {
    const float hi = 88.3762626647949f, lo = -87.3365447505531f;
    float xc = x > hi ? hi : x;
    xc = xc < lo ? lo : xc;
    /* round(x log2 e) with the 1.5 * 2^23 trick: no floorf, no float->int */
    const float magic = 12582912.0f;
    float r = xc * 1.44269504088896341f + magic;
    int32_t rb;
    memcpy(&rb, &r, sizeof rb);
    int32_t n = rb - 0x4B400000;
    float fn = r - magic;
    float g = xc - fn * 0.693359375f;
    g = g - fn * -2.12194440e-4f;
    float y = 1.9875691500e-4f;
    y = y * g + 1.3981999507e-3f;
    y = y * g + 8.3334519073e-3f;
    y = y * g + 4.1665795894e-2f;
    y = y * g + 1.6666665459e-1f;
    y = y * g + 5.0000001201e-1f;
    y = y * (g * g) + g + 1.0f;
    int32_t yb;
    memcpy(&yb, &y, sizeof yb);
    yb += (int32_t)((uint32_t)n << 23);
    float res;
    memcpy(&res, &yb, sizeof res);
    return x < lo ? 0.0f : res;
}

/* One online-softmax step for a score row: the new running max, and the
 * factor exp(m_old - m_new) that rescales the old sum and accumulator. */
static inline DG_HD float dg_attn_rescale(float m_old, float m_new) {
    return dg_attn_exp(m_old - m_new);
}

/* dS = P * (dP - Delta) for one element. */
static inline DG_HD float dg_attn_dscore(float p, float dp, float delta) { return p * (dp - delta); }

#endif /* DG_CPU_ATTENTION_H */
