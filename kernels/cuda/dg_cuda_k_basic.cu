/* dg_cuda_k_basic.cu — element-wise ops, activations, AdamW, embedding.
 * Shapes and semantics are those of the CPU kernels named in each comment;
 * the per-element math is the shared DG_HD helpers, so the CPU tests cover
 * it. fp32 storage, as the graph's tensors are. */
#include "dg_cuda_internal.h"

#define TPB 256

/* y, a, b: [n] */
__global__ static void add_kernel(const float *a, const float *b, float *y, int64_t n) {
    DG_CUDA_FOR(i, n) y[i] = a[i] + b[i];
}
__global__ static void mul_kernel(const float *a, const float *b, float *y, int64_t n) {
    DG_CUDA_FOR(i, n) y[i] = a[i] * b[i];
}
__global__ static void scale_kernel(const float *x, float alpha, float *y, int64_t n) {
    DG_CUDA_FOR(i, n) y[i] = alpha * x[i];
}
/* y[n] = alpha * (*x) (x: a device scalar; NULL: y = alpha) */
__global__ static void fill_kernel(const float *x, float alpha, float *y, int64_t n) {
    float v = x ? alpha * *x : alpha;
    DG_CUDA_FOR(i, n) y[i] = v;
}
/* out[0] = sum(x[n]) (/ n when mean): one block, double, fixed tree order. */
__global__ static void sum_kernel(const float *x, int64_t n, int mean, float *out) {
    __shared__ double sh[1024];
    double s = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += x[i];
    s = dg_cuda_block_sum(s, sh);
    if (threadIdx.x == 0) out[0] = (float)(mean ? s / (double)n : s);
}

static int64_t numel_out(const dg_graph *g, const dg_node *n) { return dg_tensor_numel(DG_OUT(g, n, 0)); }
#define GRID(n) dg_cuda_blocks((n), TPB), TPB, 0, dg_cuda_ctx_of(e)->stream

int dg_cuda_k_add(DG_CUDA_KARGS) {
    int64_t c = numel_out(g, n);
    add_kernel<<<GRID(c)>>>((const float *)in[0], (const float *)in[1], (float *)out[0], c);
    return dg_cuda_launched();
}
int dg_cuda_k_mul(DG_CUDA_KARGS) {
    int64_t c = numel_out(g, n);
    mul_kernel<<<GRID(c)>>>((const float *)in[0], (const float *)in[1], (float *)out[0], c);
    return dg_cuda_launched();
}
int dg_cuda_k_scale(DG_CUDA_KARGS) {
    int64_t c = numel_out(g, n);
    scale_kernel<<<GRID(c)>>>((const float *)in[0], (float)n->attrs.f[0], (float *)out[0], c);
    return dg_cuda_launched();
}
int dg_cuda_k_fill(DG_CUDA_KARGS) {
    (void)in;
    int64_t c = numel_out(g, n);
    fill_kernel<<<GRID(c)>>>(NULL, (float)n->attrs.f[0], (float *)out[0], c);
    return dg_cuda_launched();
}
int dg_cuda_k_bcast(DG_CUDA_KARGS) {
    int64_t c = numel_out(g, n);
    fill_kernel<<<GRID(c)>>>((const float *)in[0], (float)n->attrs.f[0], (float *)out[0], c);
    return dg_cuda_launched();
}
int dg_cuda_k_sum(DG_CUDA_KARGS) {
    int64_t c = dg_tensor_numel(DG_IN(g, n, 0));
    sum_kernel<<<1, 1024, 0, dg_cuda_ctx_of(e)->stream>>>((const float *)in[0], c,
                                                          (int)n->attrs.i[0], (float *)out[0]);
    return dg_cuda_launched();
}
int dg_cuda_k_reshape(DG_CUDA_KARGS) {
    if (in[0] == out[0]) return DG_OK;
    size_t bytes = dg_tensor_bytes(DG_IN(g, n, 0));
    return cudaMemcpyAsync(out[0], in[0], bytes, cudaMemcpyDeviceToDevice,
                           dg_cuda_ctx_of(e)->stream) == cudaSuccess
               ? DG_OK
               : DG_EINTERNAL;
}

/* ---- activations (dg_cpu_act.h) ---------------------------------------------------- */

/* x [rows, 2F] -> y [rows, F] */
__global__ static void swiglu_kernel(const float *x, float *y, int64_t rows, int64_t F) {
    DG_CUDA_FOR(i, rows * F) {
        int64_t r = i / F, j = i % F;
        y[i] = dg_swiglu1(x[r * 2 * F + j], x[r * 2 * F + F + j]);
    }
}
/* dy [rows, F], x [rows, 2F] -> dx [rows, 2F] */
__global__ static void swiglu_bwd_kernel(const float *dy, const float *x, float *dx, int64_t rows,
                                         int64_t F) {
    DG_CUDA_FOR(i, rows * F) {
        int64_t r = i / F, j = i % F;
        float da, db;
        dg_swiglu1_grad(x[r * 2 * F + j], x[r * 2 * F + F + j], dy[i], &da, &db);
        dx[r * 2 * F + j] = da;
        dx[r * 2 * F + F + j] = db;
    }
}
__global__ static void gelu_kernel(const float *x, float *y, int64_t n) {
    DG_CUDA_FOR(i, n) y[i] = dg_gelu(x[i]);
}
__global__ static void gelu_bwd_kernel(const float *dy, const float *x, float *dx, int64_t n) {
    DG_CUDA_FOR(i, n) dx[i] = dy[i] * dg_gelu_grad(x[i]);
}

int dg_cuda_k_swiglu(DG_CUDA_KARGS) {
    const dg_tensor *x = DG_IN(g, n, 0);
    int64_t rows = dg_rows(x), F = dg_cols(x) / 2;
    swiglu_kernel<<<GRID(rows * F)>>>((const float *)in[0], (float *)out[0], rows, F);
    return dg_cuda_launched();
}
int dg_cuda_k_swiglu_bwd(DG_CUDA_KARGS) {
    const dg_tensor *x = DG_IN(g, n, 1);
    int64_t rows = dg_rows(x), F = dg_cols(x) / 2;
    swiglu_bwd_kernel<<<GRID(rows * F)>>>((const float *)in[0], (const float *)in[1],
                                          (float *)out[0], rows, F);
    return dg_cuda_launched();
}
int dg_cuda_k_gelu(DG_CUDA_KARGS) {
    int64_t c = dg_tensor_numel(DG_IN(g, n, 0));
    gelu_kernel<<<GRID(c)>>>((const float *)in[0], (float *)out[0], c);
    return dg_cuda_launched();
}
int dg_cuda_k_gelu_bwd(DG_CUDA_KARGS) {
    int64_t c = dg_tensor_numel(DG_IN(g, n, 1));
    gelu_bwd_kernel<<<GRID(c)>>>((const float *)in[0], (const float *)in[1], (float *)out[0], c);
    return dg_cuda_launched();
}

/* ---- AdamW (dg_cpu_adamw.h): p, g, m, v -> p', m', v', all [n] ---------------------- */

__global__ static void adamw_kernel(dg_adamw_coef c, const float *p, const float *gr, const float *m,
                                    const float *v, float *po, float *mo, float *vo, int64_t n) {
    DG_CUDA_FOR(i, n) dg_adamw1(&c, p[i], gr[i], m[i], v[i], &po[i], &mo[i], &vo[i]);
}

int dg_cuda_k_adamw(DG_CUDA_KARGS) {
    dg_adamw_hparams h = dg_adamw_hparams_of(n);
    dg_adamw_coef c = dg_adamw_coef_make(&h);
    int64_t cnt = dg_tensor_numel(DG_IN(g, n, 0));
    adamw_kernel<<<GRID(cnt)>>>(c, (const float *)in[0], (const float *)in[1], (const float *)in[2],
                                (const float *)in[3], (float *)out[0], (float *)out[1],
                                (float *)out[2], cnt);
    return dg_cuda_launched();
}

/* ---- embedding (dg_cpu_embedding.h) --------------------------------------------------
 * table [V, H], tokens [N] i32, out / dout [N, H], dtable [V, H]. */

__global__ static void embedding_kernel(const float *table, const int32_t *tok, float *out, int64_t N,
                                        int64_t V, int64_t H, int *bad, int node) {
    DG_CUDA_FOR(i, N * H) {
        int32_t t = tok[i / H];
        if (t < 0 || t >= V) {
            dg_cuda_flag_bad(bad, node);
            out[i] = 0.0f;
        } else {
            out[i] = table[(int64_t)t * H + i % H];
        }
    }
}

/* One thread per column h adds the tokens' rows in token order: the same
 * order as the CPU kernel, no atomics, bitwise reproducible. dtable must be
 * zeroed first. */
__global__ static void embedding_bwd_kernel(const float *dout, const int32_t *tok, float *dtable,
                                            int64_t N, int64_t V, int64_t H, int *bad, int node) {
    DG_CUDA_FOR(h, H) {
        for (int64_t i = 0; i < N; i++) {
            int32_t t = tok[i];
            if (t < 0 || t >= V) {
                if (h == 0) dg_cuda_flag_bad(bad, node);
                continue;
            }
            dtable[(int64_t)t * H + h] += dout[i * H + h];
        }
    }
}

int dg_cuda_k_embedding(DG_CUDA_KARGS) {
    const dg_tensor *tb = DG_IN(g, n, 0);
    int64_t N = dg_tensor_numel(DG_IN(g, n, 1)), V = tb->shape[0], H = tb->shape[1];
    embedding_kernel<<<GRID(N * H)>>>((const float *)in[0], (const int32_t *)in[1], (float *)out[0],
                                      N, V, H, dg_cuda_ctx_of(e)->bad, n->id);
    return dg_cuda_launched();
}
int dg_cuda_k_embedding_bwd(DG_CUDA_KARGS) {
    const dg_tensor *d = DG_IN(g, n, 0);
    int64_t N = dg_rows(d), H = dg_cols(d), V = n->attrs.i[0];
    cudaStream_t st = dg_cuda_ctx_of(e)->stream;
    if (cudaMemsetAsync(out[0], 0, sizeof(float) * (size_t)(V * H), st) != cudaSuccess)
        return DG_EINTERNAL;
    embedding_bwd_kernel<<<GRID(H)>>>((const float *)in[0], (const int32_t *)in[1], (float *)out[0],
                                      N, V, H, dg_cuda_ctx_of(e)->bad, n->id);
    return dg_cuda_launched();
}
