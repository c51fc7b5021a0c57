/* dg_cpu_xent.c — see dg_cpu_xent.h. */
#include "dg_cpu_xent.h"

#include <math.h>

#include "dg_base.h"

typedef struct xent_args {
    const float *logits, *mask, *lse;
    const int32_t *targets;
    float *lse_out, *dlogits;
    int64_t V;   /* columns of logits: the whole vocab, or this rank's slice */
    int64_t lo;  /* vocab-parallel: the slice's first id (0 whole) */
    float scale; /* backward: dloss / sum(mask) */
} xent_args;

static inline float row_mask(const float *mask, int64_t i) { return mask ? mask[i] : 1.0f; }

/* Check targets serially before any thread starts: a kernel running on a
 * team has no clean way to stop its siblings. */
static int check_targets(const int32_t *targets, const float *mask, int64_t N, int64_t V,
                         int64_t *bad_row) {
    for (int64_t i = 0; i < N; i++) {
        if (row_mask(mask, i) == 0.0f) continue;
        if (targets[i] < 0 || targets[i] >= V) {
            if (bad_row) *bad_row = i;
            return DG_EINPUT;
        }
    }
    return DG_OK;
}

static float row_lse(const float *x, int64_t V) {
    float mx = -INFINITY;
    for (int64_t j = 0; j < V; j++) mx = x[j] > mx ? x[j] : mx;
    double s = 0;
    for (int64_t j = 0; j < V; j++) s += expf(x[j] - mx);
    return mx + (float)log(s);
}

static void lse_rows(void *p, int64_t r0, int64_t r1) {
    const xent_args *a = p;
    for (int64_t r = r0; r < r1; r++) a->lse_out[r] = row_lse(a->logits + r * a->V, a->V);
}

int dg_cpu_xent_fwd(const dg_team *team, const float *logits, const int32_t *targets,
                    const float *mask, float *loss, float *lse, int64_t N, int64_t V,
                    int64_t *bad_row) {
    DG_TRY(check_targets(targets, mask, N, V, bad_row));
    xent_args a = {.logits = logits, .targets = targets, .lse_out = lse, .V = V};
    dg_team_run(team, N, lse_rows, &a);
    double num = 0, den = 0;
    for (int64_t i = 0; i < N; i++) {
        float m = row_mask(mask, i);
        if (m == 0.0f) continue;
        float ce = lse[i] - logits[i * V + targets[i]];
        num += (double)m * ce;
        den += m;
    }
    *loss = den != 0 ? (float)(num / den) : 0.0f;
    return DG_OK;
}

static void dlogits_rows(void *p, int64_t r0, int64_t r1) {
    const xent_args *a = p;
    const int64_t V = a->V;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = a->logits + r * V;
        float *d = a->dlogits + r * V;
        float s = row_mask(a->mask, r) * a->scale;
        if (s == 0.0f) {
            for (int64_t j = 0; j < V; j++) d[j] = 0.0f;
            continue;
        }
        float l = a->lse[r];
        for (int64_t j = 0; j < V; j++) d[j] = expf(x[j] - l) * s;
        int64_t t = (int64_t)a->targets[r] - a->lo;
        if (t >= 0 && t < V) d[t] = (expf(x[t] - l) - 1.0f) * s; /* (p - 1) * s: no cancellation */
    }
}

int dg_cpu_xent_bwd(const dg_team *team, const float *logits, const int32_t *targets,
                    const float *mask, const float *lse, float dloss, float *dlogits, int64_t N,
                    int64_t V, int64_t *bad_row) {
    return dg_cpu_vocab_xent_bwd(team, logits, targets, mask, lse, dloss, dlogits, N, V, 0, V, bad_row);
}

int dg_cpu_vocab_xent_bwd(const dg_team *team, const float *logits, const int32_t *targets,
                          const float *mask, const float *lse, float dloss, float *dlogits, int64_t N,
                          int64_t vl, int64_t lo, int64_t V, int64_t *bad_row) {
    DG_TRY(check_targets(targets, mask, N, V, bad_row));
    double den = 0;
    for (int64_t i = 0; i < N; i++) den += row_mask(mask, i);
    xent_args a = {.logits = logits, .targets = targets, .mask = mask, .lse = lse,
                   .dlogits = dlogits, .V = vl, .lo = lo,
                   .scale = den != 0 ? (float)((double)dloss / den) : 0.0f};
    dg_team_run(team, N, dlogits_rows, &a);
    return DG_OK;
}

/* Per row: the slice's logsumexp and the target's logit when the slice
 * holds it (else 0), as stats[2 r], stats[2 r + 1]. */
static void stats_rows(void *p, int64_t r0, int64_t r1) {
    const xent_args *a = p;
    for (int64_t r = r0; r < r1; r++) {
        int64_t t = (int64_t)a->targets[r] - a->lo;
        a->dlogits[2 * r] = row_lse(a->logits + r * a->V, a->V);
        a->dlogits[2 * r + 1] = t >= 0 && t < a->V ? a->logits[r * a->V + t] : 0.0f;
    }
}

void dg_cpu_vocab_xent_stats(const dg_team *team, const float *logits, const int32_t *targets,
                             float *stats, int64_t N, int64_t vl, int64_t lo) {
    xent_args a = {.logits = logits, .targets = targets, .dlogits = stats,
                   .V = vl, .lo = lo};
    dg_team_run(team, N, stats_rows, &a);
}

void dg_cpu_vocab_xent_combine(const float *stats, int64_t P, int64_t N, float *lse, float *tl) {
    for (int64_t r = 0; r < N; r++) dg_vocab_xent_combine_row(stats, P, N, r, &lse[r], &tl[r]);
}

int dg_cpu_vocab_xent_loss(const int32_t *targets, const float *mask, const float *lse, const float *tl,
                           float *loss, int64_t N, int64_t V, int64_t *bad_row) {
    DG_TRY(check_targets(targets, mask, N, V, bad_row));
    double num = 0, den = 0;
    for (int64_t i = 0; i < N; i++) {
        float m = row_mask(mask, i);
        if (m == 0.0f) continue;
        num += (double)m * (lse[i] - tl[i]);
        den += m;
    }
    *loss = den != 0 ? (float)(num / den) : 0.0f;
    return DG_OK;
}
