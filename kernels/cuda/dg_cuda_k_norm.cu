/* dg_cuda_k_norm.cu — RMSNorm, LayerNorm (forward, backward) and RoPE, with
 * the CPU kernels' contracts (dg_cpu_norm.h, dg_cpu_rope.h): rows of H
 * elements, row statistics in double. Weight (and bias) gradients are sums
 * over rows, done as block reductions in a fixed order so they fill the GPU
 * without atomics and come out bitwise the same run to run: pass 1 sums each
 * (column tile, chunk of rows) block's rows in order into a double partial,
 * pass 2 adds a column's partials in chunk order. */
#include "dg_cuda_internal.h"

#define NT 256 /* threads per row block (a power of two) */

/* rstd of row x[H] for RMSNorm (ln = 0) or mean and rstd for LayerNorm,
 * every thread of the block gets them. */
__device__ static void row_stats(const float *x, int64_t H, float eps, int ln, float *mean,
                                 float *rstd, double *sh) {
    double mu = 0;
    if (ln) {
        double s = 0;
        for (int64_t j = threadIdx.x; j < H; j += blockDim.x) s += x[j];
        mu = dg_cuda_block_sum(s, sh) / (double)H;
    }
    double v = 0;
    for (int64_t j = threadIdx.x; j < H; j += blockDim.x) {
        double d = (double)x[j] - mu;
        v += d * d;
    }
    v = dg_cuda_block_sum(v, sh);
    *mean = (float)mu;
    *rstd = (float)(1.0 / sqrt(v / (double)H + (double)eps));
}

/* x [rows, H], w [H], b [H] or NULL -> y [rows, H]; one block per row. */
__global__ static void norm_fwd_kernel(const float *x, const float *w, const float *b, float *y,
                                       int64_t H, float eps, int ln) {
    __shared__ double sh[NT];
    const float *xr = x + blockIdx.x * H;
    float *yr = y + blockIdx.x * H;
    float mean, rs;
    row_stats(xr, H, eps, ln, &mean, &rs, sh);
    for (int64_t j = threadIdx.x; j < H; j += blockDim.x)
        yr[j] = ln ? ((xr[j] - mean) * rs) * w[j] + b[j] : (xr[j] * rs) * w[j];
}

/* dx [rows, H] of either norm, and the row's mean / rstd into ws [2, rows].
 *   rms: dx = rstd * (w dy) - x * rstd^3 / H * sum(w dy x)
 *   ln:  dx = rstd * (w dy - mean(w dy) - xhat * mean(w dy xhat)) */
__global__ static void norm_dx_kernel(const float *dy, const float *x, const float *w, float *dx,
                                      float *ws, int64_t rows, int64_t H, float eps, int ln) {
    __shared__ double sh[NT];
    const int64_t r = blockIdx.x;
    const float *xr = x + r * H, *dyr = dy + r * H;
    float mean, rs;
    row_stats(xr, H, eps, ln, &mean, &rs, sh);
    if (threadIdx.x == 0) {
        ws[r] = mean;
        ws[rows + r] = rs;
    }
    if (!ln) {
        double dot = 0;
        for (int64_t j = threadIdx.x; j < H; j += blockDim.x) dot += (double)w[j] * dyr[j] * xr[j];
        dot = dg_cuda_block_sum(dot, sh);
        float c = (float)(dot * (double)rs * rs * rs / (double)H);
        for (int64_t j = threadIdx.x; j < H; j += blockDim.x)
            dx[r * H + j] = rs * (w[j] * dyr[j]) - xr[j] * c;
        return;
    }
    double s1 = 0, s2 = 0;
    for (int64_t j = threadIdx.x; j < H; j += blockDim.x) {
        double wd = (double)w[j] * dyr[j];
        s1 += wd;
        s2 += wd * ((double)xr[j] - mean) * rs;
    }
    s1 = dg_cuda_block_sum(s1, sh) / (double)H;
    s2 = dg_cuda_block_sum(s2, sh) / (double)H;
    for (int64_t j = threadIdx.x; j < H; j += blockDim.x) {
        float xhat = (xr[j] - mean) * rs;
        dx[r * H + j] = rs * (float)((double)w[j] * dyr[j] - s1 - xhat * s2);
    }
}

/* Rows per chunk of the weight-gradient reduction: at least 64, and at most
 * NCHUNK_MAX chunks, so the partials stay small. A function of the shape
 * only, so the summation order is too. */
#define NCHUNK_MAX 256
#define DW_T 128 /* columns per pass-1 block */
static int64_t dw_chunk_rows(int64_t rows) {
    int64_t c = (rows + NCHUNK_MAX - 1) / NCHUNK_MAX;
    return c < 64 ? 64 : c;
}
static int64_t dw_chunks(int64_t rows) { return (rows + dw_chunk_rows(rows) - 1) / dw_chunk_rows(rows); }

/* Pass 1, block (column tile x, row chunk y): for its columns j,
 * pw[y, j] = sum dy * xhat and pb[y, j] = sum dy over the chunk's rows in
 * order, in double (xhat = (x - mean) rstd; mean = 0 for RMSNorm). */
__global__ static void norm_dw_part_kernel(const float *dy, const float *x, const float *ws,
                                           double *pw, double *pb, int64_t rows, int64_t H,
                                           int64_t chunk) {
    const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= H) return;
    const int64_t r0 = (int64_t)blockIdx.y * chunk, r1 = min(r0 + chunk, rows);
    double aw = 0, ab = 0;
    for (int64_t r = r0; r < r1; r++) {
        float xhat = (x[r * H + j] - ws[r]) * ws[rows + r];
        aw += (double)dy[r * H + j] * xhat;
        ab += dy[r * H + j];
    }
    pw[blockIdx.y * H + j] = aw;
    pb[blockIdx.y * H + j] = ab;
}

/* Pass 2: dw[j] (db[j], db may be NULL) = the chunks' partials summed in
 * chunk order; zero with no rows. */
__global__ static void norm_dw_sum_kernel(const double *pw, const double *pb, float *dw, float *db,
                                          int64_t nchunks, int64_t H) {
    DG_CUDA_FOR(j, H) {
        double aw = 0, ab = 0;
        for (int64_t c = 0; c < nchunks; c++) {
            aw += pw[c * H + j];
            ab += pb[c * H + j];
        }
        dw[j] = (float)aw;
        if (db) db[j] = (float)ab;
    }
}

/* ws: mean and rstd [2, rows] floats, then (from a 256-byte boundary) the
 * partials pw, pb [chunks, H] doubles. */
static size_t stats_bytes(int64_t rows) { return (sizeof(float) * 2 * (size_t)rows + 255) / 256 * 256; }

size_t dg_cuda_ws_norm_bwd(const dg_graph *g, const dg_node *n) {
    const dg_tensor *x = DG_IN(g, n, 1);
    int64_t rows = dg_rows(x);
    return stats_bytes(rows) + sizeof(double) * 2 * (size_t)(dw_chunks(rows) * dg_cols(x));
}

static int norm_fwd(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                    void *const *out, int ln) {
    const dg_tensor *x = DG_IN(g, n, 0);
    int64_t rows = dg_rows(x);
    if (rows == 0) return DG_OK;
    norm_fwd_kernel<<<(unsigned)rows, NT, 0, dg_cuda_ctx_of(e)->stream>>>(
        (const float *)in[0], (const float *)in[1], ln ? (const float *)in[2] : NULL,
        (float *)out[0], dg_cols(x), (float)n->attrs.f[0], ln);
    return dg_cuda_launched();
}

/* inputs dy, x, w; outputs dx, dw (, db) */
static int norm_bwd(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                    void *const *out, int ln) {
    const dg_tensor *x = DG_IN(g, n, 1);
    int64_t rows = dg_rows(x), H = dg_cols(x);
    if (e->workspace_bytes < dg_cuda_ws_norm_bwd(g, n)) return DG_EINTERNAL;
    cudaStream_t st = dg_cuda_ctx_of(e)->stream;
    float *ws = (float *)e->workspace;
    if (rows > 0)
        norm_dx_kernel<<<(unsigned)rows, NT, 0, st>>>((const float *)in[0], (const float *)in[1],
                                                      (const float *)in[2], (float *)out[0], ws,
                                                      rows, H, (float)n->attrs.f[0], ln);
    if (H == 0) return dg_cuda_launched();
    int64_t nch = dw_chunks(rows); /* 0 with no rows: pass 2 writes zeros */
    double *pw = (double *)((char *)e->workspace + stats_bytes(rows)), *pb = pw + nch * H;
    if (nch > 0) {
        dim3 grid((unsigned)((H + DW_T - 1) / DW_T), (unsigned)nch);
        norm_dw_part_kernel<<<grid, DW_T, 0, st>>>((const float *)in[0], (const float *)in[1], ws,
                                                  pw, pb, rows, H, dw_chunk_rows(rows));
    }
    norm_dw_sum_kernel<<<dg_cuda_blocks(H, 128), 128, 0, st>>>(pw, pb, (float *)out[1],
                                                                ln ? (float *)out[2] : NULL, nch, H);
    return dg_cuda_launched();
}

int dg_cuda_k_rmsnorm(DG_CUDA_KARGS) { return norm_fwd(e, g, n, in, out, 0); }
int dg_cuda_k_layernorm(DG_CUDA_KARGS) { return norm_fwd(e, g, n, in, out, 1); }
int dg_cuda_k_rmsnorm_bwd(DG_CUDA_KARGS) { return norm_bwd(e, g, n, in, out, 0); }
int dg_cuda_k_layernorm_bwd(DG_CUDA_KARGS) { return norm_bwd(e, g, n, in, out, 1); }

/* ---- RoPE (dg_cpu_rope.h) --------------------------------------------------------------
 * x, y [B, S, NH, D]; the first R dims rotate (pairs i, i + R/2), the rest
 * pass through. One thread per (row, i < D - R/2): i < R/2 rotates a pair,
 * otherwise it copies dim R/2 + i. The angle is formed in double and its
 * cosine and sine rounded to float once, as the CPU table is. */
__global__ static void rope_kernel(const float *x, float *y, int64_t rows, int64_t S, int64_t NH,
                                   int64_t D, int64_t R, dg_rope_spec spec, int64_t pos0, int inverse,
                                   int interleaved) {
    const int64_t half = R / 2, per_row = D - half;
    DG_CUDA_FOR(t, rows * per_row) {
        int64_t r = t / per_row, i = t % per_row;
        const float *xr = x + r * D;
        float *yr = y + r * D;
        if (i >= half) { /* the pass-through dims R .. D-1 */
            yr[half + i] = xr[half + i];
            continue;
        }
        int64_t d1, d2;
        dg_rope_pair_dims(i, R, interleaved, &d1, &d2);
        int64_t s = (r / NH) % S;
        float c, sn;
        dg_rope_cos_sin(&spec, pos0 + s, i, R, &c, &sn);
        float y1, y2;
        dg_rope_pair(xr[d1], xr[d2], c, inverse ? -sn : sn, &y1, &y2);
        yr[d1] = y1;
        yr[d2] = y2;
    }
}

int dg_cuda_k_rope(DG_CUDA_KARGS) {
    const dg_tensor *x = DG_IN(g, n, 0);
    int64_t B = x->shape[0], S = x->shape[1], NH = x->shape[2], D = x->shape[3];
    int64_t R = n->attrs.i[2] > 0 ? n->attrs.i[2] : D;
    int64_t rows = B * S * NH, work = rows * (D - R / 2);
    rope_kernel<<<dg_cuda_blocks(work, 256), 256, 0, dg_cuda_ctx_of(e)->stream>>>(
        (const float *)in[0], (float *)out[0], rows, S, NH, D, R, dg_rope_spec_of(&n->attrs), n->attrs.i[0],
        (int)n->attrs.i[1], (int)n->attrs.i[4]);
    return dg_cuda_launched();
}
