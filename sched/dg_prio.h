/* dg_prio.h — the scheduling policy: a cost model in seconds, bottom levels,
 * and the one priority order ready tasks are taken in.
 *
 * What must run before what is in the graph: data edges and ordering edges
 * (micro-batch order, when a gradient bucket may reduce: dg_graph.h). The
 * policy only breaks ties among ready tasks, and it is this one:
 *
 *   1. node->priority, larger first. An explicit override that no pass in
 *      the tree sets (0 everywhere); tests use it, and a schedule that
 *      cannot be written as edges could. Prefer ordering edges.
 *   2. Compute that feeds communication first: a compute task whose output
 *      a collective reads (the EP dispatch copies before an all-to-all, a
 *      gradient bucket's pack before its all-reduce, a row-parallel GEMM
 *      before its all-reduce). Running it now costs the compute stream only
 *      its own time (all of that work must run anyway) and lets the comm
 *      stream start a transfer that then runs beside the compute that
 *      follows. Bottom levels alone get this wrong where it matters most:
 *      at the end of a phase, the copy feeding the dispatch's backward
 *      all-to-all has a short path to the end while the weight-gradient
 *      GEMMs beside it have long ones, so it would wait for all of them and
 *      its all-to-all would run exposed after them.
 *      Then, one tier lower, compute a few hops from communication: every
 *      reader of its output is a task of this rule, and within
 *      DG_PRIO_FEED_HOPS hops of a collective (a bias or weight gradient read
 *      only by its bucket's pack, or by its accumulation over micro-batches
 *      or a pack segment). Without this tier a bucket's pack waited for its
 *      small, short-path gradients until the whole of backward was done, and
 *      --overlap-grad-reduce hid nothing. Only a few hops: all of backward
 *      leads to the gradient reductions alone. The tier stays below the
 *      direct feeders so the weight-gradient GEMMs do not push the
 *      dispatch's backward all-to-all back again.
 *   3. Bottom level, larger first: the task's modelled time plus the largest
 *      bottom level among its successors, i.e. the longest remaining path to
 *      the end of the step (the list-scheduling heuristic of HEFT and Graham:
 *      it keeps the critical path moving).
 *   4. Node id, smaller first (determinism).
 * The order is precomputed into a rank (0 = most urgent), so the heap
 * compares two ints. Priorities change when tasks run, never what they
 * compute.
 *
 * The cost model turns an op's dg_cost into seconds, so that FLOPs and bytes
 * on a link compare (summing flops and bytes 1:1 made an all-to-all look
 * free next to a GEMM):
 *   compute task:  task_s + max(flops / flops_per_s, bytes / mem_bytes_per_s)
 *                  (a roofline: bytes are memory traffic for compute ops);
 *   collective:    task_s + comm_latency_s + bytes / comm_bytes_per_s over a
 *                  group of two or more (its axis's own figures where set) (bytes: what the rank puts on the
 *                  wire, dg_collective.c); over a group of one it is a local
 *                  copy, task_s + bytes / mem_bytes_per_s.
 * The defaults describe a few CPU cores with MPI over shared memory. Only
 * their ratios matter for the order; dg_sched_opts.cost overrides them (a
 * GPU with NVLink, a real network). Planned times are reported in seconds.
 */
#ifndef DG_PRIO_H
#define DG_PRIO_H

#include "dg_graph.h"

/* Compute hops from a collective that still count as feeding it (rule 2's
 * lower tier): gradient producer -> accumulation -> pack segment -> pack. */
#define DG_PRIO_FEED_HOPS 4

typedef struct dg_cost_model {
    double flops_per_s;      /* compute stream's FLOP rate (default 1e11: a few AVX-512 cores) */
    double mem_bytes_per_s;  /* memory bandwidth a compute kernel sees (default 2e10) */
    double comm_bytes_per_s; /* link bandwidth per rank for collectives (default 5e9: MPI over
                              * shared memory, which copies twice) */
    double comm_latency_s;   /* fixed cost of one collective: hand-off to the comm thread,
                              * handshake, waiting for the slowest rank (default 5e-5) */
    double task_s;           /* the scheduler's cost per task, and the least any task costs (default 2e-6) */
    /* Per axis overrides of the two comm figures (0: use the ones above):
     * the links of --emulate-link (dg_link_cost_model), or a network whose
     * tp links are faster than its dp ones. */
    double axis_bytes_per_s[DG_AXIS_COUNT], axis_latency_s[DG_AXIS_COUNT];
} dg_cost_model;

dg_cost_model dg_cost_model_default(void);

/* Node n's modelled time in seconds (> 0). comm: 1 if it is a collective. */
double dg_prio_node_time(const dg_cost_model *m, const dg_graph *g, const dg_node *n);

/* Bottom levels over a successor list in CSR form (succ_off has n_nodes+1
 * entries), visiting nodes in reverse `order` (a topological order);
 * time[v] is node v's modelled time. */
void dg_prio_bottom_levels(const dg_graph *g, const int *order, const int *succ_off,
                           const int *succ, const double *time, double *bottom);

/* feeds[v] = 2 for the direct feeders of rule 2 above, 1 for its lower
 * tier (within DG_PRIO_FEED_HOPS hops of a collective), else 0. is_comm[v]:
 * v runs on the comm stream. */
void dg_prio_feeds_comm(const dg_graph *g, const int *is_comm, int *feeds);

/* rank[node] = position of node in the policy's order (rules 1-4). */
void dg_prio_rank(const dg_graph *g, const int *feeds, const double *bottom, int *rank);

/* A binary min-heap of node ids keyed by rank[]. */
typedef struct dg_heap {
    int *a;
    int n;
    const int *rank;
} dg_heap;

static inline void dg_heap_push(dg_heap *h, int v) {
    int c = h->n++;
    h->a[c] = v;
    while (c > 0) {
        int p = (c - 1) / 2;
        if (h->rank[h->a[p]] <= h->rank[h->a[c]]) break;
        int t = h->a[p];
        h->a[p] = h->a[c];
        h->a[c] = t;
        c = p;
    }
}

static inline int dg_heap_pop(dg_heap *h) {
    int top = h->a[0];
    h->a[0] = h->a[--h->n];
    for (int c = 0;;) {
        int l = 2 * c + 1, r = l + 1, m = c;
        if (l < h->n && h->rank[h->a[l]] < h->rank[h->a[m]]) m = l;
        if (r < h->n && h->rank[h->a[r]] < h->rank[h->a[m]]) m = r;
        if (m == c) break;
        int t = h->a[m];
        h->a[m] = h->a[c];
        h->a[c] = t;
        c = m;
    }
    return top;
}

#endif /* DG_PRIO_H */
