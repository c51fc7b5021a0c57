/* dg_cuda_k_attn_unfused.cu — unfused attention's kernels
 * (ops/dg_op_attn_unfused.h, kernels/cpu/dg_cpu_attn_unfused.h): the three
 * products through cuBLAS (fp32, no TF32, as dg_cuda_k_gemm.cu) and the
 * row softmax and its backward, a block per row with the CPU's arithmetic.
 *
 * Products. Head h of sample bi in a [B, S, H, D] tensor is an S x D
 * matrix with leading dim H * D at ((bi S H) + h) D. With g = Ha / Hb, the
 * heads h = k g + j (k = 0 .. Hb-1) of a fixed (bi, j) are equally spaced
 * in every operand, so each (bi, j) is one strided-batched GEMM over k:
 * B * g calls a node. context_t sums a group's g heads into one output in
 * head order (beta 1 after the first), the CPU's order; attention dropout
 * is a dropout node between softmax and context (dg_cuda_k_dropout.cu). */
#include "dg_cuda_k_train.h"

/* One operand of the batch: base pointer, leading dim, stride between
 * consecutive k. */
typedef struct operand {
    const float *p;
    int64_t ld, stride;
} operand;

/* Row-major C_k [M, N] = alpha op(A_k) [M, K] op(B_k) [K, N] + beta C_k for
 * k < count, as column-major C^T = op(B)^T op(A)^T. */
static int gemm_batched(cublasHandle_t h, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha,
                        operand A, operand B, float beta, float *C, int64_t ldc, int64_t strideC, int64_t count) {
    cublasStatus_t s = cublasSgemmStridedBatched(
        h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)N, (int)M, (int)K, &alpha, B.p,
        (int)B.ld, (long long)B.stride, A.p, (int)A.ld, (long long)A.stride, &beta, C, (int)ldc,
        (long long)strideC, (int)count);
    return s == CUBLAS_STATUS_SUCCESS ? DG_OK : DG_EINTERNAL;
}

/* Head (bi, h) of a [B, S, H, D] tensor. */
static int64_t head_off(const dg_unfused_dims *d, int64_t H, int64_t bi, int64_t h) {
    return (bi * d->S * H + h) * d->D;
}

/* s[bi, h] = scale a_h b_{h/g}^T: s [B, Ha, S, S] */
int dg_cuda_k_attn_scores(DG_CUDA_KARGS) {
    const dg_tensor *a = DG_IN(g, n, 0), *b = DG_IN(g, n, 1);
    dg_unfused_dims d = {a->shape[0], a->shape[1], a->shape[2], b->shape[2], a->shape[3]};
    int64_t grp = d.Ha / d.Hb, S = d.S;
    const float *A = (const float *)in[0], *Bm = (const float *)in[1];
    float *O = (float *)out[0];
    cublasHandle_t hb = dg_cuda_ctx_of(e)->blas;
    for (int64_t bi = 0; bi < d.B; bi++)
        for (int64_t j = 0; j < grp; j++) {
            operand x = {A + head_off(&d, d.Ha, bi, j), d.Ha * d.D, grp * d.D};
            operand y = {Bm + head_off(&d, d.Hb, bi, 0), d.Hb * d.D, d.D};
            DG_TRY(gemm_batched(hb, 0, 1, S, S, d.D, (float)n->attrs.f[0], x, y, 0.0f,
                                O + (bi * d.Ha + j) * S * S, S, grp * S * S, d.Hb));
        }
    return dg_cuda_launched();
}

/* o[bi, :, h] = scale p[bi, h] b_{h/g}: o [B, S, Ha, D] */
int dg_cuda_k_attn_context(DG_CUDA_KARGS) {
    const dg_tensor *p = DG_IN(g, n, 0), *b = DG_IN(g, n, 1);
    dg_unfused_dims d = {p->shape[0], p->shape[2], p->shape[1], b->shape[2], b->shape[3]};
    int64_t grp = d.Ha / d.Hb, S = d.S;
    const float *P = (const float *)in[0], *Bm = (const float *)in[1];
    float *O = (float *)out[0];
    cublasHandle_t hb = dg_cuda_ctx_of(e)->blas;
    for (int64_t bi = 0; bi < d.B; bi++)
        for (int64_t j = 0; j < grp; j++) {
            operand x = {P + (bi * d.Ha + j) * S * S, S, grp * S * S};
            operand y = {Bm + head_off(&d, d.Hb, bi, 0), d.Hb * d.D, d.D};
            DG_TRY(gemm_batched(hb, 0, 0, S, d.D, S, (float)n->attrs.f[0], x, y, 0.0f,
                                O + head_off(&d, d.Ha, bi, j), d.Ha * d.D, grp * d.D, d.Hb));
        }
    return dg_cuda_launched();
}

/* o[bi, :, k] = scale sum over h = k g + j, j in order, of p[bi, h]^T a_h:
 * o [B, S, Hb, D] */
int dg_cuda_k_attn_context_t(DG_CUDA_KARGS) {
    const dg_tensor *p = DG_IN(g, n, 0), *a = DG_IN(g, n, 1);
    int64_t grp = n->attrs.i[0];
    dg_unfused_dims d = {p->shape[0], p->shape[2], p->shape[1], p->shape[1] / grp, a->shape[3]};
    int64_t S = d.S;
    const float *P = (const float *)in[0], *A = (const float *)in[1];
    float *O = (float *)out[0];
    cublasHandle_t hb = dg_cuda_ctx_of(e)->blas;
    for (int64_t bi = 0; bi < d.B; bi++)
        for (int64_t j = 0; j < grp; j++) {
            operand x = {P + (bi * d.Ha + j) * S * S, S, grp * S * S};
            operand y = {A + head_off(&d, d.Ha, bi, j), d.Ha * d.D, grp * d.D};
            DG_TRY(gemm_batched(hb, 1, 0, S, d.D, S, (float)n->attrs.f[0], x, y, j == 0 ? 0.0f : 1.0f,
                                O + head_off(&d, d.Hb, bi, 0), d.Hb * d.D, d.D, d.Hb));
        }
    return dg_cuda_launched();
}

/* ---- softmax and its backward: a block per row of S ------------------------------------ */

#define STPB 256

/* p = softmax of each row of s over its visible keys (causal: j <= the
 * row's query, zero beyond): max, then exp stored and summed in double (a
 * fixed tree), then scaled by the rounded 1 / sum, as the CPU does. */
__global__ static void softmax_kernel(const float *s, float *p, int64_t rows, int64_t S, int causal) {
    __shared__ double shd[STPB];
    __shared__ float shf[STPB];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *x = s + r * S;
        float *o = p + r * S;
        int64_t nv = causal ? r % S + 1 : S;
        float m = -INFINITY;
        for (int64_t j = threadIdx.x; j < nv; j += blockDim.x) m = fmaxf(m, x[j]);
        m = dg_cuda_block_max(m, shf);
        double sum = 0;
        for (int64_t j = threadIdx.x; j < nv; j += blockDim.x) {
            o[j] = expf(x[j] - m);
            sum += o[j];
        }
        sum = dg_cuda_block_sum(sum, shd);
        float inv = (float)(1.0 / sum);
        for (int64_t j = threadIdx.x; j < S; j += blockDim.x) o[j] = j < nv ? o[j] * inv : 0.0f;
    }
}

/* ds = p (dp - rowsum(p dp)), the row sum in double (a fixed tree). */
__global__ static void softmax_bwd_kernel(const float *p, const float *dp, float *ds, int64_t rows, int64_t S) {
    __shared__ double shd[STPB];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *pr = p + r * S, *dr = dp + r * S;
        double dot = 0;
        for (int64_t j = threadIdx.x; j < S; j += blockDim.x) dot += (double)pr[j] * dr[j];
        float d = (float)dg_cuda_block_sum(dot, shd);
        for (int64_t j = threadIdx.x; j < S; j += blockDim.x) ds[r * S + j] = pr[j] * (dr[j] - d);
    }
}

static unsigned row_blocks(int64_t rows) { return (unsigned)(rows < 1 ? 1 : rows > 65535 * 16 ? 65535 * 16 : rows); }

int dg_cuda_k_attn_softmax(DG_CUDA_KARGS) {
    const dg_tensor *s = DG_IN(g, n, 0);
    int64_t rows = s->shape[0] * s->shape[1] * s->shape[2], S = s->shape[3];
    softmax_kernel<<<row_blocks(rows), STPB, 0, dg_cuda_ctx_of(e)->stream>>>((const float *)in[0], (float *)out[0],
                                                                             rows, S, (int)n->attrs.i[0]);
    return dg_cuda_launched();
}

int dg_cuda_k_attn_softmax_bwd(DG_CUDA_KARGS) {
    const dg_tensor *p = DG_IN(g, n, 0);
    int64_t rows = p->shape[0] * p->shape[1] * p->shape[2], S = p->shape[3];
    softmax_bwd_kernel<<<row_blocks(rows), STPB, 0, dg_cuda_ctx_of(e)->stream>>>(
        (const float *)in[0], (const float *)in[1], (float *)out[0], rows, S);
    return dg_cuda_launched();
}
