/* dg_cuda_internal.h — what the backend's .cu files share (CUDA C++ only).
 *
 * The execution context, launch helpers, and the declarations of every CUDA
 * kernel wrapper that the table (dg_cuda_table.cu) maps op definitions to.
 * A wrapper has the dg_kernel_fn signature (dg_cuda_exec.h states the
 * contract) and returns DG_EINTERNAL when a launch or library call fails;
 * the executor then reads cudaGetLastError for the message.
 */
#ifndef DG_CUDA_INTERNAL_H
#define DG_CUDA_INTERNAL_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The shared element-wise helpers of kernels/cpu compile for both sides. */
#define DG_HD __host__ __device__

/* dagatron's headers are C: their functions have C linkage. */
extern "C" {
#include "dg_cpu_act.h"
#include "dg_cpu_adamw.h"
#include "dg_cpu_attention.h"
#include "dg_cpu_math.h"
#include "dg_cpu_moe.h"
#include "dg_cpu_rope.h"
#include "dg_cuda.h"
#include "dg_cuda_check.h"
#include "dg_cuda_exec.h"
#include "dg_cuda_table.h"
#include "dg_kernel_call.h"
#include "dg_grouped_gemm.h"
#include "dg_moe_loss.h"
#include "dg_op_act.h"
#include "dg_op_adamw.h"
#include "dg_op_attention.h"
#include "dg_op_basic.h"
#include "dg_op_embedding.h"
#include "dg_op_matmul.h"
#include "dg_op_mla.h"
#include "dg_op_norm.h"
#include "dg_op_rope.h"
#include "dg_op_shape.h"
#include "dg_op_xent.h"
#include "dg_ops_util.h"
#include "dg_permute.h"
#include "dg_router.h"
}

struct dg_cuda_ctx {
    int device;
    cudaStream_t stream;
    cublasHandle_t blas;
    int *bad; /* device int: id of the first node that met bad input, -1 if none */
};

#define DG_CUDA_KARGS                                                                      \
    const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,            \
        void *const *out

static inline dg_cuda_ctx *dg_cuda_ctx_of(const dg_exec_env *e) { return (dg_cuda_ctx *)e->device; }

/* The rank's GPU among `count`: its launcher's local rank modulo count
 * (dg_cuda_exec.cu), what dg_cuda_ctx_new and dg_cuda_device_new take for -1. */
int dg_cuda_local_device(int count);

/* Call node n's table kernel (entry en) with env; a failing wrapper's
 * status comes back with err naming the node and CUDA's last error. A node
 * with 16-bit tensors runs through dg_cuda_call_converted. */
int dg_cuda_call_kernel(const dg_cuda_entry *en, const dg_exec_env *env, const dg_graph *g,
                        const dg_node *n, void *const *in, void *const *out, dg_err *err);

/* dg_cuda_half.cu: the call that converts a node's 16-bit tensors around
 * its f32 table kernel, in f32 scratch at the front of env's workspace
 * (dg_kernel_f32_bytes of it, which prepare adds to the node's workspace). */
int dg_cuda_call_converted(const dg_cuda_entry *en, const dg_exec_env *env, const dg_graph *g,
                           const dg_node *n, void *const *in, void *const *out);

/* Blocks of `threads` covering n items, capped for grid-stride loops. */
static inline unsigned dg_cuda_blocks(int64_t n, int threads) {
    int64_t b = (n + threads - 1) / threads;
    if (b < 1) b = 1;
    return (unsigned)(b > 65535 * 16 ? 65535 * 16 : b);
}

/* Status of the launches just made (no synchronisation). */
static inline int dg_cuda_launched(void) {
    return cudaPeekAtLastError() == cudaSuccess ? DG_OK : DG_EINTERNAL;
}

#define DG_CUDA_FOR(i, n)                                                                   \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);              \
         i += (int64_t)gridDim.x * blockDim.x)

/* Record bad input found on the device: the first node id wins. */
__device__ static inline void dg_cuda_flag_bad(int *bad, int node) { atomicCAS(bad, -1, node); }

/* Deterministic block sum in double (fixed tree order); every thread of the
 * block gets the result. blockDim.x must be a power of two <= 1024. */
__device__ static inline double dg_cuda_block_sum(double v, double *sh) {
    sh[threadIdx.x] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    double r = sh[0];
    __syncthreads();
    return r;
}

__device__ static inline float dg_cuda_block_max(float v, float *sh) {
    sh[threadIdx.x] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) sh[threadIdx.x] = fmaxf(sh[threadIdx.x], sh[threadIdx.x + s]);
        __syncthreads();
    }
    float r = sh[0];
    __syncthreads();
    return r;
}

/* ---- kernel wrappers, by file ------------------------------------------------ */
/* dg_cuda_k_basic.cu */
int dg_cuda_k_add(DG_CUDA_KARGS);
int dg_cuda_k_mul(DG_CUDA_KARGS);
int dg_cuda_k_scale(DG_CUDA_KARGS);
int dg_cuda_k_fill(DG_CUDA_KARGS);
int dg_cuda_k_sum(DG_CUDA_KARGS);
int dg_cuda_k_bcast(DG_CUDA_KARGS);
int dg_cuda_k_reshape(DG_CUDA_KARGS);
int dg_cuda_k_swiglu(DG_CUDA_KARGS);
int dg_cuda_k_swiglu_bwd(DG_CUDA_KARGS);
int dg_cuda_k_gelu(DG_CUDA_KARGS);
int dg_cuda_k_gelu_bwd(DG_CUDA_KARGS);
int dg_cuda_k_adamw(DG_CUDA_KARGS);
int dg_cuda_k_embedding(DG_CUDA_KARGS);
int dg_cuda_k_embedding_bwd(DG_CUDA_KARGS);
size_t dg_cuda_ws_embedding_bwd(const dg_graph *g, const dg_node *n);
/* dg_cuda_k_norm.cu */
int dg_cuda_k_rmsnorm(DG_CUDA_KARGS);
int dg_cuda_k_rmsnorm_bwd(DG_CUDA_KARGS);
int dg_cuda_k_layernorm(DG_CUDA_KARGS);
int dg_cuda_k_layernorm_bwd(DG_CUDA_KARGS);
int dg_cuda_k_rope(DG_CUDA_KARGS);
/* dg_cuda_k_mla.cu */
int dg_cuda_k_narrow(DG_CUDA_KARGS);
int dg_cuda_k_pad_last(DG_CUDA_KARGS);
int dg_cuda_k_expand_heads(DG_CUDA_KARGS);
int dg_cuda_k_heads_sum(DG_CUDA_KARGS);
size_t dg_cuda_ws_norm_bwd(const dg_graph *g, const dg_node *n);
/* dg_cuda_k_xent.cu */
int dg_cuda_k_xent(DG_CUDA_KARGS);
int dg_cuda_k_xent_bwd(DG_CUDA_KARGS);
size_t dg_cuda_ws_xent(const dg_graph *g, const dg_node *n);
/* dg_cuda_k_attn.cu */
int dg_cuda_k_attn(DG_CUDA_KARGS);
int dg_cuda_k_attn_bwd(DG_CUDA_KARGS);
size_t dg_cuda_ws_attn_bwd(const dg_graph *g, const dg_node *n);
/* dg_cuda_k_gemm.cu */
int dg_cuda_k_matmul(DG_CUDA_KARGS);
int dg_cuda_k_grouped_gemm(DG_CUDA_KARGS);
int dg_cuda_k_grouped_gemm_wgrad(DG_CUDA_KARGS);
size_t dg_cuda_ws_grouped_gemm(const dg_graph *g, const dg_node *n);
size_t dg_cuda_ws_grouped_gemm_wgrad(const dg_graph *g, const dg_node *n);
/* dg_cuda_k_moe.cu */
int dg_cuda_k_z_loss(DG_CUDA_KARGS);
int dg_cuda_k_z_loss_grad(DG_CUDA_KARGS);
int dg_cuda_k_permute(DG_CUDA_KARGS);
int dg_cuda_k_unpermute(DG_CUDA_KARGS);
int dg_cuda_k_gather(DG_CUDA_KARGS);
int dg_cuda_k_unpermute_probs_grad(DG_CUDA_KARGS);
int dg_cuda_k_router(DG_CUDA_KARGS);
int dg_cuda_k_router_grad(DG_CUDA_KARGS);
size_t dg_cuda_ws_router(const dg_graph *g, const dg_node *n);
/* dg_cuda_k_aux.cu */
int dg_cuda_k_aux_loss(DG_CUDA_KARGS);
int dg_cuda_k_aux_loss_grad(DG_CUDA_KARGS);
size_t dg_cuda_ws_aux(const dg_graph *g, const dg_node *n);
size_t dg_cuda_ws_aux_grad(const dg_graph *g, const dg_node *n);
int dg_cuda_k_seq_counts(DG_CUDA_KARGS);
size_t dg_cuda_ws_seq_counts(const dg_graph *g, const dg_node *n);
size_t dg_cuda_ws_z_loss(const dg_graph *g, const dg_node *n);
size_t dg_cuda_ws_permute(const dg_graph *g, const dg_node *n);
size_t dg_cuda_ws_unpermute(const dg_graph *g, const dg_node *n);
size_t dg_cuda_ws_dprobs(const dg_graph *g, const dg_node *n);

#endif /* DG_CUDA_INTERNAL_H */
