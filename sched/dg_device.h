/* dg_device.h — a device: memory, asynchronous copies, streams, events, and
 * launching a node's kernel. One interface, two implementations:
 *
 *   - the emulated device (dg_device_emu.h): each stream a FIFO worker
 *     thread that runs the CPU kernels on memory of its own, events as
 *     counters, and an option to delay every task randomly. CI runs every
 *     line of the device executor through it, without a GPU;
 *   - CUDA (kernels/cuda/dg_cuda_device.h): cudaStream_t, cudaEvent_t, one
 *     cudaMalloc per allocation, the op -> CUDA kernel table, NCCL for the
 *     collectives.
 *
 * The shape follows ggml's backend interface: the caller (the device
 * executor, dg_device_exec.h) only enqueues; nothing here blocks the host
 * except sync(). Semantics every implementation keeps, as CUDA defines them:
 *
 *   - a stream runs what was enqueued on it in order, one task at a time;
 *   - record(s, e) marks event e at this point of stream s; wait(s, e) makes
 *     later work of s wait until the most recent record of e (at the time
 *     wait() was called) has been reached. Waiting on an event never
 *     recorded is a no-op;
 *   - copy() copies `bytes` on stream s: up (host -> device), down (device
 *     -> host) or within the device. Host buffers of copies must stay valid
 *     until sync(): they are the caller's pinned staging buffers;
 *   - launch(s, n) runs node n's kernel with device buffers in/out. A
 *     collective node (op->comm != DG_COMM_NONE) runs on the comm group
 *     set_groups() gave for its axis;
 *   - errors of enqueued work (a kernel's bad input, a failing collective)
 *     surface at the next sync(), naming the node; after the first one, the
 *     rest of the enqueued work is skipped but events still fire, so no
 *     stream waits forever.
 *
 * Streams are numbered 0 .. n_streams - 1: stream 0 (DG_STREAM_COMPUTE)
 * runs the compute, every other stream one kind of communication. The
 * device executor gives each comm group of the step a stream of its own
 * (dg_device_exec.h), so no group's collectives queue behind another's; a
 * device runs its comm streams at a higher priority than stream 0.
 */
#ifndef DG_DEVICE_H
#define DG_DEVICE_H

#include <stddef.h>

#include "dg_comm.h"
#include "dg_op.h"

typedef struct dg_device dg_device;

/* Device allocations are aligned so (CUDA's vectorised loads want 256). */
#define DG_DEVICE_ALIGN 256

/* Events beyond one per node (see prepare). */
#define DG_DEVICE_EXTRA_EVENTS 8

/* Streams a device offers: the compute stream and up to 7 comm streams. */
#define DG_DEVICE_MAX_STREAMS 8

typedef enum dg_copy_dir {
    DG_COPY_UP = 0, /* host -> device */
    DG_COPY_DOWN,   /* device -> host */
    DG_COPY_DEVICE, /* device -> device */
} dg_copy_dir;

typedef struct dg_device_ops {
    const char *name; /* "emulated", "cuda" */

    /* Memory. alloc returns zeroed device memory of `bytes` (aligned to
     * DG_DEVICE_ALIGN); host_alloc pinned host memory for staging copies. */
    int (*alloc)(dg_device *d, size_t bytes, void **ptr, dg_err *err);
    void (*release)(dg_device *d, void *ptr);
    int (*host_alloc)(dg_device *d, size_t bytes, void **ptr, dg_err *err);
    void (*host_release)(dg_device *d, void *ptr);

    /* Size what launches of g's nodes will need (kernel workspaces, the
     * per-node timing, the events): called when a plan is bound, never
     * during a step, so no allocation happens inside one. Afterwards events
     * 0 .. g->n_nodes + DG_DEVICE_EXTRA_EVENTS - 1 exist: event v is node
     * v's, the extra ones the executor's own (inputs uploaded, the comm
     * streams' ends of step). */
    int (*prepare)(dg_device *d, const dg_graph *g, dg_err *err);

    /* Whether op has a kernel on this device (collectives: whether the
     * device can run them). */
    int (*has_kernel)(const dg_device *d, const dg_op_def *op);

    /* Enqueue on stream s (see above). */
    int (*copy)(dg_device *d, int s, void *dst, const void *src, size_t bytes, dg_copy_dir dir,
                dg_err *err);
    int (*launch)(dg_device *d, int s, const dg_graph *g, const dg_node *n, void *const *in,
                  void *const *out, dg_err *err);
    int (*record)(dg_device *d, int s, int event, dg_err *err);
    int (*wait)(dg_device *d, int s, int event, dg_err *err);
    /* Run fn(arg) on a host thread when stream s reaches this point (CUDA:
     * cudaLaunchHostFunc); the stream waits for it. fn must not call the
     * device; it reports failure through *status (0: fine), which sync()
     * returns as the step's error with fn's err. How an op without a device
     * kernel runs under the host-fallback debugging flag. */
    int (*host_call)(dg_device *d, int s, void (*fn)(void *arg), void *arg, int *status, dg_err *fn_err,
                     dg_err *err);

    /* Block until every stream has run everything enqueued; return the first
     * error of that work (DG_OK if none) and clear it. */
    int (*sync)(dg_device *d, dg_err *err);

    /* After sync(): start and end of node v's last launch, in seconds on
     * one clock (the host's for the emulated device, the GPU's for CUDA).
     * Returns 0 when v was not launched since prepare(). */
    int (*node_time)(const dg_device *d, int v, double *t0, double *t1);

    /* The comm group of each parallel axis (borrowed; NULL entries use
     * groups[DG_AXIS_NONE]). Called once, before any launch. */
    void (*set_groups)(dg_device *d, dg_comm *const *groups);

    void (*free)(dg_device *d);
} dg_device_ops;

struct dg_device {
    const dg_device_ops *ops;
    int n_streams; /* 2 .. DG_DEVICE_MAX_STREAMS */
    void *impl;
};

void dg_device_free(dg_device *d);

#endif /* DG_DEVICE_H */
