/* dg_cpu_moe.h — Mixture-of-Experts kernels: router (top-k with a score
 * function, capacity dropping), load-balancing aux loss, z-loss, token
 * permutation and its inverses.
 *
 * Shapes: T tokens, E experts, k = top-k, H hidden, N = T*k permuted rows.
 * Per-token work is split over the team by token rows; everything that
 * reduces over tokens (per-expert sums, counts, routing order) runs in a
 * fixed order that does not depend on the thread count, so results are
 * bitwise identical for any team size.
 *
 * Conventions shared with moe/ (see moe/dg_router.h, moe/dg_permute.h):
 *  - slot (t, j) is flattened as t*k + j; slot j of a token is its j-th
 *    choice, in descending score order, ties to the lower expert index.
 *  - an index of -1 marks a slot dropped by the capacity limit; its prob is 0.
 *  - row_map[r] (r < N) is the slot permuted row r came from, or -1 for the
 *    unused tail rows (only when slots were dropped).
 *
 * Element-wise math is in static inline DG_HD helpers so the CUDA backend can
 * reuse it and the CPU tests cover it.
 */
#ifndef DG_CPU_MOE_H
#define DG_CPU_MOE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "dg_cpu_math.h"
#include "dg_team.h"

/* Top-k and group lists live on the stack; moe/ rejects larger values when
 * the graph is built. */
#define DG_MOE_MAX_K 64
#define DG_MOE_MAX_GROUPS 64

/* ---- scalar helpers ------------------------------------------------------- */

typedef enum dg_moe_score_fn { DG_MOE_SCORE_SOFTMAX = 0, DG_MOE_SCORE_SIGMOID = 1 } dg_moe_score_fn;
typedef enum dg_moe_drop_policy { DG_MOE_DROP_PROBS = 0, DG_MOE_DROP_POSITION = 1 } dg_moe_drop_policy;

/* Is (a, ia) ranked before (b, ib)? Larger value first, ties to the lower
 * index: a total order, so top-k is deterministic (torch.topk leaves ties
 * unspecified). */
static inline DG_HD int dg_moe_before(float a, int ia, float b, int ib) {
    return a > b || (a == b && ia < ib);
}

/* Offer candidate (v, e) to a sorted top-k list holding *n (<= k) entries. */
static inline DG_HD void dg_moe_topk_push(float v, int e, int k, int *n, float *val, int *idx) {
    int pos = *n < k ? *n : k;
    if (pos == k && !dg_moe_before(v, e, val[k - 1], idx[k - 1])) return;
    while (pos > 0 && dg_moe_before(v, e, val[pos - 1], idx[pos - 1])) {
        if (pos < k) {
            val[pos] = val[pos - 1];
            idx[pos] = idx[pos - 1];
        }
        pos--;
    }
    val[pos] = v;
    idx[pos] = e;
    if (*n < k) (*n)++;
}

/* Row max and sum of exp(z - max) (the sum in double): softmax_e =
 * expf(z_e - max) / sum, logsumexp = max + log(sum). */
static inline DG_HD void dg_moe_softmax_stats(const float *z, int E, float *max, double *sum) {
    float m = z[0];
    for (int e = 1; e < E; e++) m = z[e] > m ? z[e] : m;
    double s = 0;
    for (int e = 0; e < E; e++) s += (double)expf(z[e] - m);
    *max = m;
    *sum = s;
}

static inline DG_HD float dg_moe_softmax_at(float z, float max, double sum) {
    return (float)((double)expf(z - max) / sum);
}

/* Megatron adds this to the sum of sigmoid scores before dividing. */
#define DG_MOE_SIGMOID_EPS 1e-20

/* ---- router ---------------------------------------------------------------
 * logits [T, E] -> probs [T, k], indices [T, k] i32, and routed [E] i32: the
 * number of tokens each expert was chosen by before capacity dropping (what
 * Megatron's aux loss counts, unless groups or an expert bias are on).
 *   softmax, !pre_softmax: top-k of the logits, probs = softmax over those k
 *   softmax,  pre_softmax: probs = top-k of softmax over all E
 *   sigmoid:              top-k of sigmoid(logits); divided by their sum
 *                         (+1e-20) when k > 1
 * then probs *= scaling (if scaling != 0). Group-limited routing (num_groups
 * > 0) first restricts each token to the experts of its group_topk best
 * groups (a group scores the sum of its top k/group_topk routing scores).
 * An expert bias (sigmoid only) shifts the scores top-k ranks but not the
 * probs (aux-loss-free load balancing). With capacity > 0, each expert
 * keeps at most `capacity` of its slots (policy: the largest probs, ties to
 * the earlier token; or the earliest tokens) and the others get index -1,
 * prob 0. capacity <= 0: dropless.
 * `work` holds dg_cpu_moe_router_work_bytes(T, E, k) bytes (capacity only).
 * Returns 0. */
typedef struct dg_moe_router_cfg {
    int k;
    dg_moe_score_fn score;
    int pre_softmax;
    float scaling;         /* 0: none */
    int64_t capacity;      /* <= 0: dropless */
    dg_moe_drop_policy policy;
    int num_groups;        /* group-limited routing; 0: off (else divides E, <= 64) */
    int group_topk;        /* groups kept per token (1 <= group_topk <= k) */
    const float *bias;     /* expert bias [E] added to sigmoid scores for the
                            * selection only; NULL: none */
} dg_moe_router_cfg;

/* ---- per-token routing (CPU and CUDA kernels share it) ---- */

/* Routing score of expert e, the value top-k ranks: the logit (softmax
 * after top-k), the softmax (pre-softmax; m, sum its row stats), or
 * sigmoid + expert bias. */
static inline DG_HD float dg_moe_route_score(const dg_moe_router_cfg *c, const float *z, int e,
                                             float m, double sum) {
    if (c->score == DG_MOE_SCORE_SIGMOID) return dg_sigmoid(z[e]) + (c->bias ? c->bias[e] : 0.0f);
    return c->pre_softmax ? dg_moe_softmax_at(z[e], m, sum) : z[e];
}

/* Group-limited routing (Megatron's group_limited_topk): experts form
 * num_groups equal groups; a group's score is the sum of its top
 * (k / group_topk) routing scores (in descending order); only experts of
 * the group_topk best groups (ties to the lower group) may be chosen. */
static inline DG_HD void dg_moe_route_groups(const dg_moe_router_cfg *c, const float *z, int E,
                                             float m, double sum, unsigned char *allowed) {
    int G = c->num_groups, per = E / G, mk = c->k / c->group_topk;
    float gval[DG_MOE_MAX_GROUPS], tv[DG_MOE_MAX_K];
    int gidx[DG_MOE_MAX_GROUPS], ti[DG_MOE_MAX_K], ng = 0;
    for (int g = 0; g < G; g++) {
        int n = 0;
        for (int e = g * per; e < (g + 1) * per; e++)
            dg_moe_topk_push(dg_moe_route_score(c, z, e, m, sum), e, mk, &n, tv, ti);
        float gs = 0.0f;
        for (int j = 0; j < n; j++) gs += tv[j];
        dg_moe_topk_push(gs, g, c->group_topk, &ng, gval, gidx);
    }
    for (int g = 0; g < G; g++) allowed[g] = 0;
    for (int j = 0; j < ng; j++) allowed[gidx[j]] = 1;
}

/* The selection and the (unmasked, unscaled) probs of one token: idx[j] the
 * j-th expert, val[j] its unbiased score (logit, softmax or sigmoid), p[j]
 * its routing prob before scaling and dropping. */
static inline DG_HD void dg_moe_route_select(const dg_moe_router_cfg *c, const float *z, int E,
                                             float *val, int *idx, float *p) {
    int k = c->k, n = 0;
    float m = 0.0f;
    double sum = 1.0;
    if (c->score == DG_MOE_SCORE_SOFTMAX && c->pre_softmax) dg_moe_softmax_stats(z, E, &m, &sum);
    unsigned char allowed[DG_MOE_MAX_GROUPS];
    int per = 0;
    if (c->num_groups > 0) {
        dg_moe_route_groups(c, z, E, m, sum, allowed);
        per = E / c->num_groups;
    }
    for (int e = 0; e < E; e++)
        if (!per || allowed[e / per])
            dg_moe_topk_push(dg_moe_route_score(c, z, e, m, sum), e, k, &n, val, idx);
    if (c->score == DG_MOE_SCORE_SIGMOID) {
        /* selection may use the bias; the probs never do */
        for (int j = 0; j < k; j++) val[j] = dg_sigmoid(z[idx[j]]);
        if (k > 1) {
            double s = 0;
            for (int j = 0; j < k; j++) s += val[j];
            s += DG_MOE_SIGMOID_EPS;
            for (int j = 0; j < k; j++) p[j] = (float)((double)val[j] / s);
        } else {
            p[0] = val[0];
        }
    } else if (c->pre_softmax) {
        for (int j = 0; j < k; j++) p[j] = val[j];
    } else {
        float mk;
        double s;
        dg_moe_softmax_stats(val, k, &mk, &s);
        for (int j = 0; j < k; j++) p[j] = dg_moe_softmax_at(val[j], mk, s);
    }
}

/* dz [E] of one token from its dprobs [k] and the forward's indices [k]
 * (-1: dropped, no gradient); recomputes the selection from z [E]. */
static inline DG_HD void dg_moe_router_bwd_row(const dg_moe_router_cfg *c, const float *z, int E,
                                               const float *dprobs, const int32_t *cidx, float *dz) {
    int k = c->k;
    float val[DG_MOE_MAX_K], pr[DG_MOE_MAX_K], g[DG_MOE_MAX_K];
    int idx[DG_MOE_MAX_K];
    float scale = c->scaling != 0.0f ? c->scaling : 1.0f;
    dg_moe_route_select(c, z, E, val, idx, pr);
    for (int j = 0; j < k; j++) g[j] = cidx[j] < 0 ? 0.0f : dprobs[j] * scale;
    for (int e = 0; e < E; e++) dz[e] = 0.0f;
    if (c->score == DG_MOE_SCORE_SIGMOID) {
        /* p = q / S: dq_j = (g_j - sum_i g_i p_i) / S; dz = dq * s (1 - s) */
        double S = 1.0, dot = 0;
        if (k > 1) {
            S = DG_MOE_SIGMOID_EPS;
            for (int j = 0; j < k; j++) S += val[j];
            for (int j = 0; j < k; j++) dot += (double)g[j] * pr[j];
        }
        for (int j = 0; j < k; j++) {
            float dq = (float)(((double)g[j] - dot) / S);
            dz[idx[j]] = dq * val[j] * (1.0f - val[j]);
        }
    } else if (c->pre_softmax) {
        /* probs_j = s_{e_j}: dz_e = s_e (G_e - sum_j s_{e_j} g_j) */
        double dot = 0;
        for (int j = 0; j < k; j++) dot += (double)val[j] * g[j];
        float m;
        double s;
        dg_moe_softmax_stats(z, E, &m, &s);
        for (int e = 0; e < E; e++) dz[e] = (float)(-(double)dg_moe_softmax_at(z[e], m, s) * dot);
        for (int j = 0; j < k; j++) dz[idx[j]] += val[j] * g[j];
    } else {
        /* softmax over the k selected logits */
        double dot = 0;
        for (int j = 0; j < k; j++) dot += (double)pr[j] * g[j];
        for (int j = 0; j < k; j++) dz[idx[j]] = (float)((double)pr[j] * ((double)g[j] - dot));
    }
}

size_t dg_cpu_moe_router_work_bytes(int64_t T, int64_t E, int k);
int dg_cpu_moe_router(const dg_team *team, const dg_moe_router_cfg *cfg, const float *logits,
                      int64_t T, int64_t E, float *probs, int32_t *indices, int32_t *routed,
                      void *work);

/* dlogits [T, E] from dprobs [T, k]: recomputes the selection from logits
 * (same code as the forward, so the same experts) and treats slots whose
 * index is -1 (dropped) as having zero gradient; dropped experts still take
 * gradient through the softmax / sigmoid normalisation they took part in. */
void dg_cpu_moe_router_bwd(const dg_team *team, const dg_moe_router_cfg *cfg, const float *dprobs,
                           const float *logits, const int32_t *indices, int64_t T, int64_t E,
                           float *dlogits);

/* ---- load-balancing loss (Switch / GShard, Megatron's
 * switch_load_balancing_loss_func) ----------------------------------------
 * The T tokens form B sequences of S = T / B tokens; B = 1 is Megatron's
 * "aux_loss" (the whole micro-batch), B > 1 its "seq_aux_loss":
 *   aux = coeff * E / (k * S^2) / B * sum_b sum_e P_be * f_be
 *   P_be = sum over tokens t of sequence b of score[t, e]
 * Token t is in sequence (seq_major ? t % B : t / S): [S, B] order
 * (Megatron's native layout) or [B, S].
 * score: softmax over all E, or sigmoid normalised over all E (sum + 1e-20;
 * Megatron's compute_routing_scores_for_aux_loss). f: counts [B, E]. `work`
 * holds dg_cpu_moe_aux_work_bytes(T, E, B) bytes. Returns aux. */
typedef struct dg_moe_seqs {
    int64_t B;     /* number of sequences, >= 1, divides T */
    int seq_major; /* 1: token t = s * B + b; 0: t = b * S + s */
} dg_moe_seqs;

static inline DG_HD int64_t dg_moe_seq_of(dg_moe_seqs q, int64_t t, int64_t T) {
    return q.B <= 1 ? 0 : q.seq_major ? t % q.B : t / (T / q.B);
}

/* ---- per-token aux-loss math (CPU and CUDA kernels share it) ---- */

/* Aux-loss scores of one token: softmax over all E, or sigmoid / (sum + 1e-20). */
static inline DG_HD void dg_moe_aux_scores_row(dg_moe_score_fn score, const float *z, int64_t E,
                                               float *s) {
    if (score == DG_MOE_SCORE_SIGMOID) {
        double S = DG_MOE_SIGMOID_EPS;
        for (int64_t e = 0; e < E; e++) {
            s[e] = dg_sigmoid(z[e]);
            S += s[e];
        }
        for (int64_t e = 0; e < E; e++) s[e] = (float)((double)s[e] / S);
    } else {
        float m;
        double S;
        dg_moe_softmax_stats(z, (int)E, &m, &S);
        for (int64_t e = 0; e < E; e++) s[e] = dg_moe_softmax_at(z[e], m, S);
    }
}

/* dz [E] = d aux / d z for one token: f its sequence's counts [E], c =
 * dloss * coeff * E / (k S^2 B). dz first holds the row's scores. */
static inline DG_HD void dg_moe_aux_bwd_row(dg_moe_score_fn score, const float *z, int64_t E,
                                            const float *f, float c, float *dz) {
    dg_moe_aux_scores_row(score, z, E, dz);
    double dot = 0;
    for (int64_t e = 0; e < E; e++) dot += (double)dz[e] * c * f[e];
    if (score == DG_MOE_SCORE_SIGMOID) {
        /* s = q / S with q = sigmoid(z): dq = (ds - <ds, s>) / S */
        double S = DG_MOE_SIGMOID_EPS;
        for (int64_t e = 0; e < E; e++) S += dg_sigmoid(z[e]);
        for (int64_t e = 0; e < E; e++) {
            float q = dg_sigmoid(z[e]);
            double dq = ((double)c * f[e] - dot) / S;
            dz[e] = (float)(dq * q * (1.0f - q));
        }
    } else {
        for (int64_t e = 0; e < E; e++) dz[e] = (float)((double)dz[e] * ((double)c * f[e] - dot));
    }
}

/* Megatron's aux-loss routing of one token: the top k of its aux scores
 * (the same floats as dg_moe_aux_scores_row) into idx [k]. */
static inline DG_HD void dg_moe_aux_topk_row(dg_moe_score_fn score, const float *z, int64_t E, int k,
                                             int32_t *idx_out) {
    float val[DG_MOE_MAX_K];
    int idx[DG_MOE_MAX_K];
    float m = 0.0f;
    double S = DG_MOE_SIGMOID_EPS;
    if (score == DG_MOE_SCORE_SIGMOID)
        for (int64_t e = 0; e < E; e++) S += dg_sigmoid(z[e]);
    else
        dg_moe_softmax_stats(z, (int)E, &m, &S);
    int n = 0;
    for (int64_t e = 0; e < E; e++) {
        float v = score == DG_MOE_SCORE_SIGMOID ? (float)((double)dg_sigmoid(z[e]) / S)
                                                : dg_moe_softmax_at(z[e], m, S);
        dg_moe_topk_push(v, (int)e, k, &n, val, idx);
    }
    for (int j = 0; j < k; j++) idx_out[j] = idx[j];
}

size_t dg_cpu_moe_aux_work_bytes(int64_t T, int64_t E, int64_t B);
float dg_cpu_moe_aux_loss(const dg_team *team, dg_moe_score_fn score, const float *logits,
                          const float *f, int64_t T, int64_t E, int k, dg_moe_seqs q, float coeff,
                          void *work);
/* dlogits [T, E] = d aux / d logits * dloss. f is a constant (no gradient). */
void dg_cpu_moe_aux_loss_bwd(const dg_team *team, dg_moe_score_fn score, const float *logits,
                             const float *f, int64_t T, int64_t E, int k, dg_moe_seqs q,
                             float coeff, float dloss, float *dlogits);

/* Per-sequence counts f [B, E] (floats) of the expert ids in indices [T, k]
 * (ids outside [0, E) are skipped). Serial: O(T*k). */
void dg_cpu_moe_count(const int32_t *indices, int64_t T, int k, int64_t E, dg_moe_seqs q, float *f);

/* Megatron's own f [B, E]: counts of the top-k of each token's aux-loss
 * scores (compute_routing_scores_for_aux_loss), ignoring groups, expert
 * bias and capacity. idx_work holds T*k ints. Top-k per token is split over
 * tokens, the count is serial. */
void dg_cpu_moe_aux_counts(const dg_team *team, dg_moe_score_fn score, const float *logits,
                           int64_t T, int64_t E, int k, dg_moe_seqs q, int32_t *idx_work, float *f);

/* ---- z-loss (ST-MoE; Megatron's z_loss_func) -------------------------------
 *   z = coeff * mean_t logsumexp(logits_t)^2
 * `work` holds T doubles. */
float dg_cpu_moe_z_loss(const dg_team *team, const float *logits, int64_t T, int64_t E, float coeff,
                        double *work);
/* dlogits [T, E] = dloss * coeff * 2 lse_t / T * softmax(logits_t) */
void dg_cpu_moe_z_loss_bwd(const dg_team *team, const float *logits, int64_t T, int64_t E,
                           float coeff, float dloss, float *dlogits);

/* ---- permutation ------------------------------------------------------------ */

/* From indices [T, k] (ids in [0, E) or -1): counts [E] (slots per expert)
 * and row_map [T*k]: rows grouped by expert in ascending order, tokens in
 * ascending order within an expert, unused tail rows -1. Serial counting
 * sort, O(T*k + E); `offs` is scratch of E int64. Returns 0, or -1 if an
 * index is out of range. */
int dg_cpu_moe_route(const int32_t *indices, int64_t T, int k, int64_t E, int32_t *counts,
                     int32_t *row_map, int64_t *offs);

/* Inverse of row_map [N]: slot_row [T*k] = the row each slot went to, -1 if
 * dropped. Serial. Returns 0, or -1 if row_map names a slot >= T*k. */
int dg_cpu_moe_invert(const int32_t *row_map, int64_t N, int64_t TK, int32_t *slot_row);

/* out [N, H]: out[r] = x[t] * (probs ? probs[s] : 1) where s = row_map[r],
 * t = s / k; rows with s = -1 are zero. Split over rows. */
void dg_cpu_moe_gather(const dg_team *team, const float *x, const float *probs,
                       const int32_t *row_map, int64_t N, int64_t H, int k, float *out);

/* out [T, H]: out[t] = sum over slots j in order of (probs ? probs[t,j] : 1)
 * * y[slot_row[t*k+j]], dropped slots skipped. Split over tokens. */
void dg_cpu_moe_combine(const dg_team *team, const float *y, const float *probs,
                        const int32_t *slot_row, int64_t T, int k, int64_t H, float *out);

/* dprobs [T, k]: dprobs[t,j] = <dy[t], y[slot_row[t*k+j]]>, 0 if dropped. */
void dg_cpu_moe_combine_dprobs(const dg_team *team, const float *dy, const float *y,
                               const int32_t *slot_row, int64_t T, int k, int64_t H,
                               float *dprobs);

#endif /* DG_CPU_MOE_H */
