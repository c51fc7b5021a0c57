/* dg_cpu_grouped_bias.c — see dg_cpu_grouped_bias.h. */
#include "dg_cpu_grouped_bias.h"

#include <string.h>

#include "dg_base.h"

typedef struct gb_args {
    const int64_t *off; /* [E + 1] first row of each expert */
    int64_t E, N, M;
    const float *x, *b, *dy;
    float *y, *db;
} gb_args;

/* off[e] = first row of expert e; -1 on bad counts. */
static int64_t offsets(int64_t E, const int32_t *counts, int64_t N, int64_t *off) {
    off[0] = 0;
    for (int64_t e = 0; e < E; e++) {
        if (counts[e] < 0) return -1;
        off[e + 1] = off[e] + counts[e];
    }
    return off[E] > N ? -1 : off[E];
}

static void fwd_rows(void *p, int64_t r0, int64_t r1) {
    const gb_args *a = p;
    int64_t e = 0;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = a->x + r * a->M;
        float *y = a->y + r * a->M;
        while (e < a->E && r >= a->off[e + 1]) e++;
        if (e >= a->E) { /* past the routed rows */
            if (y != x) memmove(y, x, sizeof(float) * (size_t)a->M);
            continue;
        }
        const float *b = a->b + e * a->M;
        for (int64_t m = 0; m < a->M; m++) y[m] = x[m] + b[m];
    }
}

static void grad_cols(void *p, int64_t c0, int64_t c1) {
    const gb_args *a = p;
    for (int64_t e = 0; e < a->E; e++) {
        float *db = a->db + e * a->M;
        for (int64_t m = c0; m < c1; m++) db[m] = 0.0f;
        for (int64_t r = a->off[e]; r < a->off[e + 1]; r++) {
            const float *dy = a->dy + r * a->M;
            for (int64_t m = c0; m < c1; m++) db[m] += dy[m];
        }
    }
}

int dg_cpu_grouped_bias_fwd(const dg_team *team, int64_t E, const int32_t *counts, int64_t N, int64_t M,
                            const float *x, const float *b, float *y) {
    int64_t *off = dg_malloc(sizeof(int64_t) * (size_t)(E + 1));
    int st = offsets(E, counts, N, off) < 0 ? -1 : 0;
    if (st == 0) {
        gb_args a = {.off = off, .E = E, .N = N, .M = M, .x = x, .b = b, .y = y};
        dg_team_run(team, N, fwd_rows, &a);
    }
    dg_free(off);
    return st;
}

int dg_cpu_grouped_bias_grad(const dg_team *team, int64_t E, const int32_t *counts, int64_t N, int64_t M,
                             const float *dy, float *db) {
    int64_t *off = dg_malloc(sizeof(int64_t) * (size_t)(E + 1));
    int st = offsets(E, counts, N, off) < 0 ? -1 : 0;
    if (st == 0) {
        gb_args a = {.off = off, .E = E, .N = N, .M = M, .dy = dy, .db = db};
        dg_team_run(team, M, grad_cols, &a);
    }
    dg_free(off);
    return st;
}
