/* dg_cuda_device_comm.h — collective nodes on device memory, for the CUDA
 * device (dg_cuda_device.h); internal to kernels/cuda.
 *
 * sched/dg_comm.c's dg_comm_run_node lowers a node onto the flat calls of a
 * comm backend, but around them it touches the buffers on the host (the
 * rank-major permutations, copy/scatter_to_group, the staging copy of a
 * send, the zeroed tail of all_to_all_v, the counts it reads), so it cannot
 * take device pointers. This is the same lowering with those steps done on
 * the stream: permutations as cudaMemcpy2DAsync through a device scratch,
 * copies and zeroing as cudaMemcpyAsync / cudaMemsetAsync, sends straight
 * from the tensor (NCCL reads it in stream order: no staging copy, and the
 * node ends when the send does). The data layouts are dg_comm.h's.
 */
#ifndef DG_CUDA_DEVICE_COMM_H
#define DG_CUDA_DEVICE_COMM_H

#include <cuda_runtime.h>

#include "dg_comm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Device scratch bytes node n's lowering needs (0 for most: only a gather,
 * scatter or all-to-all over a dimension that is not the outermost
 * permutes). */
size_t dg_cuda_comm_scratch(const dg_graph *g, const dg_node *n);

/* int32 counts node n needs on the host (all_to_all_v: both count tensors;
 * 0 for the others). */
int64_t dg_cuda_comm_host_counts(const dg_graph *g, const dg_node *n);

/* Enqueue collective node n over comm c on stream s: a NCCL comm is bound
 * to s for the call; a comm of one rank that is not NCCL is done with
 * device copies; any other is refused (DG_EINPUT). scratch holds
 * dg_cuda_comm_scratch(g, n) bytes; counts (pinned) holds
 * dg_cuda_comm_host_counts(g, n) ints. Only all_to_all_v waits for the
 * stream (for its counts). Errors name the node. */
int dg_cuda_comm_run_node(dg_comm *c, cudaStream_t s, void *scratch, size_t scratch_bytes,
                          int32_t *counts, int64_t n_counts, const dg_graph *g, const dg_node *n,
                          void *const *in, void *const *out, dg_err *err);

#ifdef __cplusplus
}
#endif

#endif /* DG_CUDA_DEVICE_COMM_H */
