/* dg_cuda_k_bias.cu — bias and learned position embeddings (ops/dg_op_bias.h,
 * kernels/cpu/dg_cpu_bias.h): a row vector added to every row, and its
 * adjoint, the sum over rows.
 *
 * The sum over rows is a block per tile of 32 columns: thread (c, r) adds
 * rows r, r + RG, r + 2 RG, ... of column c in order (double), then the RG
 * partial sums meet in a fixed tree. The order depends on the shape alone:
 * no atomics, the same bits on every run (not the CPU's float sum in row
 * order, which rounds more). */
#include "dg_cuda_k_train.h"

#define TPB 256
#define GRID(n) dg_cuda_blocks((n), TPB), TPB, 0, dg_cuda_ctx_of(e)->stream

/* y [rows, cols] = x + b [cols] on every row (x and y may alias). */
__global__ static void add_rows_kernel(const float *x, const float *b, float *y, int64_t rows, int64_t cols) {
    DG_CUDA_FOR(i, rows * cols) y[i] = x[i] + b[i % cols];
}

#define COLS 32 /* columns of a tile: a warp reads 32 consecutive floats of a row */
#define RG 16   /* row groups */

/* db [cols] = sum over rows of dy [rows, cols]. */
__global__ static void sum_rows_kernel(const float *dy, float *db, int64_t rows, int64_t cols) {
    __shared__ double sh[RG][COLS];
    int c = threadIdx.x, r = threadIdx.y;
    for (int64_t t = blockIdx.x; t * COLS < cols; t += gridDim.x) {
        int64_t col = t * COLS + c;
        double acc = 0;
        if (col < cols)
            for (int64_t k = r; k < rows; k += RG) acc += dy[k * cols + col];
        sh[r][c] = acc;
        __syncthreads();
        for (int s = RG / 2; s > 0; s >>= 1) {
            if (r < s) sh[r][c] += sh[r + s][c];
            __syncthreads();
        }
        if (r == 0 && col < cols) db[col] = (float)sh[0][c];
        __syncthreads(); /* sh is reused by the next tile */
    }
}

static int sum_rows(const dg_exec_env *e, const float *dy, float *db, int64_t rows, int64_t cols) {
    int64_t tiles = (cols + COLS - 1) / COLS;
    unsigned grid = (unsigned)(tiles < 1 ? 1 : tiles > 65535 ? 65535 : tiles);
    sum_rows_kernel<<<grid, dim3(COLS, RG), 0, dg_cuda_ctx_of(e)->stream>>>(dy, db, rows, cols);
    return dg_cuda_launched();
}

int dg_cuda_k_bias_add(DG_CUDA_KARGS) {
    const dg_tensor *x = DG_IN(g, n, 0);
    int64_t rows = dg_rows(x), cols = dg_cols(x);
    add_rows_kernel<<<GRID(rows * cols)>>>((const float *)in[0], (const float *)in[1], (float *)out[0], rows, cols);
    return dg_cuda_launched();
}

int dg_cuda_k_bias_grad(DG_CUDA_KARGS) {
    const dg_tensor *d = DG_IN(g, n, 0);
    return sum_rows(e, (const float *)in[0], (float *)out[0], dg_rows(d), dg_cols(d));
}

/* x [B, S, H] viewed as [B, S*H], plus the table's first S*H elements. */
int dg_cuda_k_pos_embed_add(DG_CUDA_KARGS) {
    const dg_tensor *x = DG_IN(g, n, 0);
    int64_t rows = x->shape[0], cols = x->shape[1] * x->shape[2];
    add_rows_kernel<<<GRID(rows * cols)>>>((const float *)in[0], (const float *)in[1], (float *)out[0], rows, cols);
    return dg_cuda_launched();
}

/* dtable [P, H]: the batch's sum for positions < S, zero past them. */
int dg_cuda_k_pos_embed_grad(DG_CUDA_KARGS) {
    const dg_tensor *d = DG_IN(g, n, 0);
    int64_t SH = d->shape[1] * d->shape[2], PH = n->attrs.i[0] * d->shape[2];
    float *dt = (float *)out[0];
    DG_TRY(sum_rows(e, (const float *)in[0], dt, d->shape[0], SH));
    if (PH > SH &&
        cudaMemsetAsync(dt + SH, 0, (size_t)(PH - SH) * sizeof(float), dg_cuda_ctx_of(e)->stream) != cudaSuccess)
        return DG_EINTERNAL;
    return DG_OK;
}

/* y[b, l] = x[b, l] + table[pos[b] + l]; a position past the table is bad
 * input (the CPU kernel's DG_EINPUT): flagged, its rows left zero. */
__global__ static void pos_add_at_kernel(const float *x, const float *tab, const int32_t *pos, float *y, int64_t B,
                                         int64_t L, int64_t H, int64_t P, int *bad, int node) {
    DG_CUDA_FOR(i, B * L * H) {
        int64_t b = i / (L * H), lh = i % (L * H);
        int64_t p0 = pos[b];
        if (p0 < 0 || p0 + L > P) {
            if (lh == 0) dg_cuda_flag_bad(bad, node);
            y[i] = 0.0f;
        } else {
            y[i] = x[i] + tab[p0 * H + lh];
        }
    }
}

int dg_cuda_k_pos_embed_add_at(DG_CUDA_KARGS) {
    const dg_tensor *x = DG_IN(g, n, 0);
    int64_t B = x->shape[0], L = x->shape[1], H = x->shape[2], P = DG_IN(g, n, 1)->shape[0];
    pos_add_at_kernel<<<GRID(B * L * H)>>>((const float *)in[0], (const float *)in[1], (const int32_t *)in[2],
                                           (float *)out[0], B, L, H, P, dg_cuda_ctx_of(e)->bad, n->id);
    return dg_cuda_launched();
}
