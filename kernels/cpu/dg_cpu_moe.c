/* dg_cpu_moe.c — see dg_cpu_moe.h. */
#include "dg_cpu_moe.h"

#include <string.h>

#include "dg_base.h"

/* ---- router ------------------------------------------------------------------ */

typedef struct router_args {
    const dg_moe_router_cfg *c;
    const float *logits, *dprobs;
    float *probs, *dlogits;
    int32_t *indices;
    const int32_t *cindices;
    int64_t E;
    /* capacity dropping */
    const int32_t *off;
    int32_t *slots, *tmp;
} router_args;

static void router_rows(void *p, int64_t t0, int64_t t1) {
    const router_args *a = p;
    const dg_moe_router_cfg *c = a->c;
    int k = c->k, E = (int)a->E;
    float val[DG_MOE_MAX_K], pr[DG_MOE_MAX_K];
    int idx[DG_MOE_MAX_K];
    for (int64_t t = t0; t < t1; t++) {
        dg_moe_route_select(c, a->logits + t * E, E, val, idx, pr);
        for (int j = 0; j < k; j++) {
            a->probs[t * k + j] = c->scaling != 0.0f ? pr[j] * c->scaling : pr[j];
            a->indices[t * k + j] = idx[j];
        }
    }
}

/* Stable merge sort of slot ids by (prob desc, slot asc). */
static int slot_before(const float *probs, int32_t a, int32_t b) {
    return dg_moe_before(probs[a], a, probs[b], b);
}

static void sort_slots(const float *probs, int32_t *s, int32_t *tmp, int64_t n) {
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = DG_MIN(lo + w, n), hi = DG_MIN(lo + 2 * w, n), i = lo, j = mid, o = lo;
            while (i < mid && j < hi) tmp[o++] = slot_before(probs, s[j], s[i]) ? s[j++] : s[i++];
            while (i < mid) tmp[o++] = s[i++];
            while (j < hi) tmp[o++] = s[j++];
        }
        memcpy(s, tmp, sizeof(int32_t) * (size_t)n);
    }
}

/* Experts [e0, e1): drop the slots past capacity. Each slot belongs to one
 * expert, so experts write disjoint entries. */
static void router_drop(void *p, int64_t e0, int64_t e1) {
    const router_args *a = p;
    const dg_moe_router_cfg *c = a->c;
    for (int64_t e = e0; e < e1; e++) {
        int64_t b = a->off[e], n = a->off[e + 1] - b;
        if (n <= c->capacity) continue;
        int32_t *s = a->slots + b;
        if (c->policy == DG_MOE_DROP_PROBS) sort_slots(a->probs, s, a->tmp + b, n);
        /* position policy: slots are already in token order */
        for (int64_t i = c->capacity; i < n; i++) {
            a->probs[s[i]] = 0.0f;
            a->indices[s[i]] = -1;
        }
    }
}

/* off [E+1], slots [T*k], tmp [max(T*k, E)]: tmp first holds E fill
 * cursors, then serves as merge-sort scratch. */
size_t dg_cpu_moe_router_work_bytes(int64_t T, int64_t E, int k) {
    return sizeof(int32_t) * (size_t)(E + 1 + T * k + DG_MAX(T * k, E));
}

int dg_cpu_moe_router(const dg_team *team, const dg_moe_router_cfg *cfg, const float *logits,
                      int64_t T, int64_t E, float *probs, int32_t *indices, int32_t *routed,
                      void *work) {
    int k = cfg->k;
    router_args a = {.c = cfg, .logits = logits, .probs = probs, .indices = indices, .E = E};
    dg_team_run(team, T, router_rows, &a);
    memset(routed, 0, sizeof(int32_t) * (size_t)E);
    for (int64_t i = 0; i < T * k; i++) routed[indices[i]]++;
    /* Megatron skips dropping when the capacity exceeds the token count. */
    if (cfg->capacity <= 0 || cfg->capacity > T) return 0;
    int32_t *off = work, *slots = off + E + 1, *tmp = slots + T * k;
    off[0] = 0;
    for (int64_t e = 0; e < E; e++) off[e + 1] = off[e] + routed[e];
    /* slots of each expert in token order (tmp holds fill cursors for now) */
    for (int64_t e = 0; e < E; e++) tmp[e] = off[e];
    int32_t *cur = tmp;
    for (int64_t i = 0; i < T * k; i++) slots[cur[indices[i]]++] = (int32_t)i;
    /* tmp is reused as merge scratch after this point: cursors are dead */
    a.off = off;
    a.slots = slots;
    a.tmp = tmp;
    dg_team_run(team, E, router_drop, &a);
    return 0;
}

static void router_bwd_rows(void *p, int64_t t0, int64_t t1) {
    const router_args *a = p;
    int k = a->c->k, E = (int)a->E;
    for (int64_t t = t0; t < t1; t++)
        dg_moe_router_bwd_row(a->c, a->logits + t * E, E, a->dprobs + t * k, a->cindices + t * k,
                              a->dlogits + t * E);
}

void dg_cpu_moe_router_bwd(const dg_team *team, const dg_moe_router_cfg *cfg, const float *dprobs,
                           const float *logits, const int32_t *indices, int64_t T, int64_t E,
                           float *dlogits) {
    router_args a = {.c = cfg, .logits = logits, .dprobs = dprobs, .cindices = indices,
                     .dlogits = dlogits, .E = E};
    dg_team_run(team, T, router_bwd_rows, &a);
}

/* ---- aux loss --------------------------------------------------------------------- */

typedef struct aux_args {
    dg_moe_score_fn score;
    const float *logits, *f;
    float *scores, *dlogits;
    double *P;
    int64_t T, E;
    dg_moe_seqs q;
    float c; /* dloss * coeff * E / (k S^2 B) in the backward */
} aux_args;

static void aux_rows(void *p, int64_t t0, int64_t t1) {
    const aux_args *a = p;
    for (int64_t t = t0; t < t1; t++)
        dg_moe_aux_scores_row(a->score, a->logits + t * a->E, a->E, a->scores + t * a->E);
}

/* P_be = sum over sequence b's tokens, in token order, whatever the split;
 * pairs (b, e) are split over the team. */
static void aux_cols(void *p, int64_t u0, int64_t u1) {
    const aux_args *a = p;
    int64_t B = a->q.B, S = a->T / B;
    for (int64_t u = u0; u < u1; u++) {
        int64_t b = u / a->E, e = u % a->E;
        double s = 0;
        for (int64_t i = 0; i < S; i++) {
            int64_t t = a->q.seq_major ? i * B + b : b * S + i;
            s += a->scores[t * a->E + e];
        }
        a->P[u] = s;
    }
}

size_t dg_cpu_moe_aux_work_bytes(int64_t T, int64_t E, int64_t B) {
    return sizeof(double) * (size_t)(DG_MAX(B, 1) * E) + sizeof(float) * (size_t)(T * E);
}

/* coeff * E / (k S^2) / B */
static double aux_scale(int64_t T, int64_t E, int k, dg_moe_seqs q, float coeff) {
    double B = (double)DG_MAX(q.B, 1), S = (double)T / B;
    return (double)E * coeff / ((double)k * S * S) / B;
}

float dg_cpu_moe_aux_loss(const dg_team *team, dg_moe_score_fn score, const float *logits,
                          const float *f, int64_t T, int64_t E, int k, dg_moe_seqs q, float coeff,
                          void *work) {
    q.B = DG_MAX(q.B, 1);
    double *P = work;
    float *scores = (float *)(P + q.B * E);
    aux_args a = {.score = score, .logits = logits, .scores = scores, .P = P, .T = T, .E = E, .q = q};
    dg_team_run(team, T, aux_rows, &a);
    dg_team_run(team, q.B * E, aux_cols, &a);
    double s = 0;
    for (int64_t u = 0; u < q.B * E; u++) s += P[u] * (double)f[u];
    return (float)(s * aux_scale(T, E, k, q, coeff));
}

static void aux_bwd_rows(void *p, int64_t t0, int64_t t1) {
    const aux_args *a = p;
    for (int64_t t = t0; t < t1; t++)
        dg_moe_aux_bwd_row(a->score, a->logits + t * a->E, a->E,
                           a->f + dg_moe_seq_of(a->q, t, a->T) * a->E, a->c, a->dlogits + t * a->E);
}

void dg_cpu_moe_aux_loss_bwd(const dg_team *team, dg_moe_score_fn score, const float *logits,
                             const float *f, int64_t T, int64_t E, int k, dg_moe_seqs q,
                             float coeff, float dloss, float *dlogits) {
    q.B = DG_MAX(q.B, 1);
    aux_args a = {.score = score, .logits = logits, .f = f, .dlogits = dlogits, .T = T, .E = E, .q = q};
    a.c = (float)((double)dloss * aux_scale(T, E, k, q, coeff));
    dg_team_run(team, T, aux_bwd_rows, &a);
}

typedef struct auxc_args {
    dg_moe_score_fn score;
    const float *logits;
    int32_t *idx;
    int64_t E;
    int k;
} auxc_args;

static void aux_topk_rows(void *p, int64_t t0, int64_t t1) {
    const auxc_args *a = p;
    for (int64_t t = t0; t < t1; t++)
        dg_moe_aux_topk_row(a->score, a->logits + t * a->E, a->E, a->k, a->idx + t * a->k);
}

void dg_cpu_moe_aux_counts(const dg_team *team, dg_moe_score_fn score, const float *logits,
                           int64_t T, int64_t E, int k, dg_moe_seqs q, int32_t *idx_work, float *f) {
    auxc_args a = {.score = score, .logits = logits, .idx = idx_work, .E = E, .k = k};
    dg_team_run(team, T, aux_topk_rows, &a);
    dg_cpu_moe_count(idx_work, T, k, E, q, f);
}

void dg_cpu_moe_count(const int32_t *indices, int64_t T, int k, int64_t E, dg_moe_seqs q, float *f) {
    for (int64_t u = 0; u < DG_MAX(q.B, 1) * E; u++) f[u] = 0.0f;
    for (int64_t i = 0; i < T * k; i++)
        if (indices[i] >= 0 && indices[i] < E) f[dg_moe_seq_of(q, i / k, T) * E + indices[i]] += 1.0f;
}

/* ---- z-loss --------------------------------------------------------------------- */

typedef struct z_args {
    const float *logits;
    float *dlogits;
    double *lse;
    int64_t E;
    float c; /* dloss * coeff * 2 / T */
} z_args;

static double row_lse(const float *z, int64_t E) {
    float m;
    double s;
    dg_moe_softmax_stats(z, (int)E, &m, &s);
    return (double)m + log(s);
}

static void z_rows(void *p, int64_t t0, int64_t t1) {
    const z_args *a = p;
    for (int64_t t = t0; t < t1; t++) a->lse[t] = row_lse(a->logits + t * a->E, a->E);
}

float dg_cpu_moe_z_loss(const dg_team *team, const float *logits, int64_t T, int64_t E, float coeff,
                        double *work) {
    z_args a = {.logits = logits, .lse = work, .E = E};
    dg_team_run(team, T, z_rows, &a);
    double s = 0;
    for (int64_t t = 0; t < T; t++) s += work[t] * work[t];
    return (float)(s / (double)T * coeff);
}

static void z_bwd_rows(void *p, int64_t t0, int64_t t1) {
    const z_args *a = p;
    int64_t E = a->E;
    for (int64_t t = t0; t < t1; t++) {
        const float *z = a->logits + t * E;
        float m;
        double s;
        dg_moe_softmax_stats(z, (int)E, &m, &s);
        double g = (double)a->c * ((double)m + log(s));
        for (int64_t e = 0; e < E; e++) a->dlogits[t * E + e] = (float)(g * dg_moe_softmax_at(z[e], m, s));
    }
}

void dg_cpu_moe_z_loss_bwd(const dg_team *team, const float *logits, int64_t T, int64_t E,
                           float coeff, float dloss, float *dlogits) {
    z_args a = {.logits = logits, .dlogits = dlogits, .E = E};
    a.c = (float)((double)dloss * coeff * 2.0 / (double)T);
    dg_team_run(team, T, z_bwd_rows, &a);
}

/* ---- permutation ------------------------------------------------------------------- */

int dg_cpu_moe_route(const int32_t *indices, int64_t T, int k, int64_t E, int32_t *counts,
                     int32_t *row_map, int64_t *offs) {
    int64_t TK = T * k;
    memset(counts, 0, sizeof(int32_t) * (size_t)E);
    for (int64_t i = 0; i < TK; i++) {
        int32_t e = indices[i];
        if (e < -1 || e >= E) return -1;
        if (e >= 0) counts[e]++;
    }
    int64_t o = 0;
    for (int64_t e = 0; e < E; e++) {
        offs[e] = o;
        o += counts[e];
    }
    /* slot order is token-major, so rows within an expert follow token order */
    for (int64_t i = 0; i < TK; i++)
        if (indices[i] >= 0) row_map[offs[indices[i]]++] = (int32_t)i;
    for (int64_t r = o; r < TK; r++) row_map[r] = -1;
    return 0;
}

int dg_cpu_moe_invert(const int32_t *row_map, int64_t N, int64_t TK, int32_t *slot_row) {
    for (int64_t s = 0; s < TK; s++) slot_row[s] = -1;
    for (int64_t r = 0; r < N; r++) {
        int32_t s = row_map[r];
        if (s < -1 || s >= TK) return -1;
        if (s >= 0) slot_row[s] = (int32_t)r;
    }
    return 0;
}

typedef struct perm_args {
    const float *x, *y, *probs, *dy;
    const int32_t *map;
    float *out;
    int64_t H;
    int k;
} perm_args;

static void gather_rows(void *p, int64_t r0, int64_t r1) {
    const perm_args *a = p;
    int64_t H = a->H;
    for (int64_t r = r0; r < r1; r++) {
        int32_t s = a->map[r];
        float *o = a->out + r * H;
        if (s < 0) {
            memset(o, 0, sizeof(float) * (size_t)H);
            continue;
        }
        const float *x = a->x + (int64_t)(s / a->k) * H;
        if (a->probs) {
            float w = a->probs[s];
            for (int64_t h = 0; h < H; h++) o[h] = w * x[h];
        } else {
            memcpy(o, x, sizeof(float) * (size_t)H);
        }
    }
}

void dg_cpu_moe_gather(const dg_team *team, const float *x, const float *probs,
                       const int32_t *row_map, int64_t N, int64_t H, int k, float *out) {
    perm_args a = {.x = x, .probs = probs, .map = row_map, .out = out, .H = H, .k = k};
    dg_team_run(team, N, gather_rows, &a);
}

static void combine_rows(void *p, int64_t t0, int64_t t1) {
    const perm_args *a = p;
    int64_t H = a->H;
    int k = a->k;
    for (int64_t t = t0; t < t1; t++) {
        float *o = a->out + t * H;
        memset(o, 0, sizeof(float) * (size_t)H);
        for (int j = 0; j < k; j++) {
            int32_t r = a->map[t * k + j];
            if (r < 0) continue;
            const float *y = a->y + (int64_t)r * H;
            float w = a->probs ? a->probs[t * k + j] : 1.0f;
            for (int64_t h = 0; h < H; h++) o[h] += w * y[h];
        }
    }
}

void dg_cpu_moe_combine(const dg_team *team, const float *y, const float *probs,
                        const int32_t *slot_row, int64_t T, int k, int64_t H, float *out) {
    perm_args a = {.y = y, .probs = probs, .map = slot_row, .out = out, .H = H, .k = k};
    dg_team_run(team, T, combine_rows, &a);
}

static void dprobs_rows(void *p, int64_t t0, int64_t t1) {
    const perm_args *a = p;
    int64_t H = a->H;
    int k = a->k;
    for (int64_t t = t0; t < t1; t++) {
        const float *dy = a->dy + t * H;
        for (int j = 0; j < k; j++) {
            int32_t r = a->map[t * k + j];
            double s = 0;
            if (r >= 0) {
                const float *y = a->y + (int64_t)r * H;
                for (int64_t h = 0; h < H; h++) s += (double)dy[h] * y[h];
            }
            a->out[t * k + j] = (float)s;
        }
    }
}

void dg_cpu_moe_combine_dprobs(const dg_team *team, const float *dy, const float *y,
                               const int32_t *slot_row, int64_t T, int k, int64_t H,
                               float *dprobs) {
    perm_args a = {.dy = dy, .y = y, .map = slot_row, .out = dprobs, .H = H, .k = k};
    dg_team_run(team, T, dprobs_rows, &a);
}
