/* dg_cpu_half.c — see dg_cpu_half.h. */
#include "dg_cpu_half.h"

typedef struct half_job {
    const void *x;
    void *y;
    int fp16;
} half_job;

static void to_half_range(void *arg, int64_t b, int64_t e) {
    const half_job *j = arg;
    const float *x = j->x;
    uint16_t *y = j->y;
    if (j->fp16)
        for (int64_t i = b; i < e; i++) y[i] = dg_fp16_bits(x[i]);
    else
        for (int64_t i = b; i < e; i++) y[i] = dg_bf16_bits(x[i]);
}

static void from_half_range(void *arg, int64_t b, int64_t e) {
    const half_job *j = arg;
    const uint16_t *x = j->x;
    float *y = j->y;
    if (j->fp16)
        for (int64_t i = b; i < e; i++) y[i] = dg_fp16_value(x[i]);
    else
        for (int64_t i = b; i < e; i++) y[i] = dg_bf16_value(x[i]);
}

/* Below this many elements one thread converts (a team's wake-up costs more). */
#define DG_HALF_SERIAL 65536

void dg_cpu_to_half(const dg_team *team, const float *x, uint16_t *y, int64_t n, int fp16) {
    half_job j = {x, y, fp16};
    if (!team || n < DG_HALF_SERIAL) to_half_range(&j, 0, n);
    else dg_team_run(team, n, to_half_range, &j);
}

void dg_cpu_from_half(const dg_team *team, const uint16_t *x, float *y, int64_t n, int fp16) {
    half_job j = {x, y, fp16};
    if (!team || n < DG_HALF_SERIAL) from_half_range(&j, 0, n);
    else dg_team_run(team, n, from_half_range, &j);
}
