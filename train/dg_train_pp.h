/* dg_train_pp.h — what the training loop needs to know about pipeline
 * parallelism: the flags' checks (found before any work, the same on every
 * rank) and the PP pass's options for this rank's stage.
 *
 * Under --pipeline-model-parallel-size p > 1 the step pipeline's PP pass
 * (graph/passes/dg_pass_pp.h) gives each rank its stage's graph; the
 * schedule (--pipeline-schedule, graph/passes/dg_pass_pp_sched.h) orders
 * its micro-batches; Megatron's virtual-stage flags make it interleaved
 * 1F1B (graph/passes/dg_pass_pp_interleave.h).
 *
 * Checkpoints (train/dg_dist_ckpt.h) need one thing from PP: a stage holds
 * only its layers' parameters, which the sharded format takes as it is
 * (boxes keyed by global offsets), but the tied word embedding is held by
 * the first and the last stage, bit for bit alike (dg_pass_pp_tied): the
 * later stage's copy is left to the earlier one to write, and both load it.
 */
#ifndef DG_TRAIN_PP_H
#define DG_TRAIN_PP_H

#include "dg_pass_pp.h"
#include "dg_train_config.h"

/* DG_OK, or DG_EINPUT with one line naming the flag. */
int dg_train_pp_check(const dg_train_config *c, dg_err *err);

/* Interleaved 1F1B takes the micro-batches in groups of
 * --pipeline-model-parallel-size (Megatron's rule): DG_OK, or DG_EINPUT with
 * one line naming the batch flags and the data-parallel size data_size.
 * After num_microbatches is known. */
int dg_train_pp_check_microbatches(const dg_train_config *c, int data_size, dg_err *err);

/* The PP pass's options for pipeline stage `stage`. */
void dg_train_pp_opts(const dg_train_config *c, int stage, dg_pp_opts *o);

/* Per tensor of stage graph g (n_tensors flags, dg_free): 1 for a
 * parameter an earlier stage also holds (the tied embedding's copy on the
 * last stage, b: this stage's boundaries), which this stage's checkpoint
 * save leaves to that stage. */
char *dg_train_pp_ckpt_skip(const dg_graph *g, const dg_pp_bounds *b);

#endif /* DG_TRAIN_PP_H */
