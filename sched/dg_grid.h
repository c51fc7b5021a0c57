/* dg_grid.h — the rank grid: which rank holds which part of the model, and
 * the comm group of every parallel axis.
 *
 * Layout (Megatron-Core's order "tp-cp-ep-dp-pp", tp fastest):
 *
 *   world = TP x CP x EP x DP x PP
 *   rank  = tp + TP * (cp + CP * (ep + EP * (dp + DP * pp)))
 *
 * TP, CP, EP and PP come from --tensor-model-parallel-size,
 * --context-parallel-size, --expert-model-parallel-size and
 * --pipeline-model-parallel-size; DP is derived as world / (TP CP EP PP).
 * A world size that does not divide is bad input (dg_grid_sizes).
 *
 * Who holds what (this is the bookkeeping Megatron itself has had bugs in):
 *  - Dense parameters (attention, norms, router, embeddings) are split over
 *    TP and PP only. Every rank with the same (tp, pp) coordinates holds a
 *    replica, whatever its cp, ep and dp coordinates.
 *  - Expert parameters are split over EP as well (and TP, PP). Ranks with the
 *    same (tp, ep, pp) hold the same experts.
 *  - Data: EP ranks read different samples, as in Megatron, where EP is
 *    carved out of data parallelism. So the number of data shards, Megatron's
 *    "data-parallel size", is EP x DP, and this rank's shard is
 *    data_rank = ep + EP * dp. CP ranks read the same samples and split the
 *    sequence.
 *
 * Hence the groups (each a dg_comm made with MPI_Comm_split, ranks ordered by
 * world rank):
 *
 *   axis          varies            size        used for
 *   DG_AXIS_TP    tp                TP          tensor-parallel collectives
 *   DG_AXIS_CP    cp                CP          ring attention
 *   DG_AXIS_EP    ep                EP          token dispatch (all-to-all)
 *   DG_AXIS_DP    ep, dp            EP DP       Megatron's data-parallel group:
 *                                               the ranks that split a batch
 *   DG_AXIS_PP    pp                PP          stage-to-stage send/recv
 *   DG_AXIS_EDP   cp, dp            CP DP       expert-data-parallel: the ranks
 *                                               holding the same experts; expert
 *                                               gradients reduce here
 *   dp_cp         cp, ep, dp        CP EP DP    dense gradients reduce here
 *                                               (Megatron's DP group "with CP")
 *
 * A step graph's collectives name an axis (node->group) and the runtime maps
 * axes to comms (dg_runtime_opts.groups). dg_grid_runtime_groups() gives the
 * mapping a training step uses: every axis to its group above, except that
 * DG_AXIS_DP maps to dp_cp, because the only DP collectives in a step are the
 * gradient reductions of dense parameters, which must span CP too. (With
 * CP = 1 the two groups are the same ranks.)
 *
 * Gradient scaling: the loss of a step is the mean over all CP x EP x DP data
 * shards, so every gradient, dense or expert, is divided by CP EP DP after
 * its sum (dense: over dp_cp; expert: over EDP, the EP all-to-all's backward
 * having summed the EP ranks' tokens already).
 *
 * Errors: MPI errors are fatal (MPI_ERRORS_ARE_FATAL on every group), and a
 * rank that dies makes mpirun end the others, so a failed rank never leaves
 * the rest hanging in a collective.
 */
#ifndef DG_GRID_H
#define DG_GRID_H

#include <mpi.h>

#include "dg_comm.h"
#include "dg_graph.h"

/* The requested model-parallel sizes (each >= 1) and the derived DP. */
typedef struct dg_grid_sizes {
    int tp, cp, ep, pp; /* from the flags */
    int dp;             /* derived: world / (tp cp ep pp) */
} dg_grid_sizes;

/* Derive s->dp for `world` ranks. DG_EINPUT with one line when a size is < 1
 * or the world does not divide, e.g.
 *   "world size 3 is not divisible by --tensor-model-parallel-size 1 x
 *    --context-parallel-size 1 x --expert-model-parallel-size 2 x
 *    --pipeline-model-parallel-size 1 (= 2)"
 * Pure arithmetic: no MPI, callable before any work. */
int dg_grid_sizes_check(int world, dg_grid_sizes *s, dg_err *err);

/* A rank's coordinates on the grid of s (s->dp set). */
typedef struct dg_grid_coord {
    int tp, cp, ep, dp, pp;
} dg_grid_coord;
dg_grid_coord dg_grid_coord_of(const dg_grid_sizes *s, int rank);
int dg_grid_rank_of(const dg_grid_sizes *s, dg_grid_coord c);

typedef struct dg_grid {
    int world, rank;
    dg_grid_sizes sizes;
    dg_grid_coord coord;
    int data_rank, data_size;      /* this rank's data shard: ep + EP dp of EP DP */
    dg_comm *world_comm;           /* all ranks */
    dg_comm *group[DG_AXIS_COUNT]; /* per axis (table above); [DG_AXIS_NONE] is NULL */
    dg_comm *dp_cp;                /* dense-gradient group: CP x EP x DP */
} dg_grid;

/* Build the grid over `comm` (usually MPI_COMM_WORLD; MPI initialised with
 * at least MPI_THREAD_SERIALIZED). s->tp, cp, ep, pp are read, dp derived
 * (dg_grid_sizes_check). Collective over comm: every rank must call it with
 * the same sizes. Returns NULL with err set (DG_EINPUT for sizes that do not
 * fit; *status receives the code, may be NULL). */
dg_grid *dg_grid_new(MPI_Comm comm, const dg_grid_sizes *s, int *status, dg_err *err);
void dg_grid_free(dg_grid *g);

/* The runtime's comm per axis for a training step (see above: DP -> dp_cp).
 * The comms stay owned by the grid. */
void dg_grid_runtime_groups(const dg_grid *g, dg_comm *groups[DG_AXIS_COUNT]);

/* One line for the startup log, e.g.
 * "rank grid: world 4 = tp 1 x cp 1 x ep 1 x dp 4 x pp 1; data-parallel size 4". */
void dg_grid_describe(const dg_grid_sizes *s, int world, char *buf, size_t len);

#endif /* DG_GRID_H */
