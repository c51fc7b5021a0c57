/* dg_cpu_dropout.c — see dg_cpu_dropout.h. */
#include "dg_cpu_dropout.h"

#include "dg_base.h"

typedef struct drop_args {
    const float *x;
    float *y;
    uint64_t stream; /* seed, iteration and site, mixed */
    int64_t first_sample, per_sample, elem_offset;
    float scale;
    uint32_t threshold; /* keep when the top 32 hash bits >= threshold */
} drop_args;

/* One 64-bit hash of (stream, sample, element): splitmix64's finaliser. */
static inline uint64_t mix(uint64_t stream, uint64_t sample, uint64_t elem) {
    uint64_t s = stream ^ (sample * 0xD1B54A32D192ED03ull) ^ (elem * 0x9E3779B97F4A7C15ull);
    return dg_splitmix64(&s);
}

static void drop_rows(void *p, int64_t r0, int64_t r1) {
    const drop_args *a = p;
    for (int64_t r = r0; r < r1; r++) {
        uint64_t sample = (uint64_t)(a->first_sample + r);
        const float *x = a->x + r * a->per_sample;
        float *y = a->y + r * a->per_sample;
        for (int64_t j = 0; j < a->per_sample; j++) {
            uint32_t u = (uint32_t)(mix(a->stream, sample, (uint64_t)(a->elem_offset + j)) >> 32);
            y[j] = u >= a->threshold ? x[j] * a->scale : 0.0f;
        }
    }
}

void dg_cpu_dropout(const dg_team *team, const float *x, float *y, const int32_t *key, int64_t salt,
                    double p, int64_t samples, int64_t per_sample) {
    dg_cpu_dropout_at(team, x, y, key, salt, p, samples, per_sample, 0);
}

void dg_cpu_dropout_at(const dg_team *team, const float *x, float *y, const int32_t *key, int64_t salt,
                       double p, int64_t samples, int64_t per_sample, int64_t elem_offset) {
    if (!key[3] || !(p > 0)) { /* evaluation, or no dropout: identity */
        for (int64_t i = 0; i < samples * per_sample; i++) y[i] = x[i];
        return;
    }
    uint64_t st = ((uint64_t)(uint32_t)key[0] << 32) | (uint32_t)key[1];
    uint64_t stream = dg_splitmix64(&st);
    st = stream ^ (uint64_t)salt;
    stream = dg_splitmix64(&st);
    drop_args a = {.x = x, .y = y, .stream = stream, .first_sample = key[2], .per_sample = per_sample,
                   .elem_offset = elem_offset,
                   .scale = (float)(1.0 / (1.0 - p)),
                   .threshold = (uint32_t)(p * 4294967296.0 < 4294967295.0 ? p * 4294967296.0 : 4294967295.0)};
    dg_team_run(team, samples, drop_rows, &a);
}
