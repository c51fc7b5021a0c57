/* dg_device_exec.h — running a plan's step on a device (dg_device.h).
 *
 * Written once against the device interface, so the emulated device runs
 * every line of it in CI and CUDA runs the same lines on a GPU. The host
 * enqueues the whole step without waiting, then waits once:
 *   1. the step's inputs go up on the compute stream (from pinned staging
 *      buffers), and every comm stream waits for them;
 *   2. every node, in the plan's order, is launched on its device stream.
 *      An edge between two nodes of one stream is free (a stream runs in
 *      order); an edge from another stream is a wait on the producer's
 *      event, recorded right after the producer's launch. Only the latest
 *      such producer on each other stream is waited for: the earlier ones
 *      precede it there;
 *   3. each comm stream's end is joined into the compute stream, and the
 *      logged values go down;
 *   4. sync: the step is finished, and its first error (naming the node)
 *      comes back.
 * Device streams: the plan's compute stream is stream 0; its comm stream
 * is split by group, one device stream per comm group of the step (the
 * pipeline's peers, DP's, EP's, TP's ... each its own communicator), so a
 * DP reduce-scatter never holds up a pipeline send, as with Megatron's (and
 * NCCL's) stream per process group. A compute op a pass put on the comm
 * stream (packing a bucket before its reduce-scatter) goes to the stream
 * of the collective it feeds. Groups beyond the device's streams share its
 * last one. The plan order is a topological order over data, ordering and
 * memory edges, and each stream's tasks run in it, so every group's
 * collectives are issued in the same order on every rank of the group.
 */
#ifndef DG_DEVICE_EXEC_H
#define DG_DEVICE_EXEC_H

#include "dg_device.h"
#include "dg_sched.h"

/* One copy: `bytes` between a host staging buffer and device memory. */
typedef struct dg_device_xfer {
    void *host;
    void *dev;
    size_t bytes;
} dg_device_xfer;

/* A node whose op has no kernel on the device, run on the host under the
 * host-fallback debugging flag: its inputs come down into pinned staging,
 * run(arg) runs its CPU kernel there (a host call in its stream's order,
 * outcome in *status / *err), its outputs go up. Slow by design. */
typedef struct dg_device_fallback {
    dg_device_xfer in[DG_MAX_INPUTS], out[DG_MAX_OUTPUTS];
    int n_in, n_out;
    void (*run)(void *arg);
    void *arg;
    int *status;
    dg_err *err;
} dg_device_fallback;

/* What the executor derives from a plan once: each node's device stream,
 * which event each node waits for on each other stream, and which nodes
 * record theirs. */
typedef struct dg_device_step {
    const dg_sched_plan *p;
    int n_streams;         /* device streams used: 1 + comm groups (<= the device's) */
    int *stream;           /* [n_nodes]: device stream of each node */
    int *wait_on;          /* [n_nodes][n_streams]: node to wait for, -1: none */
    unsigned char *record; /* [n_nodes]: 1 if a node of another stream waits for it */
    int n_waits, n_records;
} dg_device_step;

/* groups[axis]: the comm of each axis (as the runtime resolves them; equal
 * pointers are one group); max_streams: the device's n_streams. */
void dg_device_step_init(dg_device_step *ds, const dg_sched_plan *p, dg_comm *const *groups,
                         int max_streams);
void dg_device_step_free(dg_device_step *ds);

/* Run one step of ds->p on d: dptr[t] is tensor t's device memory; up[] go
 * up before the first node, down[] come down after the last; fb[v] (fb may
 * be NULL) runs node v on the host instead. Returns DG_OK or the first
 * error of the step. */
int dg_device_run_step(dg_device *d, const dg_device_step *ds, void *const *dptr,
                       const dg_device_xfer *up, int n_up, const dg_device_xfer *down, int n_down,
                       dg_device_fallback *const *fb, dg_err *err);

#endif /* DG_DEVICE_EXEC_H */
