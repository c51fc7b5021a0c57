/* dg_stream.h — a stream: where tasks of one class run, in order.
 *
 * The executor (dg_sched.h) owns one driver thread per stream. When a task
 * is ready the stream's driver calls ops->exec() for it, with the task's
 * buffers. On the CPU, exec() runs the task to completion:
 *   - the compute stream calls the node's CPU kernel with the compute team
 *     (dg_pool) and a workspace; kernels run one at a time, each on the
 *     whole team, so results never depend on the number of workers;
 *   - the comm stream hands collectives to the comm backend of the node's
 *     group axis (dg_comm_run_node): start, then wait. A compute op that a
 *     pass placed on the comm stream runs there on one thread.
 * On the CPU an "event" (an edge between streams) is the executor's
 * dependency counter: finishing a task decrements its successors' counters
 * and wakes the other stream's driver when one reaches zero.
 *
 * These are the CPU runtime's streams. A device (a GPU, or the emulated
 * device) runs a step through dg_device.h instead: there the host enqueues
 * every task and each cross-stream edge is an event (dg_device_exec.h).
 */
#ifndef DG_STREAM_H
#define DG_STREAM_H

#include <stdbool.h>

#include "dg_comm.h"
#include "dg_op.h"

typedef struct dg_stream dg_stream;

typedef struct dg_stream_ops {
    const char *name; /* "cpu-compute", "cpu-comm" */
    /* Run node n to completion; in/out are its buffers. */
    int (*exec)(dg_stream *s, const dg_graph *g, const dg_node *n, void *const *in,
                void *const *out, dg_err *err);
    void (*free)(dg_stream *s);
} dg_stream_ops;

struct dg_stream {
    const dg_stream_ops *ops;
    dg_stream_class cls;
    /* true: run tasks strictly in the plan's order. The comm stream needs
     * it: every rank of a group must issue its collectives in the same
     * order, which a timing-dependent ready queue would not guarantee. */
    bool in_order;
    void *impl;
};

/* The CPU compute stream: kernels on `team` (borrowed). */
dg_stream *dg_stream_cpu_compute_new(const dg_team *team);

/* The CPU comm stream: groups[axis] is the comm of each parallel axis
 * (borrowed; NULL entries fall back to groups[DG_AXIS_NONE]). */
dg_stream *dg_stream_cpu_comm_new(dg_comm *const *groups);

void dg_stream_free(dg_stream *s);

#endif /* DG_STREAM_H */
