/* dg_dist.h — the trainer's distributed state: data-parallel gradient
 * buckets and the (optionally distributed) AdamW optimizer over them.
 *
 * Gradients. The step graph holds every micro-batch of this rank's share
 * of the global batch (train/dg_trainer.c), so a parameter's gradient is
 * already summed over its micro-batches inside the graph; dg_pass_dp() adds
 * a pack and a collective per bucket (graph/dg_pass_dp.h), which runs once
 * per step, like Megatron's reduction on the last micro-batch, overlapping
 * the end of backward. After the step, dg_dist_accumulate() adds every
 * bucket's reduced gradient (the collective's output: the whole bucket, or
 * this rank's shard of it; on a world of one, where the buckets are only a
 * layout, the parameters' gradients themselves) to an fp32 accumulator,
 * zeroed at the start of each iteration (dg_dist_zero).
 *
 * Averaging. The step's loss is the mean over its micro-batches; the global
 * loss is the mean over the data shards (CP x EP x DP ranks) too, so after
 * the reduction (a sum) the accumulator is scaled by 1 / data shards, as
 * Megatron divides gradients by the data-parallel size.
 *
 * Optimizer. The state is kept per bucket, over the elements this rank owns:
 * the whole bucket without the distributed optimizer, block r of it with
 * --use-distributed-optimizer (r = this rank in the bucket's group; the
 * reduce-scatter leaves exactly that block's gradient here). For those
 * elements it holds fp32 master weights (a copy of the parameters), exp_avg
 * and exp_avg_sq: 12 bytes per owned element, so the distributed optimizer
 * holds about 1/DP of it per rank (dg_dist_state_bytes). A step scales the
 * gradients by the clip coefficient, runs AdamW on the owned elements (with
 * each parameter's weight decay: none for 1-D parameters and biases), and
 * writes the updated master weights back into the parameters: directly,
 * or through an all-gather of the bucket over its group (distributed
 * optimizer), or, with --overlap-param-gather, not at all: the next step's
 * graph gathers them under its forward pass (dg_pass_dp.h), and
 * dg_dist_sync_params() does it at once where the parameters are needed
 * outside a step. Padding elements of a bucket are never updated.
 *
 * Determinism. MPI_Iallreduce / MPI_Ireduce_scatter_block with the same
 * world, layout and message sizes pick the same algorithm and so add in the
 * same order every run (Open MPI's tuned collectives decide by communicator
 * size and message size only); scalar sums over ranks (losses, gradient
 * norm) are all-gathered and added in rank order here. So the same config
 * and seed give bitwise identical losses run to run. Results differ from a
 * single-rank run only by the order of fp32 additions (~1e-7 relative).
 */
#ifndef DG_DIST_H
#define DG_DIST_H

#include "dg_comm.h"
#include "dg_graph.h"
#include "dg_op.h"
#include "dg_pass_dp.h"
#include "dg_team.h"

/* The pack op dg_pass_dp() needs: copies its inputs one after the other
 * into a flat f32 [attrs.i[0]], zero-filling the rest. */
const dg_op_def *dg_dist_pack_op(void);

/* The unpack op of the parameter gather (dg_pass_dp.h). */
const dg_op_def *dg_dist_unpack_op(void);

/* What one rank owns of one bucket. */
typedef struct dg_dist_bucket {
    dg_comm *comm;     /* the bucket's group (borrowed) */
    int64_t lo, hi;    /* owned element range within the bucket [lo, hi) */
    float *acc;        /* [hi - lo] accumulated reduced gradient */
    float *master;     /* [hi - lo] fp32 master weights (padding: 0) */
    float *m, *v;      /* [hi - lo] AdamW moments */
    float *gather;     /* [padded] all-gather buffer (distributed optimizer) */
    int own_master;    /* 0: master is the runtime's buffer of the bucket's
                        * master-shard tensor (--overlap-param-gather) */
} dg_dist_bucket;

typedef struct dg_dist {
    const dg_graph *g;           /* borrowed */
    const dg_dp_buckets *layout; /* borrowed: the pass's buckets */
    int n;
    dg_dist_bucket *b;
    int distributed;             /* --use-distributed-optimizer */
    dg_comm *norm_comm;          /* sums of squares of owned elements: dp_cp (distributed) */
    dg_comm *ep_comm;            /* expert sums without the distributed optimizer */
    dg_comm *data_comm;          /* the data shards: losses are averaged over it */
} dg_dist;

/* Set up the state for layout's buckets. groups[axis] are the runtime's
 * comms (dg_grid_runtime_groups; NULL: a group of one). params: pointer to
 * each tensor's buffer (dg_runtime_ptr), used to initialise master weights. */
void dg_dist_init(dg_dist *d, const dg_graph *g, const dg_dp_buckets *layout, int distributed,
                  dg_comm *const groups[DG_AXIS_COUNT], dg_comm *data_comm, void *const *ptrs);
void dg_dist_free(dg_dist *d);

/* Bytes of optimizer state this rank holds (master weights + moments). */
size_t dg_dist_state_bytes(const dg_dist *d);

/* Zero the accumulators (start of an iteration). */
void dg_dist_zero(dg_dist *d);

/* Add the reduced buckets of the step just run (ptrs: dg_runtime_ptr). */
void dg_dist_accumulate(dg_dist *d, const dg_team *team, void *const *ptrs);

/* Scale the accumulators by s: 1 / data shards (the step's loss is already
 * the mean over its micro-batches). */
void dg_dist_scale(dg_dist *d, const dg_team *team, float s);

/* Agree on an outcome that may differ between ranks (a save fails on the
 * writer alone, a file may be missing on one rank, one data shard holds a
 * bad token): every rank of c returns DG_OK if all ranks passed DG_OK, else
 * the status of the lowest failing rank, so all ranks stop together. On
 * failure err tells each rank whether to print: it keeps this rank's own
 * message, as "rank R: <msg>", if this rank failed and no lower rank failed
 * with the same message; the message stays plain when every rank failed with
 * the same one (then only rank 0 keeps it); otherwise err->msg is emptied
 * (another rank reports). So each distinct failure is printed once. Call it
 * once per failure. Collective over c: one all-reduce of a flag, plus an
 * all-gather of the messages when some rank failed (NULL or a group of one:
 * st and err are returned as they are). */
int dg_dist_agree(dg_comm *c, int st, dg_err *err);

/* Global L2 norm of the accumulated gradients (the same on every rank). */
int dg_dist_grad_norm(dg_dist *d, double *norm, dg_err *err);

/* One AdamW step at learning rate lr, step count `step`, gradients scaled by
 * clip first (1: none); updates the parameters' buffers (ptrs). */
typedef struct dg_dist_hparams {
    double lr, beta1, beta2, eps, weight_decay;
    int64_t step;
    double clip;
} dg_dist_hparams;
int dg_dist_step(dg_dist *d, const dg_team *team, const dg_dist_hparams *h, void *const *ptrs,
                 dg_err *err);

/* Sum n doubles over the ranks of c, added in rank order (so every rank gets
 * the same bits); c may be NULL (a group of one). */
int dg_dist_sum(dg_comm *c, double *v, int n, dg_err *err);

/* Bring the parameters up to date now, for buckets whose gather is in the
 * step graph (--overlap-param-gather: otherwise the next step would): before
 * a checkpoint and at the end of training. Collective over the groups. */
int dg_dist_sync_params(dg_dist *d, void *const *ptrs, dg_err *err);

/* Bucket i's moments as whole-bucket arrays m[padded], v[padded] (for a
 * checkpoint): copied, or all-gathered over the bucket's group with the
 * distributed optimizer (a collective: every rank of the group calls it). */
int dg_dist_gather_moments(dg_dist *d, int i, float *m, float *v, dg_err *err);

/* Bucket i's owned moments from whole-bucket arrays, and its master weights
 * from the parameters' buffers (after a checkpoint load). */
void dg_dist_set_state(dg_dist *d, int i, const float *m, const float *v, void *const *ptrs);

#endif /* DG_DIST_H */
