/* dg_pipeline.h — the step pipeline: from one logical micro-batch to the
 * step graph a rank runs, one stage after the other, with the verifier after
 * each (its message names the stage that broke the graph).
 *
 *   logical       the model builder's forward of one micro-batch: global
 *                 shapes, no parallel size, parameters annotated with their
 *                 placement and init (the caller builds it)
 *   ep            parallel passes: TP (graph/passes/dg_pass_tp.h) makes
 *                 weights placed over tp local shards and inserts the
 *                 collectives where layouts meet, then EP
 *                 (graph/passes/dg_pass_ep.h) makes expert weights local
 *                 slices and lowers each moe_experts node; CP
 *                 (graph/passes/dg_pass_cp.h) runs between them when
 *                 --context-parallel-size > 1; with --bf16 / --fp16 the
 *                 dtype pass (graph/passes/dg_pass_precision.h: 16-bit
 *                 working copies of the parameters);
 *                 last PP (graph/passes/dg_pass_pp.h) keeps this rank's
 *                 pipeline stage and puts send/recv pairs at its boundaries
 *   autodiff      backward of the micro-batch from its loss (scaled by
 *                 1 / micro-batches, so the step's gradient is the mean)
 *   recompute     activation recompute: the backward of the chosen regions
 *                 reads re-emitted forward nodes instead of saved activations
 *                 (graph/passes/dg_pass_recompute.h)
 *   microbatches  the micro-batch's forward and backward instantiated once
 *                 per micro-batch, sharing parameters by name; each
 *                 parameter's gradient is the sum mb0 + mb1 + ... in that
 *                 order (fixed, so results are deterministic)
 *   schedule      ordering edges: micro-batches first to last, each one's
 *                 forward and backward before the next starts
 *                 (graph/passes/dg_pass_mb_order.h), and under CP the
 *                 ring's send/recv kept in id order (dg_pass_cp_order);
 *                 under PP the pipeline schedule instead
 *                 (graph/passes/dg_pass_pp_sched.h)
 *   dp            data parallelism: bucketed gradient reduction, the
 *                 distributed optimizer's reduce-scatter and parameter
 *                 gathers (dg_pass_dp.h)
 *   optimizer     gradient norm, clipping, the NaN/inf skip, AdamW and the
 *                 parameter all-gather as nodes over the DP stage's buckets
 *                 (graph/passes/dg_pass_optim.h)
 *
 * Each stage is a graph -> graph function; `stop_after` ends the pipeline
 * after the named stage, which is what `dagatron dump --after STAGE` shows.
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
    DG_STAGE_EP,
    DG_STAGE_AUTODIFF,
    DG_STAGE_RECOMPUTE,
    DG_STAGE_MICROBATCHES,
    DG_STAGE_SCHEDULE,
    DG_STAGE_DP,
    DG_STAGE_OPTIMIZER,
    DG_STAGE_COUNT
} dg_stage;

/* "logical", "ep", "autodiff", ... */
const char *dg_stage_name(dg_stage s);
/* Name -> stage. DG_OK or DG_EINPUT listing the names (for --after). */
int dg_stage_parse(const char *name, dg_stage *out, dg_err *err);

typedef struct dg_pipeline_opts {
    int loss;                   /* the logical graph's loss (a scalar) */
    int n_microbatches;         /* >= 1 */
    int tp_size;                /* --tensor-model-parallel-size; 0 counts as 1 */
    dg_pass_ep_opts ep;
    const dg_autodiff_ops *autodiff;
    const dg_op_def *scale;     /* y = f[0] * x (the loss's 1 / micro-batches) */
    const dg_dp_opts *dp;       /* NULL: no DP stage */
    /* NULL (or no DP stage): no optimizer stage. Its `buckets` is ignored:
     * the optimizer runs over the DP stage's. */
    const dg_optim_opts *optim;
    dg_stage stop_after;        /* DG_STAGE_OPTIMIZER: run everything */
    const char *step_name;      /* the step graph's name */
    bool sequence_parallel;     /* --sequence-parallel (with tp_size > 1) */
    bool tp_comm_overlap;       /* --tp-comm-overlap (with sequence_parallel) */
    /* --bf16 / --fp16: the dtype pass after the parallel passes
     * (graph/passes/dg_pass_precision.h); NULL: fp32 */
    const dg_pass_precision_opts *precision;
    const dg_recompute_opts *recompute; /* NULL: nothing recomputed */
    dg_pass_cp_opts cp;         /* CP (graph/passes/dg_pass_cp.h), after TP; cp_size 0 or 1: none */
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
    dg_pp_bounds pp;       /* PP: this stage's boundaries (in the graph after ep) */
} dg_pipeline_result;

/* Run the pipeline on `logical` (not modified). Returns DG_OK, or an error
 * prefixed with the stage. */
int dg_pipeline_run(const dg_graph *logical, const dg_pipeline_opts *o, dg_pipeline_result *r,
                    dg_err *err);
void dg_pipeline_result_free(dg_pipeline_result *r);

/* Logical tensor t of micro-batch mb in r->g, or -1. */
int dg_pipeline_map(const dg_pipeline_result *r, int mb, int t);

#endif /* DG_PIPELINE_H */
