/* dg_trainer.h — the training loop of `dagatron train`.
 *
 * Every rank of the rank grid (sched/dg_grid.h) runs this loop; it drives
 * data and expert parallelism so far (TP, CP and PP sizes > 1 are refused
 * with one line).
 *
 * The step graph (every micro-batch of the step): forward, autodiff, then the DP pass
 * (graph/passes/dg_pass_dp.h) groups the gradients into buckets, each packed and
 * all-reduced (or, with --use-distributed-optimizer, reduce-scattered) on
 * the comm stream, overlapping the rest of backward with
 * --overlap-grad-reduce; with --overlap-param-gather the graph also gathers
 * the updated parameters under the next forward. On a world of one the
 * buckets are only a layout and the graph has no collective.
 *
 * One iteration is one run of the step graph, which holds every
 * micro-batch of this rank's share of the global batch (global batch =
 * micro batch x data-parallel size x micro-batches; rank r reads
 * dg_feed_microbatch(..., data_rank, data_size)) and their mean loss, so
 * gradients add up over micro-batches inside the graph and each bucket is
 * reduced once; then the gradients and the losses are averaged over data
 * shards, the update is skipped if the loss or the gradient norm is not
 * finite (a NaN iteration), gradients are clipped by the global L2 norm and
 * AdamW runs on the optimizer state this rank owns
 * (all of it, or its shard with the distributed optimizer, whose updated
 * parameters are then all-gathered). World rank 0 prints Megatron's log line
 * every --log-interval iterations, with losses averaged over the data shards.
 *
 * Checkpoints (--save, --save-interval, --load; train/dg_dist_ckpt.h):
 * parameters, AdamW moments, counters and the model config; a resumed run
 * continues bit for bit.
 *
 * Failures: a rank that fails alone (a bad token in its data shard, a trace
 * or checkpoint it cannot write) tells the others at the next step boundary
 * (dg_dist_agree), so every rank stops together and the reason is printed
 * once; a run whose memory plan cannot fit is refused before it allocates
 * (dg_mem_estimate.h).
 *
 * Determinism: the graph, the seeded initialisation and the data order are
 * fixed and reductions run in a fixed order (dg_dist.h), so two runs of the
 * same config on the same world print identical losses; runs on different
 * DP sizes agree to fp32 rounding (~1e-7 relative).
 */
#ifndef DG_TRAINER_H
#define DG_TRAINER_H

#include <mpi.h>

#include "dg_checkpoint.h"
#include "dg_train_config.h"

/* What a run ended with (for tests and the CLI's summary). */
typedef struct dg_train_result {
    int iterations;       /* iterations run by this call */
    double first_lm_loss; /* lm loss of the first iteration run */
    double last_lm_loss;  /* lm loss of the last iteration run */
    int skipped, nan_iters;
    size_t opt_state_bytes; /* optimizer state on this rank (master weights + moments) */
    int n_buckets;          /* gradient buckets of the DP pass */
    int data_size;          /* data shards (Megatron's data-parallel size) */
    /* Sums over every training micro-batch's step (dg_sched_stats), for the
     * hidden-communication fraction h = (compute + comm - step) / comm. */
    int steps;
    double step_time, compute_busy, comm_busy, exposed_comm;
    /* On failure, with more than one rank: 1 when this rank failed where the
     * others may be waiting in a collective it will not join (a failure
     * inside a step). The caller must end the job (MPI_Abort). Failures the
     * ranks agreed on (bad data on one shard, an unwritable trace or
     * checkpoint, bad input) leave it 0: every rank returns the same status,
     * and err->msg is empty on ranks that should not print (dg_dist_agree). */
    int stranded;
    size_t activation_planned_bytes; /* this rank's planned activation arena peak (dg_memplan) */
    /* Why an unset --device ran on the cpu ("" when it did not fall back):
     * dg_train resolves c->device (train/dg_device_pick.h); the CLI prints
     * this after the run. */
    char device_note[256];
} dg_train_result;

/* Optional observers, for tests and tools that want to see inside a run
 * (the PyTorch oracle reads the initial weights and every batch). Any
 * callback may be NULL. */
typedef struct dg_train_hooks {
    void *ctx;
    /* After initialisation: each parameter's name, shape and fp32 values. */
    void (*on_param)(void *ctx, const dg_tensor *t, const float *values);
    /* Each training micro-batch's samples: tokens [mbs][seq_length + 1]. */
    void (*on_batch)(void *ctx, int iteration, int microbatch, const int32_t *tokens, int mbs,
                     int seq_length);
    /* After each iteration: its losses (averaged over micro-batches), the
     * gradient norm before clipping, and the learning rate used. */
    void (*on_iteration)(void *ctx, int iteration, double lm_loss, double aux_loss, double z_loss,
                         double grad_norm, double lr);
    /* While the writer saves the checkpoint of `iteration`: each stage of
     * the save (dg_ckpt_save_opts.at), where a test may stop or kill it. */
    void (*on_save_stage)(void *ctx, int iteration, dg_ckpt_stage stage, int index);
} dg_train_hooks;

/* At the end of a run: each parameter's final values (tests comparing runs). */
typedef struct dg_train_final {
    void *ctx;
    void (*on_param)(void *ctx, const dg_tensor *t, const float *values);
} dg_train_final;

/* Train as configured over the ranks of `comm` (the rank grid, dg_grid.h,
 * is built over it; MPI_COMM_NULL: one rank without MPI). Every rank of comm
 * calls it; world rank 0 prints the log. hooks and final may be NULL. Returns DG_OK,
 * DG_EINPUT (bad flags, a world size the parallel sizes do not divide, a bad
 * checkpoint, a token outside the vocabulary, a plan larger than this rank's
 * memory) or DG_EINTERNAL. On failure every rank returns the same status
 * (unless res->stranded) and err->msg is what this rank should print: empty
 * when another rank reports the failure (dg_dist_agree). */
int dg_train_on(dg_train_config *c, MPI_Comm comm, const dg_train_hooks *hooks,
                const dg_train_final *final, dg_train_result *res, dg_err *err);

/* dg_train_on over MPI_COMM_WORLD when MPI is initialised, else alone. */
int dg_train(dg_train_config *c, const dg_train_hooks *hooks, dg_train_result *res, dg_err *err);

#endif /* DG_TRAINER_H */
