/* dg_cpu_dropout.h — dropout with a counter-based mask.
 *
 * Element i of sample s keeps its value (times 1 / (1 - p)) unless
 *     u = dg_dropout_u(key, salt, s, i) < p,
 * where u in [0, 1) is a hash of the run's seed, the iteration, the sample's
 * global index, the dropout site (salt) and the element's index within the
 * sample. Nothing is stored: the backward recomputes the same mask, any
 * thread count draws the same numbers, and a sample gets the same mask
 * whichever rank or micro-batch holds it.
 *
 * key (the graph's "rng_key" input, i32 [4]): seed, iteration, global index
 * of the micro-batch's first sample, and 1 while training (0: identity, as
 * Megatron's model.eval()).
 * x, y: [samples, per_sample]; y may alias x. dropout_bwd is the same map on dy.
 */
#ifndef DG_CPU_DROPOUT_H
#define DG_CPU_DROPOUT_H

#include <stdint.h>

#include "dg_team.h"

void dg_cpu_dropout(const dg_team *team, const float *x, float *y, const int32_t *key, int64_t salt,
                    double p, int64_t samples, int64_t per_sample);

/* The same over a slice of each sample: x's row r holds elements
 * elem_offset .. elem_offset + per_sample - 1 of sample r (SP's sequence
 * split: a rank's tokens are one run of each sample), which draw the
 * whole sample's mask there. */
void dg_cpu_dropout_at(const dg_team *team, const float *x, float *y, const int32_t *key, int64_t salt,
                       double p, int64_t samples, int64_t per_sample, int64_t elem_offset);

#endif /* DG_CPU_DROPOUT_H */
