/* dg_sched.h — the scheduler: a plan for a graph, a runtime to run it on.
 *
 *   dg_sched_plan *p = dg_sched_plan_new(g, NULL, &err);   // once per graph
 *   dg_runtime *rt = dg_runtime_new(NULL, &err);            // once per process
 *   dg_runtime_bind(rt, p, &err);                            // arena + buffers
 *   memcpy(dg_runtime_ptr(rt, io.tokens), tokens, ...);     // fill inputs, params
 *   dg_sched_stats st;
 *   dg_sched_run(p, rt, &st, &err);                          // one step
 *   dg_sched_stats_print(&st, stdout, "");
 *
 * The plan (numbered as in dg_sched_plan.c):
 *   1. data edges: producer -> reader for every tensor read by a node, and
 *      the graph's ordering edges (dg_graph_add_order): both are
 *      dependencies to every later step and to the executor;
 *   2. stream assignment: collectives (op->comm != DG_COMM_NONE) and nodes a
 *      pass put on DG_STREAM_COMM go to the comm stream, the rest to compute;
 *      the comm stream is split into lanes, one per group kind (below);
 *   3. priorities: the one policy of dg_prio.h (modelled times in seconds,
 *      compute feeding comm cheaply first, then bottom levels);
 *   4. the plan order: a simulated run of the compute stream and the comm
 *      lanes (each takes its most urgent ready task; the modelled time is
 *      the duration), sorted by start;
 *   5. the memory plan on the simulated timeline (dg_memplan.h), validated;
 *   6. memory edges (below); 7. each stream's task sequence in plan order.
 *
 * Why a stream-aware timeline: planning memory against one serial order
 * would let a comm tensor reuse the slot of a compute tensor that dies
 * "earlier" in that order although the two streams run side by side; the
 * memory edges below would then serialise comm behind compute and kill the
 * overlap. On the simulated timeline, tensors of concurrent tasks are live
 * together and never share memory.
 *
 * Why a comm lane per group kind: with one in-order comm stream a DP
 * reduce-scatter or all-gather bucket (--overlap-grad-reduce,
 * --overlap-param-gather) queued ahead of a pipeline send held the next
 * stage's activations until the bucket was done, and the step got longer
 * with the overlap flags than without. Megatron (and NCCL) give each process
 * group its own stream; here each collective's axis (graph/dg_collective.h:
 * pp peers, dp, expert-dp, tp, cp, ep) has its lane, in plan order, so no
 * kind waits behind another's queue. Every rank of a group issues that
 * group's collectives in the same order (its lane's order), which is all a
 * collective needs. A compute op a pass put on the comm stream (packing a
 * bucket) takes the lane of its node's group, DG_AXIS_NONE's if it has none.
 *
 * Why memory edges: the executor does not follow the simulation: it runs the
 * streams at once and picks among ready compute tasks by priority at run
 * time. The plan stays valid if a tensor's slot is reused only after the
 * previous occupants are dead: for every two planned tensors A and B that
 * share arena bytes, where A dies before B is born, every reader of A (and
 * A's producer) gets an edge to B's producer. These edges point forward in
 * the plan order, so the graph stays acyclic and, with the comm stream
 * running its tasks in plan order, the executor cannot deadlock. Only the
 * last previous occupants of B's bytes need edges (older ones are ordered
 * before those already), and most coincide with data edges.
 *
 * The runtime (dg_runtime) owns the threads: a compute team of N workers
 * pinned to the rank's cores (dg_pool; its member 0 is the compute stream's
 * driver), a comm stream thread per distinct comm group of the lanes (lanes
 * whose groups are one dg_comm, e.g. axes of one rank that fall back to the
 * "self" group, share a thread and run merged in plan order; on a core of
 * their own when the team leaves one free, else floating over the rank's
 * cpuset), the comm groups (a "self" group of one by
 * default), the arena and the persistent buffers (parameters, gradients,
 * optimizer state, inputs), and an optional trace recorder. Idle threads
 * sleep on condition variables.
 *
 * Determinism: compute kernels run one at a time on the whole team and
 * split rows only; each comm thread runs its lanes in plan order; every
 * dependency is an edge. So losses and gradients are bitwise identical for any worker
 * count and any timing.
 */
#ifndef DG_SCHED_H
#define DG_SCHED_H

#include <stdio.h>

#include "dg_comm.h"
#include "dg_device.h"
#include "dg_memplan.h"
#include "dg_prio.h"
#include "dg_stream.h"
#include "dg_team.h"
#include "dg_topo.h"
#include "dg_trace.h"

/* ---- the plan ---------------------------------------------------------------- */

typedef struct dg_sched_opts {
    const int *keep; /* activations the caller reads after the step (the loss...) */
    int n_keep;
    int no_memory_plan; /* 1: every tensor gets its own buffer (for debugging) */
    const dg_cost_model *cost; /* the policy's cost model (dg_prio.h); NULL: the defaults */
} dg_sched_opts;

/* The comm lanes: lane 0 is the compute stream, lane 1 + a the comm stream
 * of group kind (axis) a. */
#define DG_SCHED_LANES (1 + DG_AXIS_COUNT)
static inline int dg_sched_lane_axis(int lane) { return lane - 1; }

/* Read-only after dg_sched_plan_new. Arrays are indexed by node id unless
 * said otherwise. */
typedef struct dg_sched_plan {
    const dg_graph *g; /* borrowed: must outlive the plan, not change */
    int n_nodes;
    int *order;        /* [n_nodes] plan order (position -> node) */
    double *time;      /* modelled seconds per node (dg_prio.h's cost model) */
    double *sim_start, *sim_end; /* the simulated schedule (modelled seconds) */
    int *pos;          /* node -> position in order */
    double *bottom;    /* bottom level (modelled seconds to the end of the step) */
    int *feeds;        /* 2: compute whose output a collective reads, 1: a few hops from one (dg_prio.h rule 2) */
    int *rank;         /* priority rank, 0 = most urgent */
    int *stream;       /* dg_stream_class of each node */
    int *succ_off;     /* [n_nodes+1] CSR successors: data, ordering and memory edges */
    int *succ;
    int *npred;        /* number of predecessors (in-degree over succ) */
    int n_data_edges, n_order_edges, n_mem_edges; /* ordering edges: those not parallel to a data edge */
    int n_stream[DG_STREAM_COUNT];  /* tasks per stream */
    int *seq[DG_STREAM_COUNT];      /* each stream's tasks in plan order */
    int *lane;                      /* [n_nodes] 0: compute, 1 + axis: that group kind's comm lane */
    int n_lane[DG_SCHED_LANES];     /* tasks per lane */
    int *lane_seq[DG_SCHED_LANES];  /* each lane's tasks in plan order */
    dg_memplan mem;
    int planned;       /* 0 with opts->no_memory_plan */
    int *keep, n_keep; /* opts->keep, copied */
} dg_sched_plan;

/* Build the plan. Returns NULL with err set (a cycle, a node without op). */
dg_sched_plan *dg_sched_plan_new(const dg_graph *g, const dg_sched_opts *o, dg_err *err);
void dg_sched_plan_free(dg_sched_plan *p);

/* Two lines: tasks per stream (comm per group kind), edges, critical path;
 * then the memory plan. */
void dg_sched_plan_print(const dg_sched_plan *p, FILE *f);

/* ---- the runtime --------------------------------------------------------------- */

typedef struct dg_runtime_opts {
    int compute_threads; /* 0: the number of cores in this rank's cpuset */
    int no_pin;          /* 1: do not bind threads (topology is still read) */
    int rank;            /* the trace's pid */
    /* Comm group per parallel axis (borrowed). NULL entries use a "self"
     * group of one that the runtime owns. */
    dg_comm *groups[DG_AXIS_COUNT];
    /* Run every step on a device (dg_device.h) instead of the CPU streams:
     * called with the compute team and make_device_arg; the runtime owns the
     * result, and a NULL result fails dg_runtime_new with the factory's err.
     * The emulated device (dg_device_emu.h) and CUDA (kernels/cuda/
     * dg_cuda_device.h) plug in here. On a
     * device, dg_runtime_ptr gives the host view (below). */
    dg_device *(*make_device)(const dg_team *team, void *arg, dg_err *err);
    void *make_device_arg;
    /* On a device, 1: a node whose op has no kernel there runs its CPU kernel
     * on the host, its buffers copied down and up around it (debugging;
     * slow). 0: such a graph is refused at bind, naming the op. */
    int host_fallback;
} dg_runtime_opts;

typedef struct dg_runtime dg_runtime;

dg_runtime *dg_runtime_new(const dg_runtime_opts *o, dg_err *err);
void dg_runtime_free(dg_runtime *rt);

int dg_runtime_threads(const dg_runtime *rt); /* compute team size */
/* The compute team, for kernels the caller runs itself between steps (an
 * optimizer update, gradient accumulation); never during a step. */
const dg_team *dg_runtime_team(const dg_runtime *rt);
dg_topo *dg_runtime_topo(dg_runtime *rt);

/* Attach a trace recorder (borrowed; NULL detaches). Every later step is
 * recorded into it. */
void dg_runtime_set_trace(dg_runtime *rt, dg_trace *tr);

/* Allocate the arena and persistent buffers for p's graph (zeroed). Binding
 * another plan of the same graph keeps the persistent buffers (parameters
 * survive); a different graph reallocates them. dg_sched_run binds for you. */
int dg_runtime_bind(dg_runtime *rt, const dg_sched_plan *p, dg_err *err);

/* Host pointer of tensor t in the bound plan (NULL before binding). Arena
 * tensors are valid from their producer to their last reader, so read them
 * after a step only if they are unread or listed in opts->keep.
 *
 * On a device the kernels' memory is the device's, and this is the host
 * view: pinned buffers for every persistent tensor and for the kept and
 * unread activations (NULL for the other activations). A step copies up
 * the host view of every input (role DG_ROLE_INPUT: tokens, targets, masks,
 * the rng key, the optimizer's hyper-parameters, the loss scale) before it
 * runs, and copies down the kept and unread activations (losses, the
 * optimizer's status, tokens per expert) after; parameters, gradients and
 * optimizer state stay on the device. Move them explicitly with
 * dg_runtime_upload / dg_runtime_download (initialisation, checkpoints). */
void *dg_runtime_ptr(const dg_runtime *rt, int t);

/* The device's name ("emulated", "cuda"), or NULL for the CPU runtime. */
const char *dg_runtime_device(const dg_runtime *rt);

/* Between steps, on a device: copy every persistent tensor whose role is in
 * `roles` (a mask of 1u << dg_role) from the host view up to the device, or
 * down into the host view, and wait. No-ops on the CPU runtime, whose host
 * view is the kernels' memory. */
#define DG_ROLES_STATE ((1u << DG_ROLE_PARAMETER) | (1u << DG_ROLE_GRADIENT) | (1u << DG_ROLE_OPTIMIZER))
int dg_runtime_upload(dg_runtime *rt, unsigned roles, dg_err *err);
int dg_runtime_download(dg_runtime *rt, unsigned roles, dg_err *err);

/* ---- a step ------------------------------------------------------------------------ */

typedef struct dg_sched_stats {
    int step;                           /* 0, 1, ... per runtime */
    int n_tasks;
    int n_tasks_stream[DG_STREAM_COUNT];
    double t_step;                      /* wall seconds from first task start to last task end */
    double busy[DG_STREAM_COUNT];       /* seconds each stream ran tasks */
    double exposed_comm;                /* comm seconds with no compute running */
    double hidden_frac;                 /* h = 1 - exposed_comm / T_comm: the comm time that ran
                                         * under compute, in [0, 1]; 0 without comm. Idle time
                                         * (neither stream running) is no part of it. */
    double overhead_per_task;           /* seconds of scheduler work (dequeue, release) per task */
    double wall;                        /* seconds inside dg_sched_run, hand-off included */
    size_t bytes_up, bytes_down;        /* on a device: copied up before / down after the step */
    int n_host_nodes;                   /* on a device: nodes run on the host (host fallback) */
} dg_sched_stats;

/* Run one step of p on rt and return when it is finished. stats may be
 * NULL. One step at a time per runtime (calls from two threads at once are
 * a fatal error). Every kernel must write all of its outputs: the arena is
 * not cleared between steps. Returns DG_OK or the first failing task's
 * status with err naming its node; after a failure the runtime stays usable. */
int dg_sched_run(dg_sched_plan *p, dg_runtime *rt, dg_sched_stats *stats, dg_err *err);

/* The per-step summary: busy time per stream, exposed communication, h,
 * scheduler overhead per task. */
void dg_sched_stats_print(const dg_sched_stats *s, FILE *f, const char *prefix);

#endif /* DG_SCHED_H */
