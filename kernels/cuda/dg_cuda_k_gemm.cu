/* dg_cuda_k_gemm.cu — matmul through cuBLAS, and the grouped GEMMs as
 * device-side grouped kernels. All fp32 with fp32 accumulation, no TF32, so
 * results match the CPU's sgemm to fp32 rounding.
 *
 * matmul: row-major C = A B is computed as column-major C^T = B^T A^T, so no
 * operand is copied or transposed (CUBLAS_DEFAULT_MATH).
 *
 * Grouped GEMMs: the per-expert row counts are a device tensor written by
 * an earlier kernel, so they are never read on the host (no synchronisation
 * inside the step). A one-thread plan kernel turns them into row offsets
 * and per-expert tile starts in the workspace (and flags bad counts: the
 * executor's sync reports DG_EINPUT naming the node); the GEMM's grid is
 * sized from the tensor's row count N, an upper bound, and each block finds
 * its expert and rows in the plan or exits when it lies past them. The GEMM
 * itself is a shared-memory SGEMM: 64 x 64 output tiles, 16-deep k slices,
 * 64 threads each holding an 8 x 8 register block; every output element is
 * one thread's sum over k in order, so runs are bitwise reproducible. */
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

/* ---- the grouped kernels -------------------------------------------------------------- */

#define GT 64  /* output tile edge (rows and columns) */
#define GK 16  /* k slice */
#define GTH 64 /* threads per block: an 8 x 8 grid, each an 8 x 8 register block */

/* The plan: off [E + 1] first row of each expert, tiles [E + 1] its first
 * row tile. Counts < 0 or summing past N flag the node and plan no rows
 * (every output then comes out zero). One thread: E is small, and this
 * keeps the scan's order fixed. */
__global__ static void gg_plan_kernel(const int32_t *counts, int64_t E, int64_t N, int64_t *off,
                                      int64_t *tiles, int *bad, int node) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    int64_t o = 0, t = 0;
    int ok = 1;
    off[0] = tiles[0] = 0;
    for (int64_t e = 0; e < E; e++) {
        int64_t c = counts[e];
        if (c < 0) ok = 0;
        c = c < 0 ? 0 : c;
        o += c;
        t += (c + GT - 1) / GT;
        off[e + 1] = o;
        tiles[e + 1] = t;
    }
    if (ok && o <= N) return;
    dg_cuda_flag_bad(bad, node);
    for (int64_t e = 0; e <= E; e++) off[e] = tiles[e] = 0;
}

/* The 8 x 8 block of thread (ty, tx): rows ty + 8 i, columns tx + 8 j of
 * the tile, summed over one k slice held in shared memory. Rows of As and
 * Bs are padded by one so the loaders' transposed stores spread over banks. */
__device__ static inline void tile_fma(const float (*As)[GT + 1], const float (*Bs)[GT + 1],
                                       float acc[8][8], int ty, int tx) {
    for (int kk = 0; kk < GK; kk++) {
        float a[8], b[8];
        for (int i = 0; i < 8; i++) a[i] = As[kk][ty + 8 * i];
        for (int j = 0; j < 8; j++) b[j] = Bs[kk][tx + 8 * j];
        for (int i = 0; i < 8; i++)
            for (int j = 0; j < 8; j++) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
}

/* y [N, M] rows of expert e = x_e [rows, K] @ op(w_e); w [E, M, K] (tw) or
 * [E, K, M]. Grid: x = row-tile slots (an upper bound on the plan's
 * tiles), y = column tiles of M. */
__global__ static void gg_fwd_kernel(const float *x, const float *w, float *y, const int64_t *off,
                                     const int64_t *tiles, int64_t E, int64_t K, int64_t M, int tw) {
    __shared__ float As[GK][GT + 1], Bs[GK][GT + 1];
    const int64_t t = blockIdx.x;
    if (t >= tiles[E]) return; /* past the experts' rows: uniform over the block */
    int64_t lo = 0, hi = E;    /* tiles[lo] <= t < tiles[hi] */
    while (hi - lo > 1) {
        int64_t mid = (lo + hi) / 2;
        if (tiles[mid] <= t) lo = mid;
        else hi = mid;
    }
    const int64_t ex = lo, r0 = off[ex] + (t - tiles[ex]) * GT, r1 = min(r0 + GT, off[ex + 1]);
    const int64_t n0 = (int64_t)blockIdx.y * GT;
    const float *we = w + ex * M * K;
    const int tid = threadIdx.x, ty = tid / 8, tx = tid % 8;
    float acc[8][8];
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++) acc[i][j] = 0.0f;
    for (int64_t k0 = 0; k0 < K; k0 += GK) {
        for (int p = 0; p < GT * GK / GTH; p++) {
            int idx = p * GTH + tid;
            /* x rows are contiguous in k: consecutive threads, consecutive k */
            int r = idx / GK, kk = idx % GK;
            int64_t row = r0 + r, k = k0 + kk;
            As[kk][r] = row < r1 && k < K ? x[row * K + k] : 0.0f;
            if (tw) { /* w_e [M, K]: contiguous in k */
                int64_t col = n0 + r;
                Bs[kk][r] = col < M && k < K ? we[col * K + k] : 0.0f;
            } else { /* w_e [K, M]: contiguous in the column */
                int kb = idx / GT, c = idx % GT;
                int64_t col = n0 + c, kr = k0 + kb;
                Bs[kb][c] = col < M && kr < K ? we[kr * M + col] : 0.0f;
            }
        }
        __syncthreads();
        tile_fma(As, Bs, acc, ty, tx);
        __syncthreads();
    }
    for (int i = 0; i < 8; i++) {
        int64_t row = r0 + ty + 8 * i;
        if (row >= r1) break;
        for (int j = 0; j < 8; j++) {
            int64_t col = n0 + tx + 8 * j;
            if (col < M) y[row * M + col] = acc[i][j];
        }
    }
}

/* y rows [off[E], N) are padding: zero. */
__global__ static void gg_zero_tail_kernel(float *y, const int64_t *off, int64_t E, int64_t N,
                                           int64_t M) {
    for (int64_t i = off[E] * M + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < N * M;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = 0.0f;
}

/* out_e [A, B] = a_e^T b_e over expert e's rows of a [N, A], b [N, B], the
 * rows in order (zeros for an expert with no rows). Grid: x = column tiles
 * of B times E (expert major), y = row tiles of A. */
__global__ static void gg_wgrad_kernel(const float *a, const float *b, float *out, const int64_t *off,
                                       int64_t A, int64_t B, int64_t nbt) {
    __shared__ float As[GK][GT + 1], Bs[GK][GT + 1];
    const int64_t ex = blockIdx.x / nbt, j0 = (blockIdx.x % nbt) * GT, i0 = (int64_t)blockIdx.y * GT;
    const int64_t r0 = off[ex], r1 = off[ex + 1];
    const int tid = threadIdx.x, ty = tid / 8, tx = tid % 8;
    float acc[8][8];
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++) acc[i][j] = 0.0f;
    for (int64_t k0 = r0; k0 < r1; k0 += GK) {
        /* both operands are contiguous along the output's rows / columns */
        for (int p = 0; p < GK; p++) {
            int64_t r = k0 + p, i = i0 + tid, j = j0 + tid;
            As[p][tid] = r < r1 && i < A ? a[r * A + i] : 0.0f;
            Bs[p][tid] = r < r1 && j < B ? b[r * B + j] : 0.0f;
        }
        __syncthreads();
        tile_fma(As, Bs, acc, ty, tx);
        __syncthreads();
    }
    float *o = out + ex * A * B;
    for (int i = 0; i < 8; i++) {
        int64_t row = i0 + ty + 8 * i;
        if (row >= A) break;
        for (int j = 0; j < 8; j++) {
            int64_t col = j0 + tx + 8 * j;
            if (col < B) o[row * B + col] = acc[i][j];
        }
    }
}

/* The plan's two int64 arrays of E + 1. */
static size_t plan_bytes(int64_t E) { return 2 * sizeof(int64_t) * (size_t)(E + 1); }

size_t dg_cuda_ws_grouped_gemm(const dg_graph *g, const dg_node *n) {
    return plan_bytes(DG_IN(g, n, 2)->shape[0]); /* w [E, ., .] */
}

size_t dg_cuda_ws_grouped_gemm_wgrad(const dg_graph *g, const dg_node *n) {
    return plan_bytes(DG_IN(g, n, 2)->shape[0]); /* counts [E] */
}

/* Launch the plan of counts [E] over N rows into the workspace. */
static int plan(const dg_exec_env *e, const dg_node *n, const void *counts, int64_t E, int64_t N,
                int64_t **off, int64_t **tiles) {
    if (e->workspace_bytes < plan_bytes(E)) return DG_EINTERNAL;
    dg_cuda_ctx *c = dg_cuda_ctx_of(e);
    *off = (int64_t *)e->workspace;
    *tiles = *off + E + 1;
    gg_plan_kernel<<<1, 1, 0, c->stream>>>((const int32_t *)counts, E, N, *off, *tiles, c->bad,
                                           n->id);
    return dg_cuda_launched();
}

/* x [N, K], counts [E], w [E, M, K] (tw) or [E, K, M] -> y [N, M]; rows past
 * sum(counts) are zero (dg_cpu_grouped_gemm.h). */
int dg_cuda_k_grouped_gemm(DG_CUDA_KARGS) {
    const dg_tensor *x = DG_IN(g, n, 0), *w = DG_IN(g, n, 2);
    int tw = (int)n->attrs.i[0];
    int64_t E = w->shape[0], N = x->shape[0], K = x->shape[1], M = tw ? w->shape[1] : w->shape[2];
    int64_t *off, *tiles;
    int st = plan(e, n, in[1], E, N, &off, &tiles);
    if (st != DG_OK || N == 0 || M == 0) return st;
    cudaStream_t s = dg_cuda_ctx_of(e)->stream;
    /* sum_e ceil(c_e / GT) <= ceil(N / GT) + E: enough slots for any counts */
    dim3 grid((unsigned)((N + GT - 1) / GT + E), (unsigned)((M + GT - 1) / GT));
    gg_fwd_kernel<<<grid, GTH, 0, s>>>((const float *)in[0], (const float *)in[2], (float *)out[0],
                                        off, tiles, E, K, M, tw);
    unsigned zb = dg_cuda_blocks(N * M, 256);
    gg_zero_tail_kernel<<<zb < 1024 ? zb : 1024, 256, 0, s>>>((float *)out[0], off, E, N, M);
    return dg_cuda_launched();
}

/* a [N, A], b [N, B], counts [E] -> out [E, A, B], out_e = a_e^T b_e
 * (zeros for an expert with no rows). */
int dg_cuda_k_grouped_gemm_wgrad(DG_CUDA_KARGS) {
    const dg_tensor *a = DG_IN(g, n, 0), *b = DG_IN(g, n, 1);
    int64_t E = DG_IN(g, n, 2)->shape[0], N = a->shape[0], A = a->shape[1], B = b->shape[1];
    int64_t *off, *tiles;
    int st = plan(e, n, in[2], E, N, &off, &tiles);
    if (st != DG_OK || E == 0 || A == 0 || B == 0) return st;
    int64_t nbt = (B + GT - 1) / GT;
    dim3 grid((unsigned)(nbt * E), (unsigned)((A + GT - 1) / GT));
    gg_wgrad_kernel<<<grid, GTH, 0, dg_cuda_ctx_of(e)->stream>>>(
        (const float *)in[0], (const float *)in[1], (float *)out[0], off, A, B, nbt);
    return dg_cuda_launched();
}
