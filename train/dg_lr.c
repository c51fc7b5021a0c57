/* dg_lr.c — see dg_lr.h. */
#include "dg_lr.h"

#include <math.h>

double dg_lr_at(const dg_lr_schedule *s, int it) {
    if (s->warmup_iters > 0 && it <= s->warmup_iters)
        return s->max_lr * (double)it / (double)s->warmup_iters;
    if (s->style == DG_LR_CONSTANT) return s->max_lr;
    if (it > s->decay_iters) return s->min_lr;
    int span = s->decay_iters - s->warmup_iters;
    double r = span > 0 ? (double)(it - s->warmup_iters) / (double)span : 1.0;
    double coeff = s->style == DG_LR_LINEAR ? 1.0 - r : 0.5 * (cos(M_PI * r) + 1.0);
    return s->min_lr + coeff * (s->max_lr - s->min_lr);
}
