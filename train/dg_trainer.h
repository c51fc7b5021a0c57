/* dg_trainer.h — the training loop of `dagatron train`.
 *
 * One iteration: for each of the global batch's micro-batches, fill the
 * step graph's inputs, run forward + backward on the scheduler, add the
 * parameters' gradients into fp32 accumulators; then average over
 * micro-batches, skip the update if the loss or gradients are not finite
 * (counted as a NaN iteration), clip by the global L2 norm, and apply AdamW
 * with the scheduled learning rate. Every --log-interval iterations it
 * prints Megatron's log line.
 *
 * Determinism: the graph, the seeded initialisation and the data order are
 * fixed, reductions run in a fixed order, so two runs print identical losses.
 */
#ifndef DG_TRAINER_H
#define DG_TRAINER_H

#include "dg_train_config.h"

/* What a run ended with (for tests and the CLI's summary). */
typedef struct dg_train_result {
    int iterations;       /* iterations run by this call */
    double first_lm_loss; /* lm loss of the first iteration run */
    double last_lm_loss;  /* lm loss of the last iteration run */
    int skipped, nan_iters;
} dg_train_result;

/* Train as configured (c must have passed dg_train_config_finish). */
int dg_train(dg_train_config *c, dg_train_result *res, dg_err *err);

#endif /* DG_TRAINER_H */
