/* dg_cuda_k_ep.cu — the EP row movers (parallel/ep/dg_ep_sort.c, kernels/cpu/
 * dg_cpu_ep.h) and the expert-TP masks (parallel/ep/dg_etp.c), with the CPU
 * kernels' layouts.
 *
 * sort_chunks' chunk sizes are the all-to-all's receive counts, a device
 * tensor: one thread forms the chunks' offsets in the workspace (P*G of
 * them, a prefix sum in the CPU's order) and every row then finds its chunk
 * by binary search there, so the host never waits for the counts. The
 * ranks (ep, tp) are device i32s read by the kernels. Bad counts (one < 0,
 * or a total past the rows) or a rank outside its group flag the node, as
 * the CPU kernels return DG_EINPUT; the output is then zeros (or -1 slots). */
#include "dg_cuda_k_par.h"

#define TPB 256

static size_t row_bytes(const dg_tensor *t) {
    return t->shape[0] > 0 ? dg_tensor_bytes(t) / (size_t)t->shape[0] : 0;
}

/* ---- sort_chunks ------------------------------------------------------------------------------
 * Workspace (int64): start[PG + 1] of the chunks in destination order (the
 * last = the total), src[PG] where each one's rows come from, ok[1]. */

static int64_t grid_pg(const dg_graph *g, const dg_node *n) { return DG_IN(g, n, 1)->shape[0]; }

size_t dg_cuda_ws_ep_sort_chunks(const dg_graph *g, const dg_node *n) {
    return sizeof(int64_t) * (size_t)(2 * grid_pg(g, n) + 2);
}

/* One thread. Chunk (r, e) of the rank-major order starts at rank_off, of
 * the expert-major order at exp_off; destination order k = e * P + r
 * (forward: expert-major) or r * G + e (inverse: rank-major). */
__global__ static void sort_plan_kernel(const int32_t *counts, int64_t P, int64_t G, int inverse, int64_t n_rows,
                                        int64_t *ws, int *bad, int node) {
    int64_t PG = P * G, *start = ws, *src = ws + PG + 1, *ok = ws + 2 * PG + 1;
    int64_t total = 0, neg = 0;
    for (int64_t i = 0; i < PG; i++) {
        neg |= counts[i] < 0;
        total += counts[i];
    }
    *ok = !neg && total <= n_rows;
    if (!*ok) {
        dg_cuda_flag_bad(bad, node);
        return;
    }
    /* expert-major offsets first (into src for the forward, start for the inverse) */
    int64_t o = 0;
    for (int64_t e = 0; e < G; e++)
        for (int64_t r = 0; r < P; r++) {
            int64_t k = inverse ? r * G + e : e * P + r;
            (inverse ? src : start)[k] = o;
            o += counts[r * G + e];
        }
    o = 0;
    for (int64_t r = 0; r < P; r++)
        for (int64_t e = 0; e < G; e++) {
            int64_t k = inverse ? r * G + e : e * P + r;
            (inverse ? start : src)[k] = o;
            o += counts[r * G + e];
        }
    start[PG] = total;
}

/* out row i (words of W): its chunk's source row, or zeros past the total. */
template <typename W>
__global__ static void sort_copy_kernel(const W *x, W *out, int64_t n_rows, int64_t words, int64_t PG,
                                        const int64_t *ws) {
    const int64_t *start = ws, *src = ws + PG + 1;
    const bool ok = ws[2 * PG + 1] != 0;
    DG_CUDA_FOR(i, n_rows * words) {
        int64_t row = i / words, w = i % words;
        if (!ok || row >= start[PG]) {
            out[i] = W();
            continue;
        }
        int64_t lo = 0, hi = PG - 1; /* the last chunk starting at or before row */
        while (lo < hi) {
            int64_t mid = (lo + hi + 1) / 2;
            if (start[mid] <= row) lo = mid;
            else hi = mid - 1;
        }
        out[i] = x[(src[lo] + row - start[lo]) * words + w];
    }
}

/* inputs x [n_rows, ..], counts i32 [P*G]; attrs i[0] = P, i[1] = inverse */
int dg_cuda_k_ep_sort_chunks(DG_CUDA_KARGS) {
    const dg_tensor *x = DG_IN(g, n, 0);
    int64_t P = n->attrs.i[0], PG = grid_pg(g, n), n_rows = x->shape[0];
    size_t row = row_bytes(x);
    if (e->workspace_bytes < dg_cuda_ws_ep_sort_chunks(g, n) || P < 1 || PG < 1) return DG_EINTERNAL;
    dg_cuda_ctx *c = dg_cuda_ctx_of(e);
    int64_t *ws = (int64_t *)e->workspace;
    sort_plan_kernel<<<1, 1, 0, c->stream>>>((const int32_t *)in[1], P, PG / P, (int)n->attrs.i[1], n_rows, ws,
                                             c->bad, n->id);
    if (row % 4 == 0) {
        int64_t w = (int64_t)(row / 4);
        sort_copy_kernel<uint32_t><<<dg_cuda_blocks(n_rows * w, TPB), TPB, 0, c->stream>>>(
            (const uint32_t *)in[0], (uint32_t *)out[0], n_rows, w, PG, ws);
    } else {
        int64_t w = (int64_t)row;
        sort_copy_kernel<uint8_t><<<dg_cuda_blocks(n_rows * w, TPB), TPB, 0, c->stream>>>(
            (const uint8_t *)in[0], (uint8_t *)out[0], n_rows, w, PG, ws);
    }
    return dg_cuda_launched();
}

/* ---- count sums: counts [P, G] -> per expert [G] (over_ranks) or per rank [P] ------------------- */

__global__ static void count_sum_kernel(const int32_t *counts, int64_t P, int64_t G, int over_ranks, int32_t *out) {
    DG_CUDA_FOR(i, over_ranks ? G : P) {
        int32_t s = 0;
        if (over_ranks)
            for (int64_t r = 0; r < P; r++) s += counts[r * G + i];
        else
            for (int64_t e = 0; e < G; e++) s += counts[i * G + e];
        out[i] = s;
    }
}

int dg_cuda_k_ep_count_sum(DG_CUDA_KARGS) {
    int64_t P = n->attrs.i[0], G = DG_IN(g, n, 0)->shape[0] / P;
    int over = (int)n->attrs.i[1];
    count_sum_kernel<<<dg_cuda_blocks(over ? G : P, TPB), TPB, 0, dg_cuda_ctx_of(e)->stream>>>(
        (const int32_t *)in[0], P, G, over, (int32_t *)out[0]);
    return dg_cuda_launched();
}

/* ---- transpose: x [A, B, G] -> out [B, A, G] (elements of any size) -------------------------- */

template <typename W>
__global__ static void transpose_kernel(const W *x, W *out, int64_t A, int64_t B, int64_t blk) {
    DG_CUDA_FOR(i, A * B * blk) {
        int64_t w = i % blk, ab = i / blk, a = ab / B, b = ab % B;
        out[(b * A + a) * blk + w] = x[i];
    }
}

int dg_cuda_k_ep_transpose(DG_CUDA_KARGS) {
    const dg_tensor *x = DG_IN(g, n, 0);
    int64_t A = n->attrs.i[0], B = n->attrs.i[1];
    size_t blk = (size_t)(x->shape[0] / (A * B)) * dg_dtype_size(x->dtype);
    cudaStream_t st = dg_cuda_ctx_of(e)->stream;
    if (blk % 4 == 0)
        transpose_kernel<uint32_t><<<dg_cuda_blocks(A * B * (int64_t)(blk / 4), TPB), TPB, 0, st>>>(
            (const uint32_t *)in[0], (uint32_t *)out[0], A, B, (int64_t)(blk / 4));
    else
        transpose_kernel<uint8_t><<<dg_cuda_blocks(A * B * (int64_t)blk, TPB), TPB, 0, st>>>(
            (const uint8_t *)in[0], (uint8_t *)out[0], A, B, (int64_t)blk);
    return dg_cuda_launched();
}

/* ---- split and concat rows: contiguous copies ------------------------------------------------ */

int dg_cuda_k_ep_split_rows(DG_CUDA_KARGS) {
    const dg_tensor *o = DG_OUT(g, n, 0);
    size_t bytes = (size_t)o->shape[0] * row_bytes(o);
    for (int c = 0; c < n->n_out; c++)
        DG_TRY(dg_cuda_copy2d(dg_cuda_ctx_of(e)->stream, out[c], bytes, (const char *)in[0] + (size_t)c * bytes, bytes,
                              bytes, 1));
    return DG_OK;
}

int dg_cuda_k_ep_concat_rows(DG_CUDA_KARGS) {
    size_t row = row_bytes(DG_OUT(g, n, 0)), off = 0;
    for (int i = 0; i < n->n_in; i++) {
        size_t bytes = (size_t)DG_IN(g, n, i)->shape[0] * row;
        DG_TRY(dg_cuda_copy2d(dg_cuda_ctx_of(e)->stream, (char *)out[0] + off, bytes, in[i], bytes, bytes, 1));
        off += bytes;
    }
    return DG_OK;
}

/* ---- local indices: global expert ids -> this ep rank's local ids, -1 elsewhere ---------------- */

__global__ static void local_kernel(const int32_t *ix, const int32_t *rank, int32_t *o, int64_t cnt, int64_t G,
                                    int64_t P, int *bad, int node) {
    const int64_t r = *rank, lo = r * G;
    const bool ok = r >= 0 && r < P;
    if (!ok && blockIdx.x == 0 && threadIdx.x == 0) dg_cuda_flag_bad(bad, node);
    DG_CUDA_FOR(i, cnt) o[i] = ok && ix[i] >= lo && ix[i] < lo + G ? (int32_t)(ix[i] - lo) : -1;
}

/* inputs indices i32 [N, k], ep_rank; attrs i[0] = G, i[1] = P */
int dg_cuda_k_ep_local_indices(DG_CUDA_KARGS) {
    int64_t cnt = dg_tensor_numel(DG_IN(g, n, 0));
    dg_cuda_ctx *c = dg_cuda_ctx_of(e);
    local_kernel<<<dg_cuda_blocks(cnt, TPB), TPB, 0, c->stream>>>((const int32_t *)in[0], (const int32_t *)in[1],
                                                                  (int32_t *)out[0], cnt, n->attrs.i[0],
                                                                  n->attrs.i[1], c->bad, n->id);
    return dg_cuda_launched();
}

/* ---- expert-TP masks: rows [r T / tp, (r + 1) T / tp) of x [T, cols] kept, the
 * others `fill` (-1 for i32 slots, 0.0f for f32 rows: 4-byte words both) ------------------------ */

__global__ static void tp_mask_kernel(const uint32_t *x, const int32_t *rank, uint32_t *y, int64_t T, int64_t cols,
                                      int64_t tp, uint32_t fill, int *bad, int node) {
    const int64_t r = *rank, lo = r * T / tp, hi = (r + 1) * T / tp;
    const bool ok = r >= 0 && r < tp;
    if (!ok && blockIdx.x == 0 && threadIdx.x == 0) dg_cuda_flag_bad(bad, node);
    DG_CUDA_FOR(i, T * cols) {
        int64_t t = i / cols;
        y[i] = ok && t >= lo && t < hi ? x[i] : fill;
    }
}

/* moe_tp_mask_indices (i32) and moe_tp_mask_rows (f32): inputs x [T, cols],
 * tp_rank; attrs i[0] = tp */
int dg_cuda_k_tp_mask(DG_CUDA_KARGS) {
    const dg_tensor *x = DG_IN(g, n, 0);
    int64_t T = x->shape[0], cols = x->shape[1];
    dg_cuda_ctx *c = dg_cuda_ctx_of(e);
    tp_mask_kernel<<<dg_cuda_blocks(T * cols, TPB), TPB, 0, c->stream>>>(
        (const uint32_t *)in[0], (const int32_t *)in[1], (uint32_t *)out[0], T, cols, n->attrs.i[0],
        x->dtype == DG_I32 ? 0xFFFFFFFFu : 0u, c->bad, n->id);
    return dg_cuda_launched();
}
