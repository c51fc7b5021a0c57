/* dg_trace_read.h — a `--trace` file read back (the Chrome trace-event JSON
 * that sched/dg_trace.c writes, one rank or merged; see dg_trace.h).
 *
 * What the readers of a trace share (`dagatron trace-svg`, `dagatron view`):
 * the task events ("ph": "X") with their args, the processes' names
 * (process_name: "rank 3 (pp 1, tp 1)") and the streams' names
 * (thread_name: "compute", "comm"). Other events are skipped; a missing arg
 * reads as -1 (0 for wgrad and stage; no "after": the dependencies unknown),
 * so traces from older writers still load.
 * Times stay in the file's unit, microseconds.
 *
 * What a trace may hold, checked as it is read (a damaged file is refused
 * with one line naming the file, the event's index in traceEvents, the field
 * and what was expected, rather than drawn or summed into wrong figures):
 *   - the file: a regular file of at most DG_TRACE_MAX_BYTES (fstat before
 *     reading, and again while reading), JSON with a traceEvents array;
 *   - every event: an object with a string "ph";
 *   - a task ("X"): a string "name"; "ts" and "dur" numbers of microseconds,
 *     ts >= 0, dur >= 0, ts + dur <= DG_TRACE_MAX_US; "pid" and "tid"
 *     integers in [0, DG_TRACE_MAX_ID]; "args", if there, an object whose
 *     fields, each optional, are: node, stage integers in [0, MAX_ID];
 *     layer, microbatch, step in [-1, MAX_ID]; wgrad 0 or 1; op, phase
 *     strings; after an array of node ids in [0, MAX_ID];
 *   - a metadata event ("M"): a string "name"; for process_name an integer
 *     "pid" and for thread_name an integer "pid" and "tid" (as above), and
 *     for both a string args.name. Other metadata is skipped.
 * Everything sched/dg_trace.c writes is within these bounds.
 */
#ifndef DG_TRACE_READ_H
#define DG_TRACE_READ_H

#include "dg_base.h"

#define DG_TRACE_STR_LEN 64

#define DG_TRACE_MAX_BYTES ((size_t)1 << 30) /* 1 GiB: a rank's traced step is KB to MB */
#define DG_TRACE_MAX_US 1e13                 /* about 115 days from the recorder's start */
#define DG_TRACE_MAX_ID ((1 << 24) - 1)      /* ranks, streams, nodes, layers, micro-batches, steps */

typedef struct dg_trace_event {
    double ts, dur; /* microseconds */
    int pid, tid;   /* rank, stream (0 compute, 1 comm) */
    int node, layer, microbatch, step, wgrad;
    int stage; /* the node's (virtual) pipeline stage, 0 if absent */
    char name[DG_TRACE_STR_LEN];  /* the graph node's name */
    char op[DG_TRACE_STR_LEN];    /* the op's name, "" if absent */
    char phase[DG_TRACE_STR_LEN]; /* forward / backward / recompute / optimizer ..., "" if absent */
    int after_at, n_after;        /* the node ids it waited for: file->after[after_at .. + n_after) */
} dg_trace_event;

/* A named process (pid) or stream (pid, tid). */
typedef struct dg_trace_label {
    int pid, tid; /* tid -1 for a process */
    char name[96];
} dg_trace_label;

typedef struct dg_trace_file {
    dg_trace_event *ev; /* in file order */
    int n_ev;
    dg_trace_label *label; /* process and thread names, in file order */
    int n_label;
    int *after;    /* the events' "after" lists (node ids), pooled */
    int n_after;
    int has_after; /* the writer recorded dependencies (events carry "after") */
} dg_trace_file;

/* Read `path`. DG_EINPUT naming the file (as "--trace PATH") when it cannot
 * be read, is not a trace (no traceEvents array), breaks a bound above, or
 * needs more memory than there is. An empty trace loads. */
int dg_trace_read(const char *path, dg_trace_file *out, dg_err *err);
void dg_trace_file_free(dg_trace_file *t);

/* A process's name ("rank P" if the file names none); a stream's name
 * ("stream T" if the file names none). */
const char *dg_trace_proc_name(const dg_trace_file *t, int pid, char *buf, size_t len);
const char *dg_trace_stream_name(const dg_trace_file *t, int pid, int tid, char *buf, size_t len);

#endif /* DG_TRACE_READ_H */
