/* dg_cpu_adamw.c — see dg_cpu_adamw.h. */
#include "dg_cpu_adamw.h"

#include <math.h>

typedef struct adamw_args {
    dg_adamw_coef c;
    float gs, clip;
    const float *p, *g, *m, *v;
    float *po, *mo, *vo;
} adamw_args;

static void adamw_range(void *arg, int64_t i0, int64_t i1) {
    const adamw_args *a = arg;
    for (int64_t i = i0; i < i1; i++)
        dg_adamw1(&a->c, a->p[i], (a->g[i] * a->gs) * a->clip, a->m[i], a->v[i], &a->po[i], &a->mo[i], &a->vo[i]);
}

void dg_cpu_adamw_scaled(const dg_team *team, const dg_adamw_hparams *h, float grad_scale,
                         float clip, const float *p, const float *g, const float *m,
                         const float *v, float *p_out, float *m_out, float *v_out, int64_t n) {
    adamw_args a = {dg_adamw_coef_make(h), grad_scale, clip, p, g, m, v, p_out, m_out, v_out};
    dg_team_run(team, n, adamw_range, &a);
}

void dg_cpu_adamw(const dg_team *team, const dg_adamw_hparams *h, const float *p, const float *g,
                  const float *m, const float *v, float *p_out, float *m_out, float *v_out,
                  int64_t n) {
    dg_cpu_adamw_scaled(team, h, 1.0f, 1.0f, p, g, m, v, p_out, m_out, v_out, n);
}

typedef struct sumsq_args {
    const float *x;
    int64_t n, block;
    float scale;
    double *part;
} sumsq_args;

static void sumsq_blocks(void *arg, int64_t b0, int64_t b1) {
    const sumsq_args *a = arg;
    for (int64_t b = b0; b < b1; b++) {
        double s = 0;
        for (int64_t i = b * a->block; i < a->n && i < (b + 1) * a->block; i++) {
            float y = a->x[i] * a->scale;
            s += (double)y * y;
        }
        a->part[b] = s;
    }
}

double dg_cpu_sumsq(const dg_team *team, const float *x, int64_t n, float scale) {
    double part[DG_SUMSQ_BLOCKS];
    int64_t nb = (n + 65535) / 65536;
    if (nb > DG_SUMSQ_BLOCKS) nb = DG_SUMSQ_BLOCKS;
    sumsq_args a = {x, n, nb > 0 ? (n + nb - 1) / nb : 1, scale, part};
    dg_team_run(team, nb, sumsq_blocks, &a);
    double s = 0;
    for (int64_t b = 0; b < nb; b++) s += part[b];
    return s;
}
