/* dg_cpu_dropout.c — see dg_cpu_dropout.h. */
#include "dg_cpu_dropout.h"

#include "dg_base.h"

typedef struct drop_args {
    const float *x;
    float *y;
    uint64_t stream; /* seed, iteration and site, mixed */
    int64_t first_sample, per_sample, elem_offset;
    int kind;
    float scale, p;
    uint32_t threshold;
} drop_args;

static void drop_rows(void *p, int64_t r0, int64_t r1) {
    const drop_args *a = p;
    for (int64_t r = r0; r < r1; r++) {
        uint64_t sample = (uint64_t)(a->first_sample + r);
        const float *x = a->x + r * a->per_sample;
        float *y = a->y + r * a->per_sample;
        for (int64_t j = 0; j < a->per_sample; j++)
            y[j] = dg_noise1(a->kind, a->stream, sample, (uint64_t)(a->elem_offset + j), a->threshold, a->scale,
                             a->p, x[j]);
    }
}

void dg_cpu_dropout(const dg_team *team, const float *x, float *y, const int32_t *key, int64_t salt,
                    double p, int64_t samples, int64_t per_sample) {
    dg_cpu_dropout_at(team, x, y, key, salt, p, samples, per_sample, 0);
}

void dg_cpu_dropout_at(const dg_team *team, const float *x, float *y, const int32_t *key, int64_t salt,
                       double p, int64_t samples, int64_t per_sample, int64_t elem_offset) {
    dg_cpu_noise_at(team, DG_NOISE_DROPOUT, x, y, key, salt, p, samples, per_sample, elem_offset);
}

void dg_cpu_noise_at(const dg_team *team, int kind, const float *x, float *y, const int32_t *key, int64_t salt,
                     double p, int64_t samples, int64_t per_sample, int64_t elem_offset) {
    if (kind != DG_NOISE_NORMAL && (!key[3] || !(p > 0))) { /* evaluation, or nothing to draw: identity */
        for (int64_t i = 0; i < samples * per_sample; i++) y[i] = x[i];
        return;
    }
    drop_args a = {.x = x, .y = y, .stream = dg_dropout_stream(key, salt), .first_sample = key[2],
                   .per_sample = per_sample, .elem_offset = elem_offset, .kind = kind,
                   .scale = kind == DG_NOISE_DROPOUT ? dg_dropout_scale(p) : 1.0f, .p = (float)p,
                   .threshold = kind == DG_NOISE_DROPOUT ? dg_dropout_threshold(p) : 0};
    dg_team_run(team, samples, drop_rows, &a);
}
