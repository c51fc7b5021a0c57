/* dg_pass_optim.h — the optimizer as a graph pass: gradient norm, clipping,
 * the NaN/inf skip, AdamW and the parameter all-gather become nodes of the
 * step graph (phase DG_PHASE_OPTIMIZER), so the scheduler runs them like the
 * rest of the step and the trace shows them.
 *
 * Runs after dg_pass_dp() on its bucket layout. For each bucket, the
 * gradient the optimizer reads is the DP collective's output (`reduced`:
 * the whole bucket, or this rank's shard under the distributed optimizer),
 * or, in a world of one (layout only), the parameters' own gradients; it is
 * scaled by grad_scale (1 / data shards) on the fly, never copied.
 *
 * 1. The norm. A sumsq node per bucket (per 8 gradients in a world of one)
 *    gives a partial sum of squares. Which ranks hold DIFFERENT pieces of a
 *    bucket's gradient follows from the bucket's reduce group and its
 *    parameters' placement: the ranks of the bucket's group when it is
 *    reduce-scattered (each keeps its own shard; an all-reduced bucket is
 *    the same on all of them), times the axes that split its parameters
 *    (DG_AXIS_EP for expert weights). A partial is summed over exactly
 *    those ranks, so every gradient element counts once and replicas are
 *    not counted twice. Partials with the same group are added locally
 *    (optim_sum), all-gathered over the group and added in rank order (the
 *    same bits on every rank, whatever algorithm MPI picks), then the
 *    groups' totals are added in the order of their axis sets (as bits).
 *    {EDP, EP} is DG_AXIS_DP, since the grid (sched/dg_grid.h) makes the
 *    expert-data-parallel group times the EP group exactly the data-
 *    parallel group the runtime maps DG_AXIS_DP to (CP x EP x DP); a set of
 *    several axes (a tp-split weight in a reduce-scattered bucket: {TP,
 *    DP}) is gathered and summed over each axis in turn, lowest first.
 *    Groups of one rank need no collective. Under PP (group_size of
 *    DG_AXIS_PP > 1) the total is then all-gathered over the pipeline
 *    group and summed in stage order: the stages hold different weights.
 * 2. optim_clip: the norm, Megatron's clip coefficient and the ok flag
 *    (finite norm and `apply`), from the total and the hparams input.
 * 3. AdamW: one optim_adamw node per parameter, on the parameter itself
 *    (without the distributed optimizer: fp32 parameters are their own
 *    master weights) or on the bucket's fp32 master shard (with it), with
 *    the bucket's moments, which are optimizer-state leaves of the shard's
 *    size: exp_avg, exp_avg_sq. Weight decay follows Megatron's parameter
 *    groups: none for 1-D parameters and biases. The nodes of a bucket run
 *    in bucket order, chained by their done tokens.
 * 4. The parameters (distributed optimizer). With dg_dp_opts.param_gather
 *    the DP pass already gathers the master shards into the parameters at
 *    the start of the next step, under its forward: the master leaf is the
 *    DP pass's, and nothing more is added. Otherwise each bucket gets
 *    optim_commit (after its AdamW nodes) -> all_gather over the bucket's
 *    group -> optim_param_store per parameter, so the parameters are whole
 *    again when the step ends, as after Megatron's optimizer step.
 *
 * In-place updates (dg_op_optim.h) are checked here: every node that reads
 * an updated leaf, other than the updates themselves, must be an ancestor (data or ordering edges)
 * of the clip node, so it has run before any update starts.
 *
 * graph/ defines no compute op, so the six ops are handed in
 * (ops/dg_op_optim.h: dg_optim_ops_get()).
 */
#ifndef DG_PASS_OPTIM_H
#define DG_PASS_OPTIM_H

#include "dg_graph.h"
#include "dg_op.h"
#include "dg_pass_dp.h"

/* Layout of the hparams input and the status tensor (f64 each). */
enum { DG_OPTIM_LR = 0, DG_OPTIM_STEP = 1, DG_OPTIM_APPLY = 2, DG_OPTIM_NHPARAMS = 3 };
enum { DG_OPTIM_NORM = 0, DG_OPTIM_CLIP = 1, DG_OPTIM_OK = 2, DG_OPTIM_NSTATUS = 3 };

typedef struct dg_optim_ops {
    const dg_op_def *sumsq, *sum, *clip, *adamw, *commit, *param_store;
} dg_optim_ops;

typedef struct dg_optim_opts {
    const dg_dp_buckets *buckets;  /* dg_pass_dp()'s layout (borrowed) */
    int distributed;               /* --use-distributed-optimizer */
    int group_size[DG_AXIS_COUNT]; /* ranks of each axis's group as the runtime maps it (< 2: one) */
    double grad_scale;             /* 1 / data shards */
    double clip_grad;              /* --clip-grad; <= 0: no clipping */
    double beta1, beta2, eps, weight_decay;
    dg_optim_ops ops;
} dg_optim_opts;

/* A bucket's optimizer state (tensor ids). */
typedef struct dg_optim_bucket {
    int exp_avg, exp_avg_sq; /* OPTIMIZER leaves [shard] */
    int master;              /* OPTIMIZER leaf [shard] (distributed), else -1 */
    dg_axis shard_axis;      /* whose group rank picks the shard; NONE: the whole bucket */
} dg_optim_bucket;

typedef struct dg_optim {
    int hparams;    /* input f64 [DG_OPTIM_NHPARAMS], filled before each step */
    int group_rank; /* input i32 [DG_AXIS_COUNT]: this rank in each group, filled once */
    int status;     /* f64 [DG_OPTIM_NSTATUS], read after the step (keep it) */
    int n;
    dg_optim_bucket *b; /* per DP bucket, same order */
} dg_optim;

/* Run the pass on g. Fills *out (free with dg_optim_free). Returns DG_OK, or
 * DG_EINTERNAL with err naming what broke (a builder error, a bucket whose
 * norm group is not a group of the grid, a reader that would race with an
 * in-place update). */
int dg_pass_optim(dg_graph *g, const dg_optim_opts *o, dg_optim *out, dg_err *err);
void dg_optim_free(dg_optim *o);

/* Megatron's default parameter groups: is parameter p weight-decayed? */
int dg_optim_decays(const dg_tensor *p);

#endif /* DG_PASS_OPTIM_H */
