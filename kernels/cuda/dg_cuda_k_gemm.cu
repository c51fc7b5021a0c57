/* dg_cuda_k_gemm.cu — matmul and the grouped GEMMs through cuBLAS (fp32,
 * CUBLAS_DEFAULT_MATH: no TF32, so results match the CPU's sgemm to fp32
 * rounding). Row-major C = A B is computed as column-major C^T = B^T A^T,
 * so no operand is copied or transposed.
 *
 * Grouped GEMMs read the per-expert row counts (device i32) back to the
 * host, then issue one cublasSgemm per expert on the context's stream. The
 * read-back is a host synchronisation inside the step; a device-side
 * grouped GEMM (cuBLASLt grouped or a persistent kernel reading the counts
 * on the GPU) is the remainder docs/cuda.md names. */
#include "dg_cuda_internal.h"

/* C [M, N] = op(A) [M, K] @ op(B) [K, N], row-major with leading dims. */
static int sgemm_rm(cublasHandle_t h, int ta, int tb, int64_t M, int64_t N, int64_t K,
                    const float *A, int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc) {
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t s = cublasSgemm(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                   (int)N, (int)M, (int)K, &one, B, (int)ldb, A, (int)lda, &zero,
                                   C, (int)ldc);
    return s == CUBLAS_STATUS_SUCCESS ? DG_OK : DG_EINTERNAL;
}

/* inputs a, b; attrs i[0] = ta, i[1] = tb; out [M, N] (dg_op_matmul.h) */
int dg_cuda_k_matmul(DG_CUDA_KARGS) {
    const dg_tensor *a = DG_IN(g, n, 0), *b = DG_IN(g, n, 1);
    int ta = (int)n->attrs.i[0], tb = (int)n->attrs.i[1];
    int64_t ar = dg_rows(a), ac = dg_cols(a), br = dg_rows(b), bc = dg_cols(b);
    int64_t M = ta ? ac : ar, K = ta ? ar : ac, N = tb ? br : bc;
    dg_cuda_ctx *c = dg_cuda_ctx_of(e);
    if (M == 0 || N == 0) return DG_OK;
    if (K == 0)
        return cudaMemsetAsync(out[0], 0, sizeof(float) * (size_t)(M * N), c->stream) == cudaSuccess
                   ? DG_OK
                   : DG_EINTERNAL;
    return sgemm_rm(c->blas, ta, tb, M, N, K, (const float *)in[0], ac, (const float *)in[1], bc,
                    (float *)out[0], N);
}

/* Copy the counts [E] to the host and check them (>= 0, sum <= N). */
static int host_counts(dg_cuda_ctx *c, const void *dcounts, int64_t E, int64_t N, int32_t *hc) {
    if (cudaMemcpyAsync(hc, dcounts, sizeof(int32_t) * (size_t)E, cudaMemcpyDeviceToHost,
                        c->stream) != cudaSuccess ||
        cudaStreamSynchronize(c->stream) != cudaSuccess)
        return DG_EINTERNAL;
    int64_t s = 0;
    for (int64_t i = 0; i < E; i++) {
        if (hc[i] < 0) return DG_EINPUT;
        s += hc[i];
    }
    return s <= N ? DG_OK : DG_EINPUT;
}

/* x [N, K], counts [E], w [E, M, K] (tw) or [E, K, M] -> y [N, M]; rows past
 * sum(counts) are zero (dg_cpu_grouped_gemm.h). */
int dg_cuda_k_grouped_gemm(DG_CUDA_KARGS) {
    const dg_tensor *x = DG_IN(g, n, 0), *w = DG_IN(g, n, 2);
    int tw = (int)n->attrs.i[0];
    int64_t E = w->shape[0], N = x->shape[0], K = x->shape[1], M = tw ? w->shape[1] : w->shape[2];
    dg_cuda_ctx *c = dg_cuda_ctx_of(e);
    int32_t *hc = (int32_t *)dg_malloc(sizeof(int32_t) * (size_t)(E > 0 ? E : 1));
    int st = host_counts(c, in[1], E, N, hc);
    const float *X = (const float *)in[0], *W = (const float *)in[2];
    float *Y = (float *)out[0];
    int64_t off = 0;
    for (int64_t ex = 0; ex < E && st == DG_OK; ex++) {
        int64_t rows = hc[ex];
        if (rows > 0)
            /* y_e [rows, M] = x_e [rows, K] @ op(w_e): w_e is [M, K] (tw) or [K, M] */
            st = sgemm_rm(c->blas, 0, tw, rows, M, K, X + off * K, K, W + ex * M * K, tw ? K : M,
                          Y + off * M, M);
        off += rows;
    }
    if (st == DG_OK && off < N &&
        cudaMemsetAsync(Y + off * M, 0, sizeof(float) * (size_t)((N - off) * M), c->stream) != cudaSuccess)
        st = DG_EINTERNAL;
    dg_free(hc);
    return st;
}

/* a [N, A], b [N, B], counts [E] -> out [E, A, B], out_e = a_e^T b_e
 * (zeros for an expert with no rows). */
int dg_cuda_k_grouped_gemm_wgrad(DG_CUDA_KARGS) {
    const dg_tensor *a = DG_IN(g, n, 0), *b = DG_IN(g, n, 1);
    int64_t E = DG_IN(g, n, 2)->shape[0], N = a->shape[0], A = a->shape[1], B = b->shape[1];
    dg_cuda_ctx *c = dg_cuda_ctx_of(e);
    int32_t *hc = (int32_t *)dg_malloc(sizeof(int32_t) * (size_t)(E > 0 ? E : 1));
    int st = host_counts(c, in[2], E, N, hc);
    const float *Am = (const float *)in[0], *Bm = (const float *)in[1];
    float *O = (float *)out[0];
    int64_t off = 0;
    for (int64_t ex = 0; ex < E && st == DG_OK; ex++) {
        int64_t rows = hc[ex];
        float *oe = O + ex * A * B;
        if (rows > 0)
            st = sgemm_rm(c->blas, 1, 0, A, B, rows, Am + off * A, A, Bm + off * B, B, oe, B);
        else if (cudaMemsetAsync(oe, 0, sizeof(float) * (size_t)(A * B), c->stream) != cudaSuccess)
            st = DG_EINTERNAL;
        off += rows;
    }
    dg_free(hc);
    return st;
}
