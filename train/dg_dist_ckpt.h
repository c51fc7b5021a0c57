/* dg_dist_ckpt.h — the trainer's checkpoints (--save, --save-interval,
 * --load) on top of io/dg_checkpoint.h.
 *
 * A checkpoint holds every parameter (Megatron-Core names), AdamW's moments
 * ("optimizer.exp_avg.<name>", "optimizer.exp_avg_sq.<name>"), the counters
 * (iteration, consumed training and validation samples, optimizer steps,
 * skipped and NaN iterations), the model config (as the checkpoint's config
 * record, train/dg_model_record.h), the tokenizer and the data description,
 * so `dagatron generate` can rebuild the model from it.
 *
 * Data parallelism: parameters are replicated, so world rank 0 writes them.
 * With the distributed optimizer each rank holds a shard of the moments;
 * the save all-gathers every bucket's moments over its group first (a
 * collective: every rank calls dg_dist_ckpt_save), so the checkpoint holds
 * whole tensors and does not depend on the DP size: a run may resume with
 * another DP size or with(out) the distributed optimizer. Every rank reads
 * the checkpoint on load and keeps its own shard. The files must therefore
 * be visible to every rank (one machine, or a shared file system).
 *
 * Resuming is exact: parameters, moments and counters come back bit for bit,
 * fp32 master weights are copies of the parameters, the data position is
 * the consumed-sample count and the learning rate follows the optimizer-step
 * count, so a resumed run prints the losses of an uninterrupted one.
 * Expert parallelism: a parameter's slice split over EP (expert weights:
 * [G, ...], split[0] = DG_AXIS_EP) is gathered over the EP group into the
 * global tensor under its global name, each rank's slice in the place
 * dg_shard_copy (graph/dg_layout.h) gives it, and each rank takes its slice
 * back on load,
 * so checkpoints hold the global model whatever the EP size (resharding
 * across EP sizes works for the parameters and moments alike).
 */
#ifndef DG_DIST_CKPT_H
#define DG_DIST_CKPT_H

#include "dg_checkpoint.h"
#include "dg_dist.h"
#include "dg_train_config.h"

/* Where a run is. */
typedef struct dg_train_counters {
    int64_t iteration, consumed, consumed_valid, updates, skipped, nans;
} dg_train_counters;

/* What the checkpoint says about the run besides tensors. */
typedef struct dg_ckpt_run {
    const dg_train_config *c;
    int64_t vocab;      /* the tokenizer's vocabulary before padding */
    int writer;         /* this rank writes (world rank 0) */
    dg_comm *world;     /* all ranks, to agree on the outcome (NULL: one rank) */
    dg_comm *ep;        /* the EP group: expert tensors are gathered over it (NULL: none) */
    /* The writer's save calls this at each stage (dg_ckpt_save_opts.at):
     * a seam for tests, NULL otherwise. */
    void (*at)(void *ctx, dg_ckpt_stage stage, int index);
    void *at_ctx;
    dg_comm *tp;        /* the TP group: tensors split over tp are gathered over it (NULL: none) */
} dg_ckpt_run;

/* Save iteration k->iteration of the run into c->save (collective; every
 * rank returns the writer's outcome). ptrs: each tensor's buffer. */
int dg_dist_ckpt_save(const dg_ckpt_run *r, const dg_dist *d, const int *params, int n_params,
                      void *const *ptrs, const dg_train_counters *k, dg_err *err);

/* Load the latest checkpoint of c->load into the parameters, the optimizer
 * state and *k. A --load without a checkpoint is an error here: whether a
 * run may start from scratch instead is decided before, by
 * dg_ckpt_plan_load (io/dg_ckpt_paths.h). Not collective; ranks may fail
 * alone (the caller agrees on the outcome, dg_dist_agree). */
int dg_dist_ckpt_load(const dg_ckpt_run *r, dg_dist *d, const int *params, int n_params,
                      void *const *ptrs, dg_train_counters *k, dg_err *err);

/* Bytes one checkpoint of this run takes on disk (every parameter and both
 * AdamW moments, expert tensors at their global size, plus the manifest),
 * rounded up: what --save must have free before the run starts. */
uint64_t dg_dist_ckpt_bytes(const dg_ckpt_run *r, const dg_dist *d, const int *params, int n_params);

#endif /* DG_DIST_CKPT_H */
