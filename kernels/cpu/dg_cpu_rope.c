/* dg_cpu_rope.c — see dg_cpu_rope.h. */
#include "dg_cpu_rope.h"

#include <math.h>

typedef struct rope_args {
    const float *x, *cos_t, *sin_t;
    float *y, *cos_w, *sin_w;
    int64_t S, NH, D, R;
    const dg_rope_spec *spec;
    int64_t pos0;
    int inverse, interleaved;
} rope_args;

static void table_rows(void *p, int64_t s0, int64_t s1) {
    const rope_args *a = p;
    const int64_t half = a->D / 2;
    for (int64_t s = s0; s < s1; s++)
        for (int64_t i = 0; i < half; i++)
            dg_rope_cos_sin(a->spec, a->pos0 + s, i, a->D, &a->cos_w[s * half + i], &a->sin_w[s * half + i]);
}

void dg_cpu_rope_table(const dg_team *team, int64_t S, int64_t R, const dg_rope_spec *spec, int64_t pos0,
                       float *cos_t, float *sin_t) {
    /* table_rows reads the rotary dim as D */
    rope_args a = {.cos_w = cos_t, .sin_w = sin_t, .D = R, .spec = spec, .pos0 = pos0};
    dg_team_run(team, S, table_rows, &a);
}

/* Rows are (b, s, h) triples, r = (b * S + s) * NH + h. */
static void apply_rows(void *p, int64_t r0, int64_t r1) {
    const rope_args *a = p;
    const int64_t D = a->D, half = a->R / 2;
    const float sg = a->inverse ? -1.0f : 1.0f;
    for (int64_t r = r0; r < r1; r++) {
        int64_t s = (r / a->NH) % a->S;
        const float *c = a->cos_t + s * half, *sn = a->sin_t + s * half;
        const float *x = a->x + r * D;
        float *y = a->y + r * D;
        for (int64_t i = 0; i < half; i++) {
            float y1, y2;
            int64_t d1, d2;
            dg_rope_pair_dims(i, a->R, a->interleaved, &d1, &d2);
            dg_rope_pair(x[d1], x[d2], c[i], sg * sn[i], &y1, &y2);
            y[d1] = y1;
            y[d2] = y2;
        }
        if (y != x)
            for (int64_t i = a->R; i < D; i++) y[i] = x[i];
    }
}

void dg_cpu_rope_apply2(const dg_team *team, const float *x, float *y, const float *cos_t,
                        const float *sin_t, int64_t B, int64_t S, int64_t NH, int64_t D, int64_t R,
                        int inverse, int interleaved) {
    rope_args a = {.x = x, .y = y, .cos_t = cos_t, .sin_t = sin_t, .S = S, .NH = NH, .D = D,
                   .R = R, .inverse = inverse, .interleaved = interleaved};
    dg_team_run(team, B * S * NH, apply_rows, &a);
}

void dg_cpu_rope_apply(const dg_team *team, const float *x, float *y, const float *cos_t,
                       const float *sin_t, int64_t B, int64_t S, int64_t NH, int64_t D, int64_t R,
                       int inverse) {
    dg_cpu_rope_apply2(team, x, y, cos_t, sin_t, B, S, NH, D, R, inverse, 0);
}
