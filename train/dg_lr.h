/* dg_lr.h — learning rate by iteration, as Megatron's OptimizerParamScheduler:
 *
 *   it <= warmup:         init + (lr - init) * it / warmup (linear from init_lr, 0 by default)
 *   warmup < it <= decay: min_lr + coeff * (lr - min_lr), r = (it - warmup) / (decay - warmup)
 *                         constant: coeff = 1
 *                         linear:   coeff = 1 - r
 *                         cosine:   coeff = 0.5 * (cos(pi * r) + 1)
 *   it > decay:           min_lr
 * `it` counts updates done so far (Megatron calls step() after the update, so
 * iteration 1 uses it = 1 when warmup > 0... we use the lr of `it` for the
 * update that makes iteration `it`, it >= 1).
 */
#ifndef DG_LR_H
#define DG_LR_H

typedef enum dg_lr_style { DG_LR_CONSTANT = 0, DG_LR_LINEAR, DG_LR_COSINE } dg_lr_style;

typedef struct dg_lr_schedule {
    double max_lr, min_lr;
    int warmup_iters, decay_iters;
    dg_lr_style style;
    /* Megatron's schedule by samples (--lr-decay-samples,
     * --lr-warmup-samples, --lr-warmup-fraction): when step_samples > 0
     * the schedule counts samples, update `it` is at step it x step_samples,
     * and warmup_steps / decay_steps replace the iteration counts above. */
    int step_samples;
    double warmup_steps, decay_steps;
    double init_lr; /* --lr-warmup-init: warmup rises from here (0) */
} dg_lr_schedule;

double dg_lr_at(const dg_lr_schedule *s, int it);

#endif /* DG_LR_H */
