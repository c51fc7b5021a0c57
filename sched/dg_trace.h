/* dg_trace.h — where the time went: Chrome trace-event JSON.
 *
 * The executor times every task; after each step it hands the intervals to a
 * recorder (if the runtime has one). dg_trace_write() emits the Chrome
 * trace-event format that Perfetto and chrome://tracing open:
 *
 *   {"traceEvents": [
 *     {"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "ts": 0, "dur": 0,
 *      "args": {"name": "rank 0"}},
 *     {"name": "thread_name", "ph": "M", "pid": 0, "tid": 1, ..., "args": {"name": "comm"}},
 *     {"name": "mlp_fc1_12", "cat": "forward", "ph": "X", "ts": 1234.567, "dur": 89.012,
 *      "pid": 0, "tid": 0, "args": {"node": 12, "op": "matmul", "layer": 1,
 *      "microbatch": -1, "phase": "forward", "step": 0, "wgrad": 0, "after": [7, 11]}},
 *     ...]}
 *
 * wgrad 1 marks a backward task whose outputs are all parameters' gradients
 * ("grad/..."): the W of zero-bubble schedules. after lists the node ids the
 * node waited for in the graph the rank ran: its inputs' producers, then
 * its ordering edges' sources (what `dagatron view` walks its critical path
 * over; docs/viewer.md).
 * pid = rank, tid = stream (0 compute, 1 comm). Under MPI every rank records
 * its own events and dg_trace_write_merged() (dg_trace_merge.c) gathers them
 * into one file, one process per rank, named by its grid coordinates. Times are microseconds from
 * the recorder's creation, printed from integer nanoseconds so that events
 * of one stream, which ran one after the other, never overlap in the file.
 * Metadata events carry ts/dur 0 so that every event has the same fields.
 */
#ifndef DG_TRACE_H
#define DG_TRACE_H

#include "dg_graph.h"

typedef struct dg_trace dg_trace;

dg_trace *dg_trace_new(int rank);
void dg_trace_free(dg_trace *tr);

/* Record node `node` of g run on stream `tid` during step `step` from t0 to
 * t1 (dg_now() seconds). What the file needs from the graph is copied, so g
 * may be freed before the write. Not thread-safe: one recorder per runtime,
 * fed by the executor after each step. */
void dg_trace_add(dg_trace *tr, const dg_graph *g, int node, int tid, int step, double t0,
                  double t1);

int dg_trace_n_events(const dg_trace *tr);

/* Write the JSON file. Returns DG_OK, or DG_EINPUT naming the path. */
int dg_trace_write(const dg_trace *tr, const char *path, dg_err *err);

/* The process's name in the file ("rank 3 (pp 1, tp 1)"); "rank R" unless set. */
void dg_trace_set_name(dg_trace *tr, const char *name);

/* dg_now() at creation: the time events are counted from. */
double dg_trace_origin(const dg_trace *tr);

/* This recorder's metadata and events, comma-separated, without the
 * enclosing array, every ts moved by shift_ns: one rank's part of a file. */
void dg_trace_put_events(const dg_trace *tr, FILE *f, int64_t shift_ns);

struct dg_comm;
/* Collective over `world`: every rank sends its part (times moved onto the
 * earliest rank's origin: CLOCK_MONOTONIC is one clock on one host) and
 * world rank 0 writes one file with them all. DG_EINPUT naming the path on
 * rank 0 when it cannot be written; DG_OK elsewhere. */
int dg_trace_write_merged(const dg_trace *tr, struct dg_comm *world, const char *path, dg_err *err);

#endif /* DG_TRACE_H */
