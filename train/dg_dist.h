/* dg_dist.h — the trainer's side of data parallelism and the optimizer:
 * the ops the DP pass is handed, and the host view of the optimizer state
 * the step graph updates.
 *
 * Gradients. The step graph holds every micro-batch of this rank's share
 * of the global batch (train/dg_trainer.c), so a parameter's gradient is
 * already summed over its micro-batches inside the graph; dg_pass_dp() adds
 * a pack and a collective per bucket (graph/passes/dg_pass_dp.h), which runs once
 * per step, like Megatron's reduction on the last micro-batch, overlapping
 * the end of backward.
 *
 * Optimizer. dg_pass_optim() (graph/passes/dg_pass_optim.h) then adds the
 * gradient norm, clipping, the NaN/inf skip, AdamW and the parameter
 * all-gather to the same graph, reading the reduced buckets where the
 * collectives left them, scaled by 1 / data shards on the fly (the step's
 * loss is the mean over the CP x EP x DP data shards, as Megatron divides
 * gradients by the data-parallel size). Its state is kept per bucket, over
 * the elements this rank owns: the whole bucket without the distributed
 * optimizer, block r of it with --use-distributed-optimizer (r = this rank
 * in the bucket's group; the reduce-scatter leaves exactly that block's
 * gradient here): exp_avg and exp_avg_sq, plus fp32 master weights under the
 * distributed optimizer (without it the fp32 parameters are their own
 * master weights): 8 or 12 bytes per owned element, so the distributed
 * optimizer holds about 1/DP of it per rank (dg_dist_state_bytes). These
 * are optimizer-state tensors of the graph; dg_dist points into the
 * runtime's buffers for checkpoints. The learning rate and step count are
 * an input of the graph (dg_dist_set_step), the norm and whether the step
 * updated come back in its status tensor (dg_dist_outcome).
 *
 * With --overlap-param-gather the next step's graph gathers the master
 * shards into the parameters under its forward pass (dg_pass_dp.h), and
 * dg_dist_sync_params() does it at once where the parameters are needed
 * outside a step. Padding elements of a bucket are never updated.
 *
 * Determinism. MPI_Iallreduce / MPI_Ireduce_scatter_block with the same
 * world, layout and message sizes pick the same algorithm and so add in the
 * same order every run (Open MPI's tuned collectives decide by communicator
 * size and message size only); scalar sums over ranks (losses here, the
 * gradient norm in the graph) are all-gathered and added in rank order. So
 * the same config and seed give bitwise identical losses run to run.
 * Results differ from a single-rank run only by the order of fp32
 * additions (~1e-7 relative).
 */
#ifndef DG_DIST_H
#define DG_DIST_H

#include "dg_comm.h"
#include "dg_graph.h"
#include "dg_op.h"
#include "dg_pass_dp.h"
#include "dg_pass_optim.h"

/* The pack op dg_pass_dp() needs: copies its inputs one after the other
 * into a flat f32 [attrs.i[0]], zero-filling the rest (dg_op_dp_pack,
 * ops/dg_op_dp_pack.h). */
const dg_op_def *dg_dist_pack_op(void);

/* The unpack op of the parameter gather (dg_pass_dp.h; dg_op_dp_unpack). */
const dg_op_def *dg_dist_unpack_op(void);

/* What one rank owns of one bucket. */
typedef struct dg_dist_bucket {
    dg_comm *comm;     /* the bucket's group (borrowed) */
    int64_t lo, hi;    /* owned element range within the bucket [lo, hi) */
    float *master;     /* [hi - lo] fp32 master weights (distributed), else NULL */
    float *m, *v;      /* [hi - lo] AdamW moments */
    float *gather;     /* [padded] all-gather buffer (distributed optimizer) */
} dg_dist_bucket;

typedef struct dg_dist {
    const dg_graph *g;           /* borrowed */
    const dg_dp_buckets *layout; /* borrowed: the DP pass's buckets */
    int n;
    dg_dist_bucket *b;           /* buffers: the runtime's, borrowed */
    int distributed;             /* --use-distributed-optimizer */
    double *hparams;             /* the graph's optimizer input (dg_pass_optim.h) */
    const double *status;        /* the graph's optimizer status */
} dg_dist;

/* Point at layout's buckets' state in the runtime (ptrs: dg_runtime_ptr of
 * every tensor), fill the graph's group-rank input from groups (the
 * runtime's comms, dg_grid_runtime_groups; NULL: a world of one), zero the
 * moments and copy the master weights from the parameters. */
void dg_dist_init(dg_dist *d, const dg_graph *g, const dg_dp_buckets *layout, const dg_optim *optim,
                  dg_comm *const groups[DG_AXIS_COUNT], void *const *ptrs);
void dg_dist_free(dg_dist *d);

/* Bytes of optimizer state this rank holds (master weights + moments). */
size_t dg_dist_state_bytes(const dg_dist *d);

/* The next step's learning rate and update count (bias correction), and
 * whether it may update at all (0 for evaluation steps). */
void dg_dist_set_step(dg_dist *d, double lr, int64_t step, int apply);

/* After a step: the global gradient norm and whether the optimizer updated
 * (0: the norm was not finite, or apply was 0). */
void dg_dist_outcome(const dg_dist *d, double *norm, int *updated);

/* Agree on an outcome that may differ between ranks (a save fails on the
 * writer alone, a file may be missing on one rank, one data shard holds a
 * bad token): every rank of c returns DG_OK if all ranks passed DG_OK, else
 * the status of the lowest failing rank, so all ranks stop together. On
 * failure err tells each rank whether to print, so that one line is printed
 * on every rank's behalf: the lowest failing rank keeps its own message, plain
 * when every rank failed with that same one, else as "rank R: <msg>", with
 * "(N other ranks failed too)" when other ranks failed with other messages;
 * every other rank's err->msg is emptied. Call it
 * once per failure. Collective over c: one all-reduce of a flag, plus an
 * all-gather of the messages when some rank failed (NULL or a group of one:
 * st and err are returned as they are). */
int dg_dist_agree(dg_comm *c, int st, dg_err *err);

/* Sum n doubles over the ranks of c, added in rank order (so every rank gets
 * the same bits); c may be NULL (a group of one). */
int dg_dist_sum(dg_comm *c, double *v, int n, dg_err *err);

/* Bring the parameters up to date now, for buckets whose gather is in the
 * step graph (--overlap-param-gather: otherwise the next step would): before
 * a checkpoint and at the end of training. Collective over the groups. */
int dg_dist_sync_params(dg_dist *d, void *const *ptrs, dg_err *err);

/* Bucket i's owned moments from whole-bucket arrays, and its master weights
 * from the parameters' buffers (after a checkpoint load). */
void dg_dist_set_state(dg_dist *d, int i, const float *m, const float *v, void *const *ptrs);

#endif /* DG_DIST_H */
