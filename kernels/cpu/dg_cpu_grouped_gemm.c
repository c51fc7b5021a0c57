/* dg_cpu_grouped_gemm.c — see dg_cpu_grouped_gemm.h. */
#include "dg_cpu_grouped_gemm.h"

#include <string.h>

#include "dg_base.h"
#include "dg_cpu_gemm.h"

/* The block plan: expert e's blocks are units [ustart[e], ustart[e+1]). */
typedef struct gg_plan {
    int64_t E;
    int64_t *off;    /* [E + 1] first row of each expert */
    int64_t *ustart; /* [E + 1] first unit of each expert */
} gg_plan;

typedef struct gg_args {
    gg_plan p;
    int tw;
    int64_t K, M, A, B;
    const float *x, *w, *a, *b;
    float *y;
} gg_args;

/* Offsets and block starts; rows_of(e) is the row count to be blocked.
 * Returns the total row count, or -1 on bad counts. */
static int64_t plan_make(gg_plan *p, int64_t E, const int32_t *counts, int64_t N, int64_t wrows) {
    p->E = E;
    p->off = dg_malloc(sizeof(int64_t) * (size_t)(2 * (E + 1)));
    p->ustart = p->off + E + 1;
    p->off[0] = 0;
    p->ustart[0] = 0;
    for (int64_t e = 0; e < E; e++) {
        if (counts[e] < 0) return -1;
        p->off[e + 1] = p->off[e] + counts[e];
        /* wrows > 0: blocks over the weight's rows (wgrad); else over tokens */
        int64_t rows = wrows > 0 ? wrows : counts[e];
        p->ustart[e + 1] = p->ustart[e] + (rows + DG_GG_BLOCK - 1) / DG_GG_BLOCK;
    }
    return p->off[E] > N ? -1 : p->off[E];
}

/* Expert owning unit u, searching forward from *e. */
static int64_t plan_expert(const gg_plan *p, int64_t u, int64_t e) {
    while (u >= p->ustart[e + 1]) e++;
    return e;
}

static void fwd_units(void *pa, int64_t u0, int64_t u1) {
    const gg_args *a = pa;
    int64_t e = 0;
    for (int64_t u = u0; u < u1; u++) {
        e = plan_expert(&a->p, u, e);
        int64_t r0 = a->p.off[e] + (u - a->p.ustart[e]) * DG_GG_BLOCK;
        int64_t r1 = DG_MIN(r0 + DG_GG_BLOCK, a->p.off[e + 1]);
        const float *we = a->w + e * a->M * a->K;
        /* tw: w_e [M, K] (ldb K); else w_e [K, M] (ldb M) */
        dg_cpu_sgemm(NULL, 0, a->tw, r1 - r0, a->M, a->K, 1.0f, a->x + r0 * a->K, a->K, we,
                     a->tw ? a->K : a->M, 0.0f, a->y + r0 * a->M, a->M);
    }
}

int dg_cpu_grouped_gemm(const dg_team *team, int tw, int64_t E, const int32_t *counts, int64_t N,
                        int64_t K, int64_t M, const float *x, const float *w, float *y) {
    gg_args a = {.tw = tw, .K = K, .M = M, .x = x, .w = w, .y = y};
    int64_t total = plan_make(&a.p, E, counts, N, 0);
    if (total >= 0) {
        if (K > 0) {
            dg_team_run(team, a.p.ustart[E], fwd_units, &a);
        } else {
            memset(y, 0, sizeof(float) * (size_t)(total * M));
        }
        memset(y + total * M, 0, sizeof(float) * (size_t)((N - total) * M));
    }
    dg_free(a.p.off);
    return total >= 0 ? 0 : -1;
}

static void wgrad_units(void *pa, int64_t u0, int64_t u1) {
    const gg_args *a = pa;
    int64_t e = 0;
    for (int64_t u = u0; u < u1; u++) {
        e = plan_expert(&a->p, u, e);
        int64_t i0 = (u - a->p.ustart[e]) * DG_GG_BLOCK, i1 = DG_MIN(i0 + DG_GG_BLOCK, a->A);
        int64_t r0 = a->p.off[e], n = a->p.off[e + 1] - r0;
        float *o = a->y + (e * a->A + i0) * a->B;
        if (n == 0) {
            memset(o, 0, sizeof(float) * (size_t)((i1 - i0) * a->B));
            continue;
        }
        /* rows i0..i1 of a_e^T b_e: A stored [n, A] transposed, columns i0.. */
        dg_cpu_sgemm(NULL, 1, 0, i1 - i0, a->B, n, 1.0f, a->a + r0 * a->A + i0, a->A,
                     a->b + r0 * a->B, a->B, 0.0f, o, a->B);
    }
}

int dg_cpu_grouped_gemm_wgrad(const dg_team *team, int64_t E, const int32_t *counts, int64_t N,
                              int64_t A, int64_t B, const float *a, const float *b, float *out) {
    gg_args g = {.A = A, .B = B, .a = a, .b = b, .y = out};
    int64_t total = plan_make(&g.p, E, counts, N, A);
    if (total >= 0 && B > 0) dg_team_run(team, g.p.ustart[E], wgrad_units, &g);
    dg_free(g.p.off);
    return total >= 0 ? 0 : -1;
}
