/* dg_pipeline.h — the step pipeline: from one logical micro-batch to the
 * step graph a rank runs, one stage after the other, with the verifier after
 * each stage that runs (its message names the stage that broke the graph).
 * The stages are a table in dg_pipeline.c (name, when it runs, the pass,
 * and whether it re-emits the graph or edits it in place); in order:
 *
 *   logical       the model builder's forward of one micro-batch: global
 *                 shapes, no parallel size, parameters annotated with their
 *                 placement and init (the caller builds it)
 *   tp            tensor parallelism, and its sequence-parallel form (--after
 *                 sp names this stage: SP decides where TP's collectives go,
 *                 so it is one pass): weights placed over tp become local
 *                 shards, collectives go where layouts meet, the ops with a
 *                 trait TP handles are rewritten by its table
 *                 (parallel/tp/dg_pass_tp.h); graph -> graph, when tp > 1
 *   cp            context parallelism: inputs read per token become this
 *                 rank's two chunks, the ops that see positions or the whole
 *                 sequence are rewritten by CP's table
 *                 (parallel/cp/dg_pass_cp.h); graph -> graph, when cp > 1
 *   ep            expert parallelism: expert weights become local slices and
 *                 each moe_experts node is rewritten into dispatch, grouped
 *                 GEMMs and combine (parallel/ep/dg_pass_ep.h); graph ->
 *                 graph, always (at one rank: the single-rank block)
 *   dtype         --bf16 / --fp16: 16-bit working copies of the parameters
 *                 (graph/passes/dg_pass_precision.h); graph -> graph
 *   pp            pipeline parallelism: this rank's stage, with send/recv
 *                 pairs at its boundaries (graph/passes/dg_pass_pp.h);
 *                 graph -> graph, when pp > 1
 *   autodiff      backward of the micro-batch from its loss (scaled by
 *                 1 / micro-batches, so the step's gradient is the mean); in
 *                 place
 *   recompute     activation recompute: the backward of the chosen regions
 *                 reads re-emitted forward nodes instead of saved activations
 *                 (graph/passes/dg_pass_recompute.h); graph -> graph
 *   microbatches  the micro-batch's forward and backward instantiated once
 *                 per micro-batch, sharing parameters (and the step's
 *                 weights) by name; each parameter's gradient is the sum
 *                 mb0 + mb1 + ... in that order (fixed, so results are
 *                 deterministic); graph -> graph
 *   schedule      ordering edges: micro-batches first to last, each one's
 *                 forward and backward before the next starts
 *                 (graph/passes/dg_pass_mb_order.h), and under CP the
 *                 ring's send/recv kept in id order (dg_pass_cp_order);
 *                 under PP the pipeline schedule instead
 *                 (graph/passes/dg_pass_pp_sched.h); in place
 *   dp            data parallelism: bucketed gradient reduction, the
 *                 distributed optimizer's reduce-scatter and parameter
 *                 gathers (graph/passes/dg_pass_dp.h); in place
 *   optimizer     gradient norm, clipping, the NaN/inf skip, AdamW and the
 *                 parameter all-gather as nodes over the DP stage's buckets
 *                 (graph/passes/dg_pass_optim.h); in place
 *
 * `stop_after` ends the pipeline after the named stage, which is what
 * `dagatron dump --after STAGE` shows (a stage that does not run for the
 * options leaves the graph as it was).
 */
#ifndef DG_PIPELINE_H
#define DG_PIPELINE_H

#include "dg_autodiff.h"
#include "dg_pass_cp.h"
#include "dg_pass_dp.h"
#include "dg_pass_ep.h"
#include "dg_pass_optim.h"
#include "dg_pass_precision.h"
#include "dg_pass_recompute.h"
#include "dg_pass_pp.h"
#include "dg_pass_tp.h"

typedef enum dg_stage {
    DG_STAGE_LOGICAL = 0,
    DG_STAGE_TP,
    DG_STAGE_CP,
    DG_STAGE_EP,
    DG_STAGE_DTYPE,
    DG_STAGE_PP,
    DG_STAGE_AUTODIFF,
    DG_STAGE_RECOMPUTE,
    DG_STAGE_MICROBATCHES,
    DG_STAGE_SCHEDULE,
    DG_STAGE_DP,
    DG_STAGE_OPTIMIZER,
    DG_STAGE_COUNT
} dg_stage;

/* The last stage of one micro-batch's forward as a rank runs it. */
#define DG_STAGE_FORWARD DG_STAGE_PP

/* "logical", "tp", "cp", ... */
const char *dg_stage_name(dg_stage s);
/* Name (or "sp", the tp stage) -> stage. DG_OK or DG_EINPUT listing the
 * names (for --after). */
int dg_stage_parse(const char *name, dg_stage *out, dg_err *err);
/* Whether stage s edits the graph in place (else it re-emits it). */
bool dg_stage_in_place(dg_stage s);

typedef struct dg_pipeline_opts {
    int loss;                   /* the logical graph's loss (a scalar) */
    int n_microbatches;         /* >= 1 */
    dg_pass_tp_opts tp;         /* TP and SP (parallel/tp/dg_pass_tp.h) */
    dg_pass_ep_opts ep;
    const dg_autodiff_ops *autodiff;
    const dg_op_def *scale;     /* y = f[0] * x (the loss's 1 / micro-batches) */
    const dg_dp_opts *dp;       /* NULL: no DP stage */
    /* NULL (or no DP stage): no optimizer stage. Its `buckets` is ignored:
     * the optimizer runs over the DP stage's. */
    const dg_optim_opts *optim;
    dg_stage stop_after;        /* DG_STAGE_OPTIMIZER: run everything */
    const char *step_name;      /* the step graph's name */
    /* --bf16 / --fp16: the dtype pass after the parallel passes
     * (graph/passes/dg_pass_precision.h); NULL: fp32 */
    const dg_pass_precision_opts *precision;
    const dg_recompute_opts *recompute; /* NULL: nothing recomputed */
    dg_pass_cp_opts cp;         /* CP (parallel/cp/dg_pass_cp.h), after TP; cp_size 0 or 1: none */
    dg_pp_opts pp;              /* pipeline parallelism (size <= 1: none; dg_pass_pp.h) */
    bool mb_overlap;            /* --overlap-moe-expert-parallel-comm: two micro-batches in flight
                                 * (dg_pass_mb_order_overlap; without PP) */
} dg_pipeline_opts;

typedef struct dg_pipeline_result {
    dg_graph *g;         /* the graph after the last stage run (owned) */
    dg_stage stage;      /* that stage */
    int n_logical;       /* tensors of the logical graph */
    int n_microbatches;  /* rows of tmap */
    int *tmap;           /* [n_microbatches][n_logical]: where logical tensor t
                          * of micro-batch mb is in g (-1: gone); before the
                          * microbatches stage one row */
    dg_dp_buckets buckets; /* the DP stage's buckets */
    dg_optim optim;        /* the optimizer stage's tensors (when it ran) */
    dg_recompute_stats recompute; /* the recompute stage's, per micro-batch */
    dg_pp_bounds pp;       /* PP: this stage's boundaries (in the graph after pp) */
} dg_pipeline_result;

/* Run the pipeline on `logical` (not modified). Returns DG_OK, or an error
 * prefixed with the stage. */
int dg_pipeline_run(const dg_graph *logical, const dg_pipeline_opts *o, dg_pipeline_result *r,
                    dg_err *err);
void dg_pipeline_result_free(dg_pipeline_result *r);

/* Logical tensor t of micro-batch mb in r->g, or -1. */
int dg_pipeline_map(const dg_pipeline_result *r, int mb, int t);

#endif /* DG_PIPELINE_H */
