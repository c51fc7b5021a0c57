/* dg_cpu_elementwise.c — see dg_cpu_elementwise.h. */
#include "dg_cpu_elementwise.h"

#include <stdlib.h>

typedef struct ew_args {
    const float *a, *b;
    float *y;
    float alpha;
    double *partial; /* dg_cpu_sum: one slot per chunk */
    int64_t n;
} ew_args;

static void add_range(void *p, int64_t i0, int64_t i1) {
    const ew_args *a = p;
    for (int64_t i = i0; i < i1; i++) a->y[i] = a->a[i] + a->b[i];
}
static void mul_range(void *p, int64_t i0, int64_t i1) {
    const ew_args *a = p;
    for (int64_t i = i0; i < i1; i++) a->y[i] = a->a[i] * a->b[i];
}
static void scale_range(void *p, int64_t i0, int64_t i1) {
    const ew_args *a = p;
    for (int64_t i = i0; i < i1; i++) a->y[i] = a->alpha * a->a[i];
}
static void fill_range(void *p, int64_t i0, int64_t i1) {
    const ew_args *a = p;
    for (int64_t i = i0; i < i1; i++) a->y[i] = a->alpha;
}

void dg_cpu_add(const dg_team *team, const float *a, const float *b, float *y, int64_t n) {
    ew_args args = {.a = a, .b = b, .y = y};
    dg_team_run(team, n, add_range, &args);
}
void dg_cpu_mul(const dg_team *team, const float *a, const float *b, float *y, int64_t n) {
    ew_args args = {.a = a, .b = b, .y = y};
    dg_team_run(team, n, mul_range, &args);
}
void dg_cpu_scale(const dg_team *team, const float *x, float alpha, float *y, int64_t n) {
    ew_args args = {.a = x, .y = y, .alpha = alpha};
    dg_team_run(team, n, scale_range, &args);
}
void dg_cpu_fill(const dg_team *team, float value, float *y, int64_t n) {
    ew_args args = {.y = y, .alpha = value};
    dg_team_run(team, n, fill_range, &args);
}

/* Chunks [c0, c1): each chunk's sum in double, in element order. */
static void sum_chunks(void *p, int64_t c0, int64_t c1) {
    const ew_args *a = p;
    for (int64_t c = c0; c < c1; c++) {
        int64_t i0 = c * DG_SUM_CHUNK, i1 = i0 + DG_SUM_CHUNK < a->n ? i0 + DG_SUM_CHUNK : a->n;
        double s = 0;
        for (int64_t i = i0; i < i1; i++) s += a->a[i];
        a->partial[c] = s;
    }
}

double dg_cpu_sum(const dg_team *team, const float *x, int64_t n) {
    if (n <= 0) return 0.0;
    int64_t chunks = (n + DG_SUM_CHUNK - 1) / DG_SUM_CHUNK;
    double stack[64];
    double *partial = chunks <= 64 ? stack : malloc(sizeof(double) * (size_t)chunks);
    ew_args args = {.a = x, .partial = partial, .n = n};
    dg_team_run(team, chunks, sum_chunks, &args);
    double s = 0;
    for (int64_t c = 0; c < chunks; c++) s += partial[c];
    if (partial != stack) free(partial);
    return s;
}
