/* dg_step_build.h — one rank's step graph and its plan: what `dagatron
 * train` runs, what `dagatron simulate` costs and what `dagatron dump
 * --graph step` writes, built by one function so that the three cannot
 * differ.
 *
 *   dg_train_config c;
 *   dg_grid_sizes sz;
 *   dg_step_config(&flags, world, &c, &sz, &err);  // train/dg_step_opts.h
 *   dg_step_rank at;
 *   dg_step_rank_of(&sz, pp_stage, &at);           // or dg_step_rank_of_grid: a run's comms
 *   dg_step_built b;
 *   int st = dg_step_build(&c, &at, NULL, &b, &err);
 *   if (st == DG_OK) st = dg_step_plan(&b, 1, &err);
 *   ... b.step.g, b.io[mb], b.plan ...
 *   dg_step_built_free(&b);
 *
 * dg_step_build, in order:
 *   1. the model builder's logical micro-batch (moe/dg_model.h);
 *   2. the rank's step-pipeline options (dg_step_opts_init);
 *   3. the regions activation recompute covers (train/dg_recompute.h): the
 *      flags' as they are, or under --recompute-memory-budget the planner's
 *      choice, each candidate measured by this builder (the same pipeline,
 *      planned with the same plan options: plan_of);
 *   4. the step pipeline (parallel/dg_pipeline.h: parallel passes, autodiff,
 *      recompute, micro-batches, the schedule, DP, the optimizer), or its
 *      stages up to one (dump --after);
 *   5. each micro-batch's io (tokens, losses, counts) mapped into the step.
 * dg_step_plan then plans it (sched/dg_sched.h: priorities, streams,
 * memory) with what the loop reads after a step kept out of reuse.
 *
 * The cost model. How long the plan thinks a collective lasts decides its
 * priorities and when a buffer may be reused. The step has one model,
 * chosen in dg_step_build and used by the recompute planner's measuring
 * plans and by dg_step_plan alike: the scheduler's defaults (dg_prio.h),
 * with each axis whose comms wait behind an emulated link given that
 * link's figures (dg_link_cost_model). The links are those the comms wait
 * for: the trainer's are --emulate-link's (the grid's comms are wrapped
 * with them); the simulator passes the spec its engine times collectives
 * with (dg_step_build_opts.links), so its plan cannot know other links than
 * its timeline. A device profile's own links (simulate --device-profile)
 * are not the plan's: a real run on that machine plans with the defaults.
 */
#ifndef DG_STEP_BUILD_H
#define DG_STEP_BUILD_H

#include "dg_comm_emulate.h"
#include "dg_grid.h"
#include "dg_model.h"
#include "dg_pipeline.h"
#include "dg_recompute.h"
#include "dg_sched.h"
#include "dg_train_config.h"

/* Where a rank sits, as much as its step graph depends on: ranks that
 * differ only in their tp, cp, ep or dp coordinate run the same graph
 * (their coordinates are runtime inputs). */
typedef struct dg_step_rank {
    int group[DG_AXIS_COUNT]; /* each axis's group size, as the runtime's comms have them
                               * (dg_grid_runtime_groups: dp is the dense-gradient group
                               * cp x ep x dp); 1: alone */
    int grad_shards;          /* the data shards gradients are averaged over (ep x dp) */
    int pp_stage;             /* its pipeline stage */
} dg_step_rank;

/* A rank on pipeline stage pp_stage of a grid of checked sizes
 * (dg_step_config): the group sizes the runtime's comms will have. */
void dg_step_rank_of(const dg_grid_sizes *sz, int pp_stage, dg_step_rank *at);

/* This rank of a run, from its grid's comms; g NULL: a run of one rank
 * without MPI (every group alone). */
void dg_step_rank_of_grid(const dg_grid *g, dg_step_rank *at);

/* What differs between the callers. Zero (or a NULL pointer to it): the
 * whole step as `dagatron train` runs it, the config's links. */
typedef struct dg_step_build_opts {
    /* the links the step's comms wait for, per axis (axes with gbps 0 are
     * not emulated); NULL: --emulate-link's (simulate passes its engine's) */
    const dg_link_spec *links;
    /* non-NULL: the recompute choice is also measured against no recompute
     * for the report line (train); NULL: only a budget is measured */
    dg_recompute_report *recompute_report;
    /* A graph short of the whole step (dump): */
    int partial;            /* 1: the fields below apply */
    dg_stage stop_after;    /* the last pipeline stage to run */
    int n_microbatches;     /* micro-batches in the graph (0: the config's) */
    const char *name;       /* the graphs' name (NULL: "logical", then "train_step") */
} dg_step_build_opts;

typedef struct dg_step_built {
    dg_graph *logical;      /* the model builder's micro-batch (the parameters' init
                             * streams and the checkpoint's size are read from it) */
    dg_model_io lio;        /* its io, in logical tensor ids */
    dg_pipeline_result step;/* step.g: the rank's graph; its DP buckets, optimizer
                             * tensors and PP bounds */
    int n_mb;               /* micro-batches in step.g (rows of io) */
    dg_model_io *io;        /* [n_mb]: lio in step.g (-1: not on this rank, e.g. PP) */
    dg_cost_model cost;     /* the step's cost model (above), when has_cost */
    int has_cost;           /* 0: the scheduler's defaults */
    dg_sched_plan *plan;    /* dg_step_plan's, else NULL */
} dg_step_built;

/* Build rank `at`'s step for the checked config c (dg_step_config) into
 * *out. o may be NULL. On failure *out holds nothing (nothing to free);
 * DG_EINPUT for a recompute budget nothing fits, else the pipeline's
 * error, prefixed with its stage. */
int dg_step_build(const dg_train_config *c, const dg_step_rank *at, const dg_step_build_opts *o,
                  dg_step_built *out, dg_err *err);

/* Plan b's step into b->plan with the step's cost model, keeping every
 * micro-batch's losses and routers' counts and the optimizer's status (the
 * loop reads them after a step) out of memory reuse. memory_plan 0: every
 * tensor gets its own buffer (the simulator's largest stages, whose
 * placement would take too long). DG_EINTERNAL when the planner refuses the
 * graph (it passed the verifier: a bug). */
int dg_step_plan(dg_step_built *b, int memory_plan, dg_err *err);

/* Free what b still holds (a caller may take parts first and NULL them). */
void dg_step_built_free(dg_step_built *b);

#endif
