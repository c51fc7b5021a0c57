/* dg_cpu_xent.c — see dg_cpu_xent.h. */
#include "dg_cpu_xent.h"

#include <math.h>

#include "dg_base.h"

typedef struct xent_args {
    const float *logits, *mask, *lse;
    const int32_t *targets;
    float *lse_out, *dlogits;
    int64_t V;
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

static void lse_rows(void *p, int64_t r0, int64_t r1) {
    const xent_args *a = p;
    const int64_t V = a->V;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = a->logits + r * V;
        float mx = -INFINITY;
        for (int64_t j = 0; j < V; j++) mx = x[j] > mx ? x[j] : mx;
        double s = 0;
        for (int64_t j = 0; j < V; j++) s += expf(x[j] - mx);
        a->lse_out[r] = mx + (float)log(s);
    }
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
        int32_t t = a->targets[r];
        d[t] = (expf(x[t] - l) - 1.0f) * s; /* (p - 1) * s: no cancellation after scaling */
    }
}

int dg_cpu_xent_bwd(const dg_team *team, const float *logits, const int32_t *targets,
                    const float *mask, const float *lse, float dloss, float *dlogits, int64_t N,
                    int64_t V, int64_t *bad_row) {
    DG_TRY(check_targets(targets, mask, N, V, bad_row));
    double den = 0;
    for (int64_t i = 0; i < N; i++) den += row_mask(mask, i);
    xent_args a = {.logits = logits, .targets = targets, .mask = mask, .lse = lse,
                   .dlogits = dlogits, .V = V,
                   .scale = den != 0 ? (float)((double)dloss / den) : 0.0f};
    dg_team_run(team, N, dlogits_rows, &a);
    return DG_OK;
}
