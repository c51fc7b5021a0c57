/* dg_cpu_act.c — see dg_cpu_act.h. */
#include "dg_cpu_act.h"

typedef struct act_args {
    const float *x, *dy;
    float *y, *dx;
    int64_t F;
} act_args;

static void swiglu_fwd_rows(void *p, int64_t r0, int64_t r1) {
    const act_args *a = p;
    const int64_t F = a->F;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = a->x + r * 2 * F;
        float *y = a->y + r * F;
        for (int64_t j = 0; j < F; j++) y[j] = dg_swiglu1(x[j], x[F + j]);
    }
}

static void swiglu_bwd_rows(void *p, int64_t r0, int64_t r1) {
    const act_args *a = p;
    const int64_t F = a->F;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = a->x + r * 2 * F, *dy = a->dy + r * F;
        float *dx = a->dx + r * 2 * F;
        for (int64_t j = 0; j < F; j++) dg_swiglu1_grad(x[j], x[F + j], dy[j], &dx[j], &dx[F + j]);
    }
}

void dg_cpu_swiglu_fwd(const dg_team *team, const float *x, float *y, int64_t rows, int64_t F) {
    act_args a = {.x = x, .y = y, .F = F};
    dg_team_run(team, rows, swiglu_fwd_rows, &a);
}

void dg_cpu_swiglu_bwd(const dg_team *team, const float *dy, const float *x, float *dx,
                       int64_t rows, int64_t F) {
    act_args a = {.x = x, .dy = dy, .dx = dx, .F = F};
    dg_team_run(team, rows, swiglu_bwd_rows, &a);
}

static void gelu_fwd_range(void *p, int64_t i0, int64_t i1) {
    const act_args *a = p;
    for (int64_t i = i0; i < i1; i++) a->y[i] = dg_gelu(a->x[i]);
}

static void gelu_bwd_range(void *p, int64_t i0, int64_t i1) {
    const act_args *a = p;
    for (int64_t i = i0; i < i1; i++) a->dx[i] = a->dy[i] * dg_gelu_grad(a->x[i]);
}

void dg_cpu_gelu_fwd(const dg_team *team, const float *x, float *y, int64_t n) {
    act_args a = {.x = x, .y = y};
    dg_team_run(team, n, gelu_fwd_range, &a);
}

void dg_cpu_gelu_bwd(const dg_team *team, const float *dy, const float *x, float *dx, int64_t n) {
    act_args a = {.x = x, .dy = dy, .dx = dx};
    dg_team_run(team, n, gelu_bwd_range, &a);
}
