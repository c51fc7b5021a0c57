/* dg_memplan.h — static memory planning: activations packed into one arena.
 *
 * Every activation (role ACTIVATION, written by a node) has a lifetime
 * [first, last): from the start of its producer to the end of its last
 * reader, on a timeline where every node occupies [start, end) with
 * start < end. With a plain order the timeline is positions (node k runs in
 * [k, k+1)); the scheduler passes the times of its simulated two-stream
 * schedule instead, so tensors of tasks that run side by side on the
 * compute and comm streams are live together and do not share memory
 * (sharing would serialise the streams). A node's outputs never share memory
 * with its own inputs (both are live during the node). Two activations whose
 * lifetimes intersect must not overlap in the arena; the
 * planner packs them "greedy by size, best fit": largest tensor first, into
 * the smallest gap left by the already placed tensors it is live with (or on
 * top of them), every offset 64-byte aligned. The arena is one allocation
 * of arena_bytes.
 *
 * Activations that nobody reads (the loss, saved statistics, outputs the
 * caller wants) and the ones listed in `keep` live to the end of the step
 * (last = the latest end), so they can be read after the run.
 *
 * Parameters, gradients, optimizer state, inputs, leaf activations and the
 * step's weights (dg_graph_weights: the 16-bit working copies) are not
 * planned: they live in persistent buffers (offset -1).
 *
 * The report is the planned peak (arena_bytes) beside the naive sum of all
 * activations, and the lower bound max_t(live bytes at t) no packing beats.
 *
 * A parallel executor runs nodes out of this order; dg_sched.c makes the plan
 * valid anyway by adding, for every two activations that share memory, edges
 * from the first one's readers to the second one's producer (see there).
 */
#ifndef DG_MEMPLAN_H
#define DG_MEMPLAN_H

#include <stdio.h>

#include "dg_graph.h"

#define DG_MEMPLAN_ALIGN 64

typedef struct dg_memplan {
    int n_tensors;
    int64_t *offset;  /* per tensor: byte offset in the arena, -1 if persistent */
    size_t *size;     /* per tensor: bytes reserved (64-aligned), 0 if persistent */
    double *first, *last; /* per tensor: lifetime [first, last) on the timeline, -1 if persistent */
    int n_planned;    /* activations placed in the arena */
    size_t arena_bytes;     /* planned peak */
    size_t naive_bytes;     /* sum of all planned activations (aligned) */
    size_t live_peak_bytes; /* lower bound: most bytes live at one time */
} dg_memplan;

/* Plan the activations of g for `order` (a topological order of all nodes
 * over data and ordering edges, e.g. dg_graph_topo_order's; node order[k]
 * occupies [k, k+1)). keep: activation ids that must survive
 * the step (may be NULL). */
int dg_memplan_build(const dg_graph *g, const int *order, const int *keep, int n_keep,
                     dg_memplan *mp, dg_err *err);

/* The same on an explicit timeline: node v occupies [start[v], end[v]),
 * start[v] < end[v], and every producer ends no later than its readers
 * start. The scheduler's simulated timeline also keeps every ordering edge,
 * so lifetimes follow the schedule the graph prescribes. */
int dg_memplan_build_timed(const dg_graph *g, const double *start, const double *end,
                           const int *keep, int n_keep, dg_memplan *mp, dg_err *err);

/* Check that no two planned tensors with intersecting lifetimes overlap in
 * memory and that all lie inside the arena. Returns DG_OK, or DG_EINTERNAL
 * with err naming the first offending pair. */
int dg_memplan_validate(const dg_graph *g, const dg_memplan *mp, dg_err *err);

void dg_memplan_free(dg_memplan *mp);

/* One line: "memory plan: N activations, peak X MiB (arena) vs naive sum Y MiB (Z x), lower bound W MiB". */
void dg_memplan_print(const dg_memplan *mp, FILE *f);

#endif /* DG_MEMPLAN_H */
