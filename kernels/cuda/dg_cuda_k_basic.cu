/* dg_cuda_k_basic.cu — element-wise ops, activations, AdamW, embedding.
 * Shapes and semantics are those of the CPU kernels named in each comment;
 * the per-element math is the shared DG_HD helpers, so the CPU tests cover
 * it. fp32 storage, as the graph's tensors are. The embedding's backward
 * is a two-pass reduction over token chunks (its comment says how). */
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

/* The backward adds each token's gradient row into its vocabulary row, in
 * token order, in fp32: the CPU kernel's sum, bitwise. One thread per
 * column over all tokens leaves the GPU idle and atomics would make the
 * order vary, so it is two passes over chunks of EC tokens:
 *  1. one block per chunk ranks the chunk's tokens by (vocabulary row,
 *     position) in shared memory and writes the positions in that order to
 *     perm [N]; the first occurrence of each row v records the chunk's run
 *     of v, (start in the chunk, count), at run[v, chunk] (zeroed before:
 *     count 0 = v absent);
 *  2. one block per (vocabulary row v, column tile) walks v's runs in chunk
 *     order, positions in order within each, adding the rows of dout; a row
 *     no token hit gets zeros.
 * A token outside [0, V) flags the node and is never added. */
#define EC 1024   /* tokens per chunk */
#define EC_T 256  /* pass-1 threads, EC / EC_T tokens each */
#define EB_T 128  /* pass-2 columns per block */

__global__ static void embedding_rank_kernel(const int32_t *tok, int64_t N, int64_t V, int32_t *perm,
                                             int2 *run, int64_t nchunks, int *bad, int node) {
    __shared__ int32_t st[EC];
    const int64_t c = blockIdx.x, base = c * EC;
    const int nc = (int)min((int64_t)EC, N - base);
    for (int p = threadIdx.x; p < nc; p += blockDim.x) st[p] = tok[base + p];
    __syncthreads();
    for (int p = threadIdx.x; p < nc; p += blockDim.x) {
        const int32_t v = st[p];
        int less = 0, before = 0, same = 0;
        for (int q = 0; q < nc; q++) {
            int32_t u = st[q];
            less += u < v;
            before += u == v && q < p;
            same += u == v;
        }
        perm[base + less + before] = (int32_t)(base + p);
        if (v < 0 || v >= V) {
            if (before == 0) dg_cuda_flag_bad(bad, node);
        } else if (before == 0) {
            run[(int64_t)v * nchunks + c] = make_int2(less, same);
        }
    }
}

__global__ static void embedding_sum_kernel(const float *dout, const int32_t *perm, const int2 *run,
                                            float *dtable, int64_t H, int64_t nchunks) {
    const int64_t v = blockIdx.x, h = (int64_t)blockIdx.y * blockDim.x + threadIdx.x;
    if (h >= H) return;
    float acc = 0.0f;
    for (int64_t c = 0; c < nchunks; c++) {
        const int2 r = run[v * nchunks + c];
        const int32_t *pc = perm + c * EC + r.x;
        for (int k = 0; k < r.y; k++) acc += dout[(int64_t)pc[k] * H + h];
    }
    dtable[v * H + h] = acc;
}

static int64_t emb_chunks(int64_t N) { return (N + EC - 1) / EC; }
/* ws: run [V, chunks] int2, then (from a 256-byte boundary) perm [N] i32. */
static size_t emb_run_bytes(int64_t V, int64_t N) {
    return (sizeof(int2) * (size_t)(V * emb_chunks(N)) + 255) / 256 * 256;
}

size_t dg_cuda_ws_embedding_bwd(const dg_graph *g, const dg_node *n) {
    int64_t N = dg_rows(DG_IN(g, n, 0)), V = n->attrs.i[0];
    return emb_run_bytes(V, N) + sizeof(int32_t) * (size_t)N;
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
    int64_t N = dg_rows(d), H = dg_cols(d), V = n->attrs.i[0], nch = emb_chunks(N);
    if (e->workspace_bytes < dg_cuda_ws_embedding_bwd(g, n)) return DG_EINTERNAL;
    if (V == 0 || H == 0) return DG_OK;
    dg_cuda_ctx *c = dg_cuda_ctx_of(e);
    int2 *run = (int2 *)e->workspace;
    int32_t *perm = (int32_t *)((char *)e->workspace + emb_run_bytes(V, N));
    if (nch > 0) {
        if (cudaMemsetAsync(run, 0, sizeof(int2) * (size_t)(V * nch), c->stream) != cudaSuccess)
            return DG_EINTERNAL;
        embedding_rank_kernel<<<(unsigned)nch, EC_T, 0, c->stream>>>((const int32_t *)in[1], N, V, perm,
                                                                      run, nch, c->bad, n->id);
    }
    dim3 grid((unsigned)V, (unsigned)((H + EB_T - 1) / EB_T));
    embedding_sum_kernel<<<grid, EB_T, 0, c->stream>>>((const float *)in[0], perm, run,
                                                        (float *)out[0], H, nch);
    return dg_cuda_launched();
}
