/* dg_cuda_k_mla.cu — multi-latent attention's shape ops (ops/dg_op_mla.h):
 * narrow, pad_last, expand_heads, heads_sum, with the CPU kernels' layouts.
 * Copies, and heads_sum adds the heads in the CPU's order (h = 0, 1, ..),
 * so every output is the CPU's bit for bit. */
#include "dg_cuda_internal.h"

#define TPB 256
#define GRID(n) dg_cuda_blocks((n), TPB), TPB, 0, dg_cuda_ctx_of(e)->stream

/* y [rows, len] = x [rows, N][:, a : a + len] */
__global__ static void narrow_kernel(const float *x, float *y, int64_t rows, int64_t N, int64_t a, int64_t len) {
    DG_CUDA_FOR(i, rows * len) y[i] = x[(i / len) * N + a + i % len];
}

/* y [rows, T]: x [rows, len] at columns a .., zeros elsewhere */
__global__ static void pad_kernel(const float *x, float *y, int64_t rows, int64_t len, int64_t a, int64_t T) {
    DG_CUDA_FOR(i, rows * T) {
        int64_t c = i % T - a;
        y[i] = c >= 0 && c < len ? x[(i / T) * len + c] : 0.0f;
    }
}

/* y [T, N, P] = x [T, 1, P] on every head */
__global__ static void expand_kernel(const float *x, float *y, int64_t T, int64_t N, int64_t P) {
    DG_CUDA_FOR(i, T * N * P) y[i] = x[(i / (N * P)) * P + i % P];
}

/* y [T, 1, P] = sum over h of x [T, N, P], h in order */
__global__ static void heads_sum_kernel(const float *x, float *y, int64_t T, int64_t N, int64_t P) {
    DG_CUDA_FOR(i, T * P) {
        int64_t t = i / P, p = i % P;
        float acc = 0.0f;
        for (int64_t h = 0; h < N; h++) acc += x[(t * N + h) * P + p];
        y[i] = acc;
    }
}

static int64_t rows_of(const dg_tensor *t) {
    int64_t r = 1;
    for (int d = 0; d + 1 < t->ndim; d++) r *= t->shape[d];
    return r;
}

int dg_cuda_k_narrow(DG_CUDA_KARGS) {
    const dg_tensor *x = DG_IN(g, n, 0);
    int64_t rows = rows_of(x), len = n->attrs.i[1];
    narrow_kernel<<<GRID(rows * len)>>>((const float *)in[0], (float *)out[0], rows, x->shape[x->ndim - 1],
                                        n->attrs.i[0], len);
    return dg_cuda_launched();
}

int dg_cuda_k_pad_last(DG_CUDA_KARGS) {
    const dg_tensor *x = DG_IN(g, n, 0);
    int64_t rows = rows_of(x), T = n->attrs.i[1];
    pad_kernel<<<GRID(rows * T)>>>((const float *)in[0], (float *)out[0], rows, x->shape[x->ndim - 1],
                                   n->attrs.i[0], T);
    return dg_cuda_launched();
}

int dg_cuda_k_expand_heads(DG_CUDA_KARGS) {
    const dg_tensor *y = DG_OUT(g, n, 0);
    int64_t T = y->shape[0] * y->shape[1], N = y->shape[2], P = y->shape[3];
    expand_kernel<<<GRID(T * N * P)>>>((const float *)in[0], (float *)out[0], T, N, P);
    return dg_cuda_launched();
}

int dg_cuda_k_heads_sum(DG_CUDA_KARGS) {
    const dg_tensor *x = DG_IN(g, n, 0);
    int64_t T = x->shape[0] * x->shape[1], N = x->shape[2], P = x->shape[3];
    heads_sum_kernel<<<GRID(T * P)>>>((const float *)in[0], (float *)out[0], T, N, P);
    return dg_cuda_launched();
}
