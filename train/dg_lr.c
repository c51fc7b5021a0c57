/* dg_lr.c — see dg_lr.h. */
#include "dg_lr.h"

#include <math.h>

double dg_lr_at(const dg_lr_schedule *s, int it) {
    int by_samples = s->step_samples > 0;
    double step = by_samples ? (double)it * s->step_samples : (double)it;
    double warmup = by_samples ? s->warmup_steps : (double)s->warmup_iters;
    double decay = by_samples ? s->decay_steps : (double)s->decay_iters;
    if (warmup > 0 && step <= warmup) return s->init_lr + (s->max_lr - s->init_lr) * step / warmup;
    if (s->style == DG_LR_CONSTANT) return s->max_lr;
    if (step > decay) return s->min_lr;
    double span = decay - warmup;
    double r = span > 0 ? (step - warmup) / span : 1.0;
    double coeff = s->style == DG_LR_LINEAR ? 1.0 - r : 0.5 * (cos(M_PI * r) + 1.0);
    return s->min_lr + coeff * (s->max_lr - s->min_lr);
}
