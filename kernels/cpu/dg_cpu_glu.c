/* dg_cpu_glu.c — see dg_cpu_glu.h. */
#include "dg_cpu_glu.h"

typedef struct glu_args {
    const float *x, *dy;
    float *y, *dx;
    int64_t F;
    int act;
    float offset, clamp;
} glu_args;

static void glu_fwd_rows(void *p, int64_t r0, int64_t r1) {
    const glu_args *a = p;
    const int64_t F = a->F;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = a->x + r * 2 * F;
        float *y = a->y + r * F;
        for (int64_t j = 0; j < F; j++) y[j] = dg_glu1(a->act, a->offset, a->clamp, x[j], x[F + j]);
    }
}

static void glu_bwd_rows(void *p, int64_t r0, int64_t r1) {
    const glu_args *a = p;
    const int64_t F = a->F;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = a->x + r * 2 * F, *dy = a->dy + r * F;
        float *dx = a->dx + r * 2 * F;
        for (int64_t j = 0; j < F; j++)
            dg_glu1_grad(a->act, a->offset, a->clamp, x[j], x[F + j], dy[j], &dx[j], &dx[F + j]);
    }
}

void dg_cpu_glu_fwd(const dg_team *team, int act, float offset, float clamp, const float *x, float *y,
                    int64_t rows, int64_t F) {
    glu_args a = {.x = x, .y = y, .F = F, .act = act, .offset = offset, .clamp = clamp};
    dg_team_run(team, rows, glu_fwd_rows, &a);
}

void dg_cpu_glu_bwd(const dg_team *team, int act, float offset, float clamp, const float *dy, const float *x,
                    float *dx, int64_t rows, int64_t F) {
    glu_args a = {.x = x, .dy = dy, .dx = dx, .F = F, .act = act, .offset = offset, .clamp = clamp};
    dg_team_run(team, rows, glu_bwd_rows, &a);
}
