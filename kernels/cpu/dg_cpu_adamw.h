/* dg_cpu_adamw.h — the AdamW update, exactly as torch.optim.AdamW
 * (single-tensor path, amsgrad = False, maximize = False) computes it:
 *
 *   p  = p * (1 - lr * wd)                    decoupled weight decay, first
 *   m  = m * beta1 + (1 - beta1) * g
 *   v  = v * beta2 + (1 - beta2) * g * g
 *   p  = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
 *
 * with t >= 1 the number of this update (1 for the first). The scalar
 * coefficients are computed in double and rounded to float once, like the
 * Python scalars torch passes to its float kernels; the per-element math
 * is float, in torch's order.
 *
 * Buffers are [n] floats; outputs may alias inputs (p_out == p, ...), so
 * the training loop can update in place. Element-wise: no reduction, the
 * result does not depend on the thread count.
 */
#ifndef DG_CPU_ADAMW_H
#define DG_CPU_ADAMW_H

#include <math.h>
#include <stdint.h>

#include "dg_cpu_math.h"
#include "dg_team.h"

typedef struct dg_adamw_hparams {
    double lr, beta1, beta2, eps, weight_decay;
    int64_t step; /* t >= 1 */
} dg_adamw_hparams;

/* The float scalars of one update. */
typedef struct dg_adamw_coef {
    float decay;          /* 1 - lr * wd */
    float beta1, one_m_beta1, beta2, one_m_beta2;
    float bc2_sqrt;       /* sqrt(1 - beta2^t) */
    float eps;
    float neg_step_size;  /* -lr / (1 - beta1^t) */
} dg_adamw_coef;

/* DG_HD: the CUDA optimizer makes them on the device, from the step's
 * hyper-parameters there. */
static inline DG_HD dg_adamw_coef dg_adamw_coef_make(const dg_adamw_hparams *h) {
    double t = (double)h->step;
    double bc1 = 1.0 - pow(h->beta1, t), bc2 = 1.0 - pow(h->beta2, t);
    dg_adamw_coef c;
    c.decay = (float)(1.0 - h->lr * h->weight_decay);
    c.beta1 = (float)h->beta1;
    c.one_m_beta1 = (float)(1.0 - h->beta1);
    c.beta2 = (float)h->beta2;
    c.one_m_beta2 = (float)(1.0 - h->beta2);
    c.bc2_sqrt = (float)sqrt(bc2);
    c.eps = (float)h->eps;
    c.neg_step_size = (float)(-h->lr / bc1);
    return c;
}

/* One element; order of operations follows torch. */
static inline DG_HD void dg_adamw1(const dg_adamw_coef *c, float p, float g, float m, float v,
                                   float *p_out, float *m_out, float *v_out) {
    p = p * c->decay;
    m = m * c->beta1 + c->one_m_beta1 * g;
    v = v * c->beta2 + c->one_m_beta2 * g * g;
    float denom = sqrtf(v) / c->bc2_sqrt + c->eps;
    *p_out = p + c->neg_step_size * (m / denom);
    *m_out = m;
    *v_out = v;
}

/* p, g, m, v [n] -> p_out, m_out, v_out [n]. */
void dg_cpu_adamw(const dg_team *team, const dg_adamw_hparams *h, const float *p, const float *g,
                  const float *m, const float *v, float *p_out, float *m_out, float *v_out,
                  int64_t n);

/* The same update on a gradient the optimizer scales on the fly: element i
 * uses g_i' = (g[i] * grad_scale) * clip, rounded to float after each
 * product, which is what scaling the gradient buffer twice in place (by
 * 1 / data shards, then by the clip coefficient) would give, without
 * writing it. Scales of 1 are exact, so dg_cpu_adamw is this with 1, 1. */
void dg_cpu_adamw_scaled(const dg_team *team, const dg_adamw_hparams *h, float grad_scale,
                         float clip, const float *p, const float *g, const float *m,
                         const float *v, float *p_out, float *m_out, float *v_out, int64_t n);

/* Sum over x [n] of (x[i] * scale)^2: the product rounded to float (the
 * scaled gradient AdamW sees), squared and added in double. The elements
 * are cut into at most DG_SUMSQ_BLOCKS blocks of at least 64Ki, a layout
 * that depends on n alone; the team sums blocks in index order and the
 * block sums are added in block order, so the result does not depend on
 * the thread count. */
#define DG_SUMSQ_BLOCKS 1024
double dg_cpu_sumsq(const dg_team *team, const float *x, int64_t n, float scale);

#endif /* DG_CPU_ADAMW_H */
