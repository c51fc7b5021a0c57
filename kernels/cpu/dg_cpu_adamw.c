/* dg_cpu_adamw.c — see dg_cpu_adamw.h. */
#include "dg_cpu_adamw.h"

#include <math.h>

dg_adamw_coef dg_adamw_coef_make(const dg_adamw_hparams *h) {
    double t = (double)h->step;
    double bc1 = 1.0 - pow(h->beta1, t), bc2 = 1.0 - pow(h->beta2, t);
    dg_adamw_coef c = {
        .decay = (float)(1.0 - h->lr * h->weight_decay),
        .beta1 = (float)h->beta1,
        .one_m_beta1 = (float)(1.0 - h->beta1),
        .beta2 = (float)h->beta2,
        .one_m_beta2 = (float)(1.0 - h->beta2),
        .bc2_sqrt = (float)sqrt(bc2),
        .eps = (float)h->eps,
        .neg_step_size = (float)(-h->lr / bc1),
    };
    return c;
}

typedef struct adamw_args {
    dg_adamw_coef c;
    const float *p, *g, *m, *v;
    float *po, *mo, *vo;
} adamw_args;

static void adamw_range(void *arg, int64_t i0, int64_t i1) {
    const adamw_args *a = arg;
    for (int64_t i = i0; i < i1; i++)
        dg_adamw1(&a->c, a->p[i], a->g[i], a->m[i], a->v[i], &a->po[i], &a->mo[i], &a->vo[i]);
}

void dg_cpu_adamw(const dg_team *team, const dg_adamw_hparams *h, const float *p, const float *g,
                  const float *m, const float *v, float *p_out, float *m_out, float *v_out,
                  int64_t n) {
    adamw_args a = {dg_adamw_coef_make(h), p, g, m, v, p_out, m_out, v_out};
    dg_team_run(team, n, adamw_range, &a);
}
