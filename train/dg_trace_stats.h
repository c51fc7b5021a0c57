/* dg_trace_stats.h — what a trace says about overlap and the critical path.
 *
 * Per rank (trace process): how long each stream was busy (the union of its
 * tasks' intervals), the exposed communication (time the comm stream ran a
 * task while the compute stream ran none: the union of comm intervals minus
 * the union of compute intervals), and the hidden fraction of the
 * communication h = 1 - exposed / T_comm = (T_compute + T_comm - T_busy) /
 * T_comm, T_busy the union of both streams' tasks: in [0, 1], and the
 * simulator's h (docs/simulate.md). Idle time, when neither stream runs (a
 * pipeline's bubble), is no part of it: it is in the span.
 *
 * The critical path: the chain of tasks that set the traced step's end.
 * From the task that ended last, walk back: each task's predecessor is,
 * among the tasks it waited for, the one that finished last. A task waited
 * for the previous task on its stream and for the tasks producing its inputs
 * and its ordering edges' sources (same rank, same step): the trace's own
 * "after" lists (dg_trace.h), or for traces without them the graph dump's
 * edges; a collective (a comm task whose node also ran on other ranks) also
 * waited for what its peers' instances waited for, so the path may cross
 * ranks there. docs/viewer.md.
 */
#ifndef DG_TRACE_STATS_H
#define DG_TRACE_STATS_H

#include "dg_trace_read.h"

enum { DG_TRACE_COMPUTE = 0, DG_TRACE_COMM = 1, DG_TRACE_N_STREAMS = 2 };

typedef struct dg_trace_rank_stats {
    int pid;
    int n_ev[DG_TRACE_N_STREAMS];     /* tasks per stream */
    double busy[DG_TRACE_N_STREAMS];  /* microseconds: union of the stream's tasks */
    double span;                      /* first start to last end over the rank's tasks */
    double exposed;                   /* comm busy while compute idle */
    double h;                         /* hidden fraction (above), in [0, 1]; 0 without comm */
} dg_trace_rank_stats;

/* One entry per pid that has task events, ascending (dg_free *out). */
int dg_trace_rank_stats_of(const dg_trace_file *t, dg_trace_rank_stats **out);

/* A step graph's dependencies, from a `dagatron dump --format json` file
 * (docs/graph_json_schema.md): node v waited for pred[off[v] .. off[v+1]). */
typedef struct dg_graph_deps {
    int n_nodes;
    int *off, *pred;
    char (*name)[DG_TRACE_STR_LEN]; /* the nodes' names */
} dg_graph_deps;

/* The most a graph dump read for its edges may hold (checked as it is read). */
#define DG_GRAPH_DUMP_MAX_BYTES ((size_t)1 << 30)

/* Parse dump text (read from `path`, named in errors as "--graph PATH").
 * DG_EINPUT when it is not JSON or not a dagatron.graph dump. */
int dg_graph_deps_parse(const char *text, const char *path, dg_graph_deps *out, dg_err *err);
void dg_graph_deps_free(dg_graph_deps *d);

/* Events whose node id is not in the graph or whose name differs from the
 * graph node's: a dump of another configuration than the traced one. */
int dg_graph_deps_mismatches(const dg_graph_deps *d, const dg_trace_file *t);

typedef struct dg_trace_path {
    int n;         /* tasks on the path */
    double busy;   /* their summed durations, microseconds */
    double span;   /* first path task's start to the last one's end */
} dg_trace_path;

/* Mark on_path[i] = 1 for the events on the critical path (0 elsewhere;
 * on_path has t->n_ev entries). deps (NULL: none) is used only when the
 * trace has no "after" lists; without either, streams and collectives only. */
dg_trace_path dg_trace_critical_path(const dg_trace_file *t, const dg_graph_deps *deps, unsigned char *on_path);

#endif /* DG_TRACE_STATS_H */
