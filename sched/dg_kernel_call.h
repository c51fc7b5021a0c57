/* dg_kernel_call.h — how every CPU executor calls an op's kernel.
 *
 * An op's CPU kernel computes on f32 buffers. A graph under --bf16/--fp16
 * stores activations in 16 bits (dg_op_infer, graph/dg_op.h), so before a
 * node whose op is not `any_dtype` runs, each 16-bit input is converted to
 * f32 in scratch, the kernel writes f32 outputs in scratch, and each 16-bit
 * output is rounded into its buffer (kernels/cpu/dg_cpu_half.h): "convert on
 * load and store, compute in f32", exactly the values of an f32 kernel on
 * the same (16-bit) inputs, rounded once. f32, integer and any_dtype
 * nodes run on their buffers as they are.
 *
 * The scratch is the caller's (one per thread that calls kernels), grown to
 * the largest node's need and kept: no allocation per call once warm.
 */
#ifndef DG_KERNEL_CALL_H
#define DG_KERNEL_CALL_H

#include "dg_op.h"

typedef struct dg_kernel_scratch {
    void *buf;
    size_t bytes;
} dg_kernel_scratch;

/* Run n's CPU kernel (n->op->kernel, non-NULL) on in/out with env. Returns
 * the kernel's status. */
int dg_kernel_call(const dg_exec_env *env, const dg_graph *g, const dg_node *n, void *const *in,
                   void *const *out, dg_kernel_scratch *s);

/* Whether dg_kernel_call converts around n (16-bit tensors, op not any_dtype). */
int dg_kernel_converts(const dg_graph *g, const dg_node *n);

/* The f32 scratch of a converted node, laid out once for every backend:
 * returns its bytes (0 when n is not converted), each 16-bit tensor's slot
 * 256-byte aligned, inputs then outputs. With base given, fin/fout get each
 * input's and output's buffer for the f32 kernel: its slot in base for a
 * 16-bit tensor, in[i] / out[j] itself otherwise (the CUDA side carves its
 * device workspace the same way: kernels/cuda/dg_cuda_half.cu). */
size_t dg_kernel_f32_views(const dg_graph *g, const dg_node *n, void *base, void *const *in, void *const *out,
                           void **fin, void **fout);
static inline size_t dg_kernel_f32_bytes(const dg_graph *g, const dg_node *n) {
    return dg_kernel_f32_views(g, n, NULL, NULL, NULL, NULL, NULL);
}

void dg_kernel_scratch_free(dg_kernel_scratch *s);

#endif /* DG_KERNEL_CALL_H */
