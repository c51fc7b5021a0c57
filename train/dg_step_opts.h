/* dg_step_opts.h — the step pipeline's options for one rank of a run, from
 * the flags.
 *
 * What `dagatron train` runs, what `dagatron simulate` costs and what
 * `dagatron dump --graph step` writes are the same graph only if they are
 * built from the same options: the DP stage's buckets and ZeRO, the
 * optimizer's group sizes and gradient scale, 16-bit rounding, TP/SP, CP,
 * EP, the micro-batch order and the rank's pipeline stage. This is the one
 * place that turns a checked config (train/dg_train_config.h) into them.
 *
 *   dg_step_opts s;
 *   dg_step_opts_init(&s, cfg, &lio, group, grad_shards, pp_stage);
 *   dg_step_pipeline_run(cfg, logical, &lio, &s.po, &r, &err); // with train's recompute regions
 *
 * s.po points into s: keep s in place while s.po (or a copy of it) is used.
 */
#ifndef DG_STEP_OPTS_H
#define DG_STEP_OPTS_H

#include "dg_grid.h"
#include "dg_model.h"
#include "dg_pass_precision.h"
#include "dg_pipeline.h"
#include "dg_train_config.h"

typedef struct dg_step_opts {
    dg_pipeline_opts po; /* what dg_pipeline_run takes; points at the fields below */
    dg_dp_opts dp;
    dg_optim_opts optim;
    dg_pass_precision_opts precision;
} dg_step_opts;

/* A finished copy of the config `in` for `world` ranks (world 0: the
 * product of the parallel sizes) and the grid's sizes, dp derived: the
 * parallel checks, the data-parallel size (ep x dp) and the micro-batch
 * count, as `dagatron train` sets them up. The vocabulary is the data's
 * tokenizer's when the config reads data. DG_EINPUT with one line for sizes
 * that do not fit. */
int dg_step_config(const dg_train_config *in, int world, dg_train_config *out, dg_grid_sizes *sz, dg_err *err);

/* Each axis's group size for a rank of a grid of checked sizes sz, as the
 * runtime's comms have them (dg_grid_runtime_groups): tp, cp, ep, pp their
 * own; dp the dense-gradient group cp x ep x dp; edp the expert-data group.
 * *grad_shards: the data shards the gradient is averaged over, (ep x dp). */
void dg_step_groups(const dg_grid_sizes *sz, int group[DG_AXIS_COUNT], int *grad_shards);

/* The full step (every micro-batch, DP, the optimizer) for the rank on
 * pipeline stage pp_stage, with group sizes `group` (dg_step_groups, or the
 * runtime comms' sizes) and gradients averaged over grad_shards. Leaves
 * po.recompute NULL: the regions are dg_step_build's choice. */
void dg_step_opts_init(dg_step_opts *s, const dg_train_config *c, const dg_model_io *lio,
                       const int group[DG_AXIS_COUNT], int grad_shards, int pp_stage);

#endif
