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
 *  - Expert parameters are split over EP, over ETP (below) and PP.
 *  - Data: EP ranks read different samples, as in Megatron, where EP is
 *    carved out of data parallelism. So the number of data shards, Megatron's
 *    "data-parallel size", is EP x DP, and this rank's shard is
 *    data_rank = ep + EP * dp. CP ranks read the same samples and split the
 *    sequence.
 *
 * The expert grid (--expert-tensor-parallel-size ETP; 0 = Megatron's
 * default, ETP = TP). Megatron folds ETP x EP x expert-DP over the same
 * ranks as TP x CP x DP (its DP being our EP x DP); here the fold is:
 *
 *   ETP = TP   the expert axis is the tp axis: expert fc1 is column-split
 *              and fc2 row-split over the tp group (dim 1 of
 *              linear_fc1.weight [E, 2F, H], gate and up halves each
 *              split; dim 2 of linear_fc2.weight [E, H, F]); every tp rank
 *              runs every dispatched row, and the rows' fc2 partial sums
 *              are all-reduced over tp (parallel/ep/dg_ep.c). Expert-DP = CP x DP.
 *   ETP = 1    experts are whole on every tp rank; the tp ranks of a group
 *              serve disjoint slices of the (replicated) tokens, so their
 *              expert gradients are different summands and are reduced
 *              with the other data ranks: expert-DP = TP x CP x DP; the MoE
 *              output, a sum over tp of the slices, is all-reduced over tp
 *              (parallel/ep/dg_etp.h).
 *   EP         our EP axis in both cases: ETP x EP x expert-DP = TP x CP x
 *              EP x DP, the world of a pipeline stage.
 * Other values (1 < ETP != TP) are refused (dg_grid_sizes_check).
 * Sizes match Megatron's (its data-parallel size world / (TP CP PP) is our
 * EP x DP; its expert-DP world / (ETP EP PP) is ours above); which ranks
 * form a group differs: Megatron orders the expert grid etp, ep, edp from
 * the fastest, so at ETP 1 its EP groups are made of tp neighbours, while
 * ours are always data-parallel peers (EP carved out of DP), whatever ETP.
 * The numbers do not depend on it, only which links each collective uses.
 * E.g. TP 2 x EP 2 on 4 ranks (rank = tp + 2 ep): tp groups {0,1} {2,3},
 * ep groups {0,2} {1,3}, two data shards (ep); ETP 2: rank r holds expert
 * rows ep*E/2.. and half of each expert's F, edp groups {r} alone; ETP 1:
 * ranks 0 and 1 hold the same whole experts, edp groups {0,1} {2,3}.
 *
 * The group of every parameter's gradient (checked by the verifier's
 * 'grad-group' rule, graph/dg_verify_sharding.c):
 *   dense, split over tp or not           dp_cp (CP x EP x DP): the tp
 *                                         ranks compute the same gradient
 *                                         of a replicated weight (the
 *                                         tokens are the same), the
 *                                         data ranks different summands
 *   router (dense, replicated)            dp_cp, as above: under ETP 1 the
 *                                         probs' gradient is all-reduced
 *                                         over tp before it reaches the
 *                                         router (parallel/ep/dg_etp.h)
 *   experts, ETP = TP                     EDP = CP x DP
 *   experts, ETP = 1                      EDP = TP x CP x DP
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
 *                 (+ tp if ETP 1)   (x TP)      holding the same experts; expert
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
 * having summed the EP ranks' tokens already; under ETP 1 the tp ranks'
 * disjoint token slices add up to one data shard's tokens in that sum).
 *
 * Errors: MPI errors are fatal (MPI_ERRORS_ARE_FATAL on every group), and a
 * rank that dies makes mpirun end the others, so a failed rank never leaves
 * the rest hanging in a collective.
 */
#ifndef DG_GRID_H
#define DG_GRID_H

#include <mpi.h>
#include <stdbool.h>

#include "dg_comm.h"
#include "dg_graph.h"

/* The requested model-parallel sizes (each >= 1) and the derived DP. */
typedef struct dg_grid_sizes {
    int tp, cp, ep, pp; /* from the flags */
    int dp;             /* derived: world / (tp cp ep pp) */
    int etp;            /* --expert-tensor-parallel-size: 1 or tp; 0 = tp (set by the check) */
} dg_grid_sizes;

/* Derive s->dp for `world` ranks. DG_EINPUT with one line when a size is < 1
 * or the world does not divide, e.g.
 *   "world size 3 is not divisible by --tensor-model-parallel-size 1 x
 *    --context-parallel-size 1 x --expert-model-parallel-size 2 x
 *    --pipeline-model-parallel-size 1 (= 2)"
 * Also resolves s->etp (0 -> tp) and refuses an ETP other than 1 or tp:
 *   "--expert-tensor-parallel-size 3: expected 1 or
 *    --tensor-model-parallel-size 2 (other expert foldings are not built)"
 * Pure arithmetic: no MPI, callable before any work. */
int dg_grid_sizes_check(int world, dg_grid_sizes *s, dg_err *err);

/* The expert-data-parallel size of checked sizes s: (ETP 1 ? TP : 1) x CP x DP. */
int dg_grid_edp_size(const dg_grid_sizes *s);

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

/* This rank's coordinate on axis a as a step graph sees it: its rank in
 * the group dg_grid_runtime_groups gives a, of the mesh[a] ranks the step
 * pipeline records (train/dg_step_opts.h, dg_step_groups), so it is the
 * coord[a] that dg_layout.h's shard functions, parameter init and the
 * graph's "<axis>_rank" inputs take:
 *   tp, cp, ep, pp   the rank's own coordinate;
 *   dp               its place in the dense-gradient group dp_cp:
 *                    cp + CP (ep + EP dp);
 *   edp              its place in the expert-data group: cp + CP dp, or
 *                    tp + TP (cp + CP dp) under ETP 1 (the group spans tp);
 *   none             0.
 * (Group ranks follow world ranks, tp fastest: hence these orders; the
 * value is read from the group itself.) g NULL is a world of one: every
 * coordinate 0. */
int dg_grid_axis_coord(const dg_grid *g, dg_axis a);

/* Every axis' coordinate (dg_grid_axis_coord), coord[DG_AXIS_NONE] 0. */
void dg_grid_coords(const dg_grid *g, int coord[DG_AXIS_COUNT]);

/* Whether this rank is the first replica of its dense parameters: 0 on
 * every axis that replicates them (cp, ep, dp: its place in dp_cp is 0).
 * The ranks whose tp and pp coordinates tell the model's pieces apart, one
 * per piece: Megatron prints a rank's parameter count from these alone
 * (its data-parallel rank 0, with CP). g NULL: true. */
bool dg_grid_first_replica(const dg_grid *g);

/* One line for the startup log, e.g.
 * "rank grid: world 4 = tp 2 x cp 1 x ep 2 x dp 1 x pp 1; data-parallel size 2;
 *  experts: etp 1 x ep 2 x edp 2 (edp = tp x cp x dp)". */
void dg_grid_describe(const dg_grid_sizes *s, int world, char *buf, size_t len);

#endif /* DG_GRID_H */
