/* dg_trainer.h — the training loop of `dagatron train`.
 *
 * One iteration: for each of the global batch's micro-batches, fill the
 * step graph's inputs, run forward + backward on the scheduler, add the
 * parameters' gradients into fp32 accumulators; then average over
 * micro-batches, skip the update if the loss or gradients are not finite
 * (counted as a NaN iteration), clip by the global L2 norm, and apply AdamW
 * with the scheduled learning rate. Every --log-interval iterations it
 * prints Megatron's log line.
 *
 * Determinism: the graph, the seeded initialisation and the data order are
 * fixed, reductions run in a fixed order, so two runs print identical losses.
 */
#ifndef DG_TRAINER_H
#define DG_TRAINER_H

#include <mpi.h>

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
 * checkpoint) or DG_EINTERNAL with err set. */
int dg_train_on(dg_train_config *c, MPI_Comm comm, const dg_train_hooks *hooks,
                const dg_train_final *final, dg_train_result *res, dg_err *err);

/* dg_train_on over MPI_COMM_WORLD when MPI is initialised, else alone. */
int dg_train(dg_train_config *c, const dg_train_hooks *hooks, dg_train_result *res, dg_err *err);

#endif /* DG_TRAINER_H */
