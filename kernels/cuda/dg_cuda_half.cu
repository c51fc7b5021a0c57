/* dg_cuda_half.cu — 16-bit tensors around the f32 table kernels: the CUDA
 * side of sched/dg_kernel_call.h.
 *
 * A table kernel computes on f32 buffers. For a node with bf16/fp16
 * tensors whose op is not any_dtype (dg_kernel_converts), each 16-bit
 * input is widened into f32 scratch carved from the front of the stream's
 * workspace (dg_kernel_f32_views: the CPU's layout), the kernel writes f32 outputs there, and each 16-bit output is
 * rounded into its buffer with dg_cpu_half.h's code: the bits the CPU's
 * dg_kernel_call gives for the same f32 results. Everything is queued on
 * the node's stream; nothing synchronises. */
#include "dg_cuda_internal.h"

extern "C" {
#include "dg_cpu_half.h"
}

#define TPB 256

__global__ static void widen_kernel(const uint16_t *x, float *y, int64_t n, int fp16) {
    DG_CUDA_FOR(i, n) y[i] = dg_half_value(x[i], fp16);
}

__global__ static void narrow_kernel(const float *x, uint16_t *y, int64_t n, int fp16) {
    DG_CUDA_FOR(i, n) y[i] = dg_half_bits(x[i], fp16);
}

int dg_cuda_call_converted(const dg_cuda_entry *en, const dg_exec_env *env, const dg_graph *g,
                           const dg_node *n, void *const *in, void *const *out) {
    size_t conv = dg_kernel_f32_bytes(g, n);
    if (conv > env->workspace_bytes) return DG_EINTERNAL; /* prepare sized the workspace without it */
    cudaStream_t s = dg_cuda_ctx_of(env)->stream;
    void *fin[DG_MAX_INPUTS], *fout[DG_MAX_OUTPUTS];
    dg_kernel_f32_views(g, n, env->workspace, in, out, fin, fout);
    for (int i = 0; i < n->n_in; i++) {
        const dg_tensor *t = &g->tensors[n->in[i]];
        if (fin[i] == in[i]) continue;
        int64_t c = dg_tensor_numel(t);
        widen_kernel<<<dg_cuda_blocks(c, TPB), TPB, 0, s>>>((const uint16_t *)in[i], (float *)fin[i], c,
                                                              t->dtype == DG_F16);
    }
    dg_exec_env e2 = *env;
    e2.workspace = (char *)env->workspace + conv;
    e2.workspace_bytes = env->workspace_bytes - conv;
    int st = en->fn(&e2, g, n, fin, fout);
    for (int j = 0; j < n->n_out && st == DG_OK; j++) {
        const dg_tensor *t = &g->tensors[n->out[j]];
        if (fout[j] == out[j]) continue;
        int64_t c = dg_tensor_numel(t);
        narrow_kernel<<<dg_cuda_blocks(c, TPB), TPB, 0, s>>>((const float *)fout[j], (uint16_t *)out[j], c,
                                                               t->dtype == DG_F16);
    }
    return st == DG_OK ? dg_cuda_launched() : st;
}
