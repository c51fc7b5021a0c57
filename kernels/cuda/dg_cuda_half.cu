/* dg_cuda_half.cu — 16-bit tensors around the f32 table kernels: the CUDA
 * side of sched/dg_kernel_call.h.
 *
 * A table kernel computes on f32 buffers. For a node with bf16/fp16
 * tensors whose op is not any_dtype (dg_kernel_converts), each 16-bit
 * input is widened into f32 scratch carved from the front of the stream's
 * workspace, the kernel writes f32 outputs there, and each 16-bit output is
 * rounded into its buffer with dg_cpu_half.h's code: the bits the CPU's
 * dg_kernel_call gives for the same f32 results. Everything is queued on
 * the node's stream; nothing synchronises. */
#include "dg_cuda_internal.h"

extern "C" {
#include "dg_cpu_half.h"
#include "dg_kernel_call.h"
}

#define TPB 256

static size_t f32_bytes(const dg_graph *g, int t) {
    size_t b = (size_t)dg_tensor_numel(&g->tensors[t]) * sizeof(float);
    return (b + 255) & ~(size_t)255;
}

size_t dg_cuda_convert_bytes(const dg_graph *g, const dg_node *n) {
    if (!dg_kernel_converts(g, n)) return 0;
    size_t b = 0;
    for (int i = 0; i < n->n_in; i++)
        if (dg_dtype_is_16(g->tensors[n->in[i]].dtype)) b += f32_bytes(g, n->in[i]);
    for (int j = 0; j < n->n_out; j++)
        if (dg_dtype_is_16(g->tensors[n->out[j]].dtype)) b += f32_bytes(g, n->out[j]);
    return b;
}

__global__ static void widen_kernel(const uint16_t *x, float *y, int64_t n, int fp16) {
    DG_CUDA_FOR(i, n) y[i] = dg_half_value(x[i], fp16);
}

__global__ static void narrow_kernel(const float *x, uint16_t *y, int64_t n, int fp16) {
    DG_CUDA_FOR(i, n) y[i] = dg_half_bits(x[i], fp16);
}

int dg_cuda_call_converted(const dg_cuda_entry *en, const dg_exec_env *env, const dg_graph *g,
                           const dg_node *n, void *const *in, void *const *out) {
    size_t conv = dg_cuda_convert_bytes(g, n);
    if (conv > env->workspace_bytes) return DG_EINTERNAL; /* prepare sized the workspace without it */
    cudaStream_t s = dg_cuda_ctx_of(env)->stream;
    char *p = (char *)env->workspace;
    void *fin[DG_MAX_INPUTS], *fout[DG_MAX_OUTPUTS];
    for (int i = 0; i < n->n_in; i++) {
        const dg_tensor *t = &g->tensors[n->in[i]];
        fin[i] = in[i];
        if (!dg_dtype_is_16(t->dtype)) continue;
        int64_t c = dg_tensor_numel(t);
        fin[i] = p;
        widen_kernel<<<dg_cuda_blocks(c, TPB), TPB, 0, s>>>((const uint16_t *)in[i], (float *)p, c,
                                                              t->dtype == DG_F16);
        p += f32_bytes(g, n->in[i]);
    }
    for (int j = 0; j < n->n_out; j++) {
        fout[j] = out[j];
        if (!dg_dtype_is_16(g->tensors[n->out[j]].dtype)) continue;
        fout[j] = p;
        p += f32_bytes(g, n->out[j]);
    }
    dg_exec_env e2 = *env;
    e2.workspace = (char *)env->workspace + conv;
    e2.workspace_bytes = env->workspace_bytes - conv;
    int st = en->fn(&e2, g, n, fin, fout);
    for (int j = 0; j < n->n_out && st == DG_OK; j++) {
        const dg_tensor *t = &g->tensors[n->out[j]];
        if (!dg_dtype_is_16(t->dtype)) continue;
        int64_t c = dg_tensor_numel(t);
        narrow_kernel<<<dg_cuda_blocks(c, TPB), TPB, 0, s>>>((const float *)fout[j], (uint16_t *)out[j], c,
                                                               t->dtype == DG_F16);
    }
    return st == DG_OK ? dg_cuda_launched() : st;
}
