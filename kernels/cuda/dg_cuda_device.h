/* dg_cuda_device.h — the CUDA implementation of the device interface
 * (sched/dg_device.h states the semantics; this says how CUDA keeps them).
 *
 * One GPU, DG_DEVICE_MAX_STREAMS CUDA streams (non-blocking, so the legacy
 * default stream never serialises them): stream 0 computes, each other one
 * carries one comm group's collectives (the executor's choice). The comm
 * streams are made at the device's highest stream priority and the compute
 * stream at its lowest
 * (cudaDeviceGetStreamPriorityRange), so a collective's kernels are
 * scheduled ahead of queued compute. Each stream has what a kernel of the
 * op -> CUDA kernel table (dg_cuda_table.h) expects to find through
 * dg_exec_env.device: a dg_cuda_ctx with that stream, a cuBLAS handle bound
 * to it (fp32 math, no TF32; a 32 MiB cuBLAS workspace of its own, so
 * cuBLAS never allocates during a step) and the device's error flag, which
 * the streams share (kernels set it with atomicCAS: the first node wins).
 *
 *   alloc / release        cudaMalloc (256-byte aligned) zeroed on the
 *                          compute stream before it returns / cudaFree
 *   host_alloc / release   cudaMallocHost / cudaFreeHost (pinned)
 *   prepare(g)             sizes one kernel workspace per stream (the max
 *                          over g's nodes, as the device does not know which
 *                          stream the plan puts a node on), the pinned
 *                          buffer all-to-all-v counts come down through,
 *                          two timing events per node and the sync events
 *                          (timing disabled). The only cudaMalloc outside
 *                          alloc: nothing is allocated during a step.
 *   copy                   cudaMemcpyAsync on the stream
 *   record / wait          cudaEventRecord / cudaStreamWaitEvent
 *   launch, compute op     node v's start event, the table's kernel on the
 *                          stream's context and workspace, its end event
 *                          (nodes of the graph last prepared, the same
 *                          dg_graph: any other is refused, DG_EINTERNAL)
 *   launch, collective     the same events around the node lowered onto
 *                          device memory over groups[n->group]: a NCCL comm
 *                          (dg_cuda_nccl.h) is bound to the stream for the
 *                          call, so NCCL runs in the stream's order; a comm
 *                          of one rank that is not NCCL (the "self"
 *                          backend) is done with device copies; any other
 *                          comm is refused (its buffers would be host
 *                          memory). all_to_all_v needs its counts on the
 *                          host: they come down through the pinned buffer
 *                          and the stream is synchronised (Megatron's
 *                          dispatcher syncs there too).
 *   sync                   waits for each stream (polling NCCL for
 *                          asynchronous errors while a comm is in use),
 *                          then reads and clears the error flag: DG_EINPUT
 *                          naming the node that met bad input
 *   node_time              cudaEventElapsedTime from a reference event,
 *                          recorded at the first launch after prepare, to
 *                          the node's start and end events, in seconds (a
 *                          node another stream ran before that launch
 *                          reached the GPU reads negative: one clock still)
 *
 * What CUDA does not give: work enqueued after a kernel met bad input still
 * runs (on whatever that kernel left), its results to be discarded when
 * sync reports the error; events fire as always. A launch that fails to
 * enqueue (a kernel wrapper's error, a bad count of all_to_all_v) returns
 * its error at once, naming the node.
 *
 * One host thread drives a device at a time. Status: compiled (nvcc 13,
 * sm_90, -Werror), not yet run on a GPU (docs/cuda.md).
 */
#ifndef DG_CUDA_DEVICE_H
#define DG_CUDA_DEVICE_H

#include "dg_device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A device on GPU `gpu` (< 0: the rank's local GPU, its launcher's local
 * rank modulo the device count, as dg_cuda_ctx_new chooses). Returns NULL
 * with a one-line reason in err when no GPU is usable (DG_EINPUT's "no
 * usable GPU", or "this build has no CUDA support" without nvcc), or with
 * the failing CUDA/cuBLAS call and file:line. Free with dg_device_free. */
dg_device *dg_cuda_device_new(int gpu, dg_err *err);

#ifdef __cplusplus
}
#endif

#endif /* DG_CUDA_DEVICE_H */
