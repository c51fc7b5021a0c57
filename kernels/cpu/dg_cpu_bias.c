/* dg_cpu_bias.c — see dg_cpu_bias.h. */
#include "dg_cpu_bias.h"

typedef struct bias_args {
    const float *x, *b;
    float *y;
    int64_t rows, cols;
} bias_args;

static void add_rows_range(void *p, int64_t r0, int64_t r1) {
    const bias_args *a = p;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = a->x + r * a->cols;
        float *y = a->y + r * a->cols;
        for (int64_t j = 0; j < a->cols; j++) y[j] = x[j] + a->b[j];
    }
}

void dg_cpu_add_rows(const dg_team *team, const float *x, const float *b, float *y, int64_t rows,
                     int64_t cols) {
    bias_args a = {.x = x, .b = b, .y = y, .rows = rows, .cols = cols};
    dg_team_run(team, rows, add_rows_range, &a);
}

/* Columns [j0, j1): each column's sum runs over the rows in order. */
static void sum_rows_range(void *p, int64_t j0, int64_t j1) {
    const bias_args *a = p;
    for (int64_t j = j0; j < j1; j++) a->y[j] = 0.0f;
    for (int64_t r = 0; r < a->rows; r++) {
        const float *x = a->x + r * a->cols;
        for (int64_t j = j0; j < j1; j++) a->y[j] += x[j];
    }
}

void dg_cpu_sum_rows(const dg_team *team, const float *dy, float *db, int64_t rows, int64_t cols) {
    bias_args a = {.x = dy, .y = db, .rows = rows, .cols = cols};
    dg_team_run(team, cols, sum_rows_range, &a);
}
