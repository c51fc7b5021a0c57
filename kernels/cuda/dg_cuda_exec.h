/* dg_cuda_exec.h — running graph nodes on a GPU.
 *
 * How CUDA kernels reach the ops: an op definition in ops/ or moe/ carries
 * only its CPU kernel, so the CPU build pays nothing and those rooms never
 * include a CUDA header. kernels/cuda holds the one table from op
 * definition to CUDA kernel (dg_cuda_kernel_for); every CUDA executor
 * consults it and nothing else.
 *
 * A CUDA kernel has the dg_kernel_fn signature with these meanings:
 *   in/out       device pointers, dense row-major, the tensors' shapes and
 *                exactly the CPU kernel's contract (the headers in kernels/cpu);
 *   env->device  the dg_cuda_ctx: the kernel enqueues on its stream and
 *                returns without waiting;
 *   env->workspace  device scratch of dg_cuda_workspace_for() bytes.
 * Input errors found on the device (a token id outside the vocabulary, a
 * target outside [0, V)) cannot return a status without a host sync, so the
 * kernel records the node id in the context's error flag and the executor
 * reports it (DG_EINPUT naming the node) at its next synchronisation.
 */
#ifndef DG_CUDA_EXEC_H
#define DG_CUDA_EXEC_H

#include "dg_buffers.h"
#include "dg_op.h"
#include "dg_stream.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One device's execution context: a stream, a cuBLAS handle, the device
 * error flag. One per rank (and thread driving it). */
typedef struct dg_cuda_ctx dg_cuda_ctx;

/* Select `device` and create its context. DG_EINPUT when no GPU is usable. */
int dg_cuda_ctx_new(int device, dg_cuda_ctx **out, dg_err *err);
void dg_cuda_ctx_free(dg_cuda_ctx *c);

/* The CUDA kernel of op, or NULL when the backend has none (the executor
 * then runs the CPU kernel on host copies, if allowed). */
dg_kernel_fn dg_cuda_kernel_for(const dg_op_def *op);

/* ---- the device executor (serial) --------------------------------------------
 * Runs g node by node, in `order` (NULL: topological), on the context's one
 * stream. Every tensor gets a slot in ONE device allocation (the arena: no
 * reuse yet, 256-byte aligned slots); leaves (inputs, parameters) are copied
 * up from b first, and every tensor is copied back into b at the end, so b
 * reads like dg_run_serial's result. Nodes without a CUDA kernel run their
 * CPU kernel on host copies when host_fallback is set, else fail.
 * Collectives are refused (the NCCL backend is driven directly for now). */
typedef struct dg_cuda_run_opts {
    int host_fallback;     /* 1: ops without a CUDA kernel run on the host */
    const dg_team *team;   /* threads for those CPU kernels (NULL: this thread) */
    int poison;            /* 1: fill the arena with 0xFF bytes first (NaN floats,
                            * -1 ints), so an output element no kernel wrote shows */
} dg_cuda_run_opts;

typedef struct dg_cuda_run_stats {
    int n_device;          /* nodes run by CUDA kernels */
    int n_host;            /* nodes run by their CPU kernel (fallback) */
    size_t arena_bytes;    /* the device allocation */
} dg_cuda_run_stats;

int dg_run_cuda(const dg_graph *g, const int *order, dg_buffers *b, dg_cuda_ctx *ctx,
                const dg_cuda_run_opts *o, dg_cuda_run_stats *stats, dg_err *err);

/* Run node n's CUDA kernel on device copies of its host buffers: inputs up,
 * kernel, outputs down, synchronously (an output whose host buffer is one of
 * the inputs' shares that input's device slot, so in-place stays in place).
 * poison = 1 fills the output slots with 0xFF bytes first (NaN floats, -1
 * ints), so an element the kernel did not write comes back visibly wrong.
 * DG_EINPUT when op has no CUDA kernel or the kernel flagged bad input. The
 * op tests compare this against the CPU kernel on the same inputs. */
int dg_cuda_run_node(dg_cuda_ctx *c, const dg_graph *g, const dg_node *n, void *const *in,
                     void *const *out, int poison, dg_err *err);


#ifdef __cplusplus
}
#endif

#endif /* DG_CUDA_EXEC_H */
