/* dg_dist_ckpt.h — the trainer's checkpoints (--save, --save-interval,
 * --load) on top of io/dg_checkpoint.h.
 *
 * A checkpoint holds every parameter (Megatron-Core names), AdamW's moments
 * ("optimizer.exp_avg.<name>", "optimizer.exp_avg_sq.<name>"), the run's
 * other state (dg_ckpt_run.state: the routers' expert biases), the counters
 * (iteration, consumed training and validation samples, optimizer steps,
 * skipped and NaN iterations), the model config (as the checkpoint's config
 * record, train/dg_model_record.h), the tokenizer and the data description,
 * so `dagatron generate` can rebuild the model from it.
 *
 * Every rank writes (io/dg_ckpt_shards.h): what a rank holds is described
 * as boxes of the global tensors (train/dg_ckpt_pieces.h): its slice of
 * each parameter under TP (strided fused weights included) and EP, and the
 * AdamW moments of the elements it owns (all of its parameters' elements,
 * or its distributed-optimizer shard of each bucket). Replicas (DP copies, a
 * norm's weight on every TP rank) are written once, by the least-loaded
 * holder; one metadata.json lists every box. No tensor is gathered.
 *
 * Loading asks for this rank's boxes under its own layout and reads the
 * stored boxes that overlap them, so a checkpoint saved under any TP, EP,
 * PP, DP or distributed-optimizer layout loads under any other (a tensor's
 * boxes are keyed by global offsets, so CP needs nothing more; a pipeline
 * stage holds and writes only its layers' tensors, and the tied word
 * embedding, held by the first and the last stage, is written by the
 * first: r->skip). The
 * files must be visible to every rank (one machine, or a shared file
 * system).
 *
 * Resuming is exact: parameters, moments and counters come back bit for bit,
 * fp32 master weights are copies of the parameters, the data position is
 * the consumed-sample count and the learning rate follows the optimizer-step
 * count, so a resumed run prints the losses of an uninterrupted one.
 *
 * Flags: --no-load-optim loads parameters only (moments start at zero),
 * --finetune also restarts the counters at iteration 0; --no-load-rng has
 * nothing to skip (dagatron's random streams are functions of --seed and the
 * iteration, not state); --async-save (r->async) snapshots this rank's boxes
 * to host memory and writes them on a background thread
 * (train/dg_ckpt_async.h).
 */
#ifndef DG_DIST_CKPT_H
#define DG_DIST_CKPT_H

#include "dg_checkpoint.h"
#include "dg_ckpt_pieces.h"
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
    int writer;         /* this rank prints (world rank 0); every rank writes its boxes */
    dg_comm *world;     /* all ranks, to agree on the outcome (NULL: one rank) */
    dg_comm *ep;        /* the EP group: places expert slices (NULL: none) */
    /* The writer's save calls this at each stage (dg_ckpt_save_opts.at):
     * a seam for tests, NULL otherwise. */
    void (*at)(void *ctx, dg_ckpt_stage stage, int index);
    void *at_ctx;
    dg_comm *tp;        /* the TP group: places TP slices (NULL: none) */
    struct dg_ckpt_async *async; /* --async-save: the background writer (NULL: saves are synchronous) */
    /* Per tensor: 1 for a parameter another pipeline stage holds too and
     * writes (the tied embedding's later copy, dg_train_pp_ckpt_skip):
     * saves leave it and its moments out, loads read it. NULL: none. */
    const char *skip;
    int32_t eod;        /* the tokenizer's end of document (-1: none), recorded with vocab */
    /* The run's state that is neither a parameter nor a moment (the routers'
     * expert biases), as pieces of this rank's memory: saves write them,
     * loads read into them. NULL: none. */
    int (*state)(void *ctx, dg_ckpt_pieces *out, dg_err *err);
    void *state_ctx;
} dg_ckpt_run;

/* Save iteration k->iteration of the run into c->save (collective; every
 * rank returns the writer's outcome). ptrs: each tensor's buffer. */
int dg_dist_ckpt_save(const dg_ckpt_run *r, const dg_dist *d, const int *params, int n_params,
                      void *const *ptrs, const dg_train_counters *k, dg_err *err);

/* Wait for an asynchronous save in flight (none: returns at once) and agree
 * on its outcome (collective). Before the next save (dg_dist_ckpt_save
 * does it) and at the end of training. */
int dg_dist_ckpt_wait(const dg_ckpt_run *r, dg_err *err);

/* Load the latest checkpoint of c->load into the parameters, the optimizer
 * state and *k. A --load without a checkpoint is an error here: whether a
 * run may start from scratch instead is decided before, by
 * dg_ckpt_plan_load (io/dg_ckpt_paths.h). Not collective; ranks may fail
 * alone (the caller agrees on the outcome, dg_dist_agree). */
int dg_dist_ckpt_load(const dg_ckpt_run *r, dg_dist *d, const int *params, int n_params,
                      void *const *ptrs, dg_train_counters *k, dg_err *err);

/* Bytes one checkpoint of this run takes on disk (every parameter of
 * `model`, the one-rank model graph, and both AdamW moments, plus the
 * manifest), rounded up: what --save must have free before the run starts.
 * From the whole model, as no rank holds all of it under PP, TP or EP. */
uint64_t dg_dist_ckpt_bytes(const dg_graph *model);

#endif /* DG_DIST_CKPT_H */
