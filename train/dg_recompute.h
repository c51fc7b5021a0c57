/* dg_recompute.h — what a training run recomputes: Megatron's --recompute-*
 * flags, and the memory-budget planner (--recompute-memory-budget, beyond
 * Megatron). The recompute itself is a graph pass
 * (graph/passes/dg_pass_recompute.h); this file chooses its regions.
 *
 * Megatron's meanings (megatron/training/arguments.py, TransformerConfig):
 *   --recompute-activations        = --recompute-granularity selective
 *   --recompute-granularity full   whole layers; needs --recompute-method and
 *                                  --recompute-num-layers N (1..layers),
 *                                  counted within each pipeline stage (each
 *                                  virtual stage), as TransformerBlock does:
 *       uniform  the stage's layers in groups of N, each group recomputed
 *                as one region from its input (the group's checkpoint)
 *       block    the stage's first N layers, each recomputed from its
 *                input; the others keep their activations
 *   --recompute-granularity selective  the --recompute-modules of every layer
 *                                  (default core_attn); method and num-layers
 *                                  must not be given
 *   --recompute-modules  core_attn moe_act layernorm mlp moe shared_experts
 *                        (mla_up_proj: MLA's up projections and RoPE)
 *
 * --recompute-memory-budget MB (MiB, like the log line's memory): instead
 * of flags, the planner picks (layer, module) and whole-layer regions,
 * greedily by planned-peak bytes saved per recomputed FLOP, each candidate
 * measured on the memory planner's plan of the real step graph (per-tensor
 * lifetimes on the simulated schedule), until the planned activation peak
 * fits; then drops any region the fit does not need. A budget below what
 * full recompute of every layer reaches is bad input naming that peak.
 */
#ifndef DG_RECOMPUTE_H
#define DG_RECOMPUTE_H

#include <stdio.h>

#include "dg_pass_recompute.h"
#include "dg_train_config.h"

/* The flags agree with each other and the model (dg_train_config_finish
 * calls it). DG_OK or DG_EINPUT naming the flag. */
int dg_recompute_check(const dg_train_config *c, dg_err *err);

/* A choice of regions; opts points into the arrays. */
typedef struct dg_recompute_sel {
    dg_recompute_opts opts;
    int *full_group;   /* [layers] */
    unsigned *modules; /* [layers] */
} dg_recompute_sel;
void dg_recompute_sel_free(dg_recompute_sel *s);

/* The regions the flags name, without measuring them (dg_recompute_plan
 * measures both choices for its report, two extra step graphs): for the
 * simulator, which only needs the choice. Returns 1, or 0 (s empty) when
 * --recompute-memory-budget asks for a measured choice. */
int dg_recompute_select_flags(const dg_train_config *c, dg_recompute_sel *s);

/* What a choice costs on this rank's step graph. */
typedef struct dg_recompute_cost {
    size_t peak;  /* planned activation peak, bytes: the memory plan's arena for
                   * the micro-batches' forward and backward (the step pipeline
                   * up to its schedule stage: without the gradient buckets
                   * and the optimizer, which recompute does not change) */
    double flops; /* those nodes' FLOPs (dg_op_def.cost) */
} dg_recompute_cost;

typedef struct dg_recompute_report {
    int active;             /* something was asked for (flags or budget) */
    dg_recompute_cost none; /* without recompute */
    dg_recompute_cost with; /* with the chosen regions */
    int n_nodes;            /* recompute nodes per micro-batch */
    char what[512];         /* "full (uniform, 1 layer per group): layers 0-3", ... */
} dg_recompute_report;

/* How a choice is measured: the step builder's (train/dg_step_build.c),
 * which builds this rank's step with o's regions through the one step
 * pipeline and plans it with the run's own plan options (its cost model,
 * what the loop keeps), so a choice is measured on the plan that runs.
 * The planner knows neither the pipeline nor the scheduler. */
typedef struct dg_recompute_step {
    /* o's cost into *cost; *n_nodes (may be NULL) the recompute nodes per
     * micro-batch. DG_OK or the pipeline's / planner's error. */
    int (*measure)(void *ctx, const dg_recompute_opts *o, dg_recompute_cost *cost, int *n_nodes, dg_err *err);
    void *ctx;
} dg_recompute_step;

/* The regions for this run into *s (from the flags, or the budget
 * planner's), measured into *r. Without any recompute flag *s selects
 * nothing and nothing is measured. Returns DG_OK, or DG_EINPUT for a budget
 * nothing fits ("... the smallest feasible is X MB"). */
int dg_recompute_plan(const dg_train_config *c, const dg_recompute_step *step, dg_recompute_sel *s,
                      dg_recompute_report *r, dg_err *err);

/* The plan line: what is recomputed, extra FLOPs in %, the planned peak
 * before and after. */
void dg_recompute_report_print(const dg_recompute_report *r, FILE *f);

#endif /* DG_RECOMPUTE_H */
