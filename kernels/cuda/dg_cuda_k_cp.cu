/* dg_cuda_k_cp.cu — context parallelism's position, loss and merge ops
 * (parallel/cp/dg_op_cp.c, parallel/cp/dg_op_ring_attn.c) with the CPU kernels' contracts:
 * cp_positions, rope_pos, pos_embed_pos and its gradient, cp_xent_sum,
 * cp_div, lse_merge and its adjoint.
 *
 * The cp rank and the positions are device i32s read by the kernels. A
 * rank outside [0, cp) or a position outside the table flags the node (the
 * CPU kernels return DG_EINTERNAL / DG_EINPUT). The shared DG_HD helpers
 * are the CPU's arithmetic: dg_layout_cp_position, dg_rope_cos_sin / dg_rope_pair,
 * the merge's rows (dg_lse_merge_row, dg_lse_merge_bwd_row). The position
 * table's gradient keeps the CPU's order per element (positions in order,
 * then the batch), one writer each: bitwise the CPU's sums. */
#include "dg_cuda_k_par.h"
#include "dg_layout.h"

#define TPB 256

/* ---- cp_positions(cp_rank) -> pos i32 [S] ----------------------------------------------------- */

__global__ static void positions_kernel(const int32_t *rank, int32_t *pos, int64_t S, int cp, int64_t offset,
                                        int *bad, int node) {
    const int r = *rank;
    const bool ok = r >= 0 && r < cp;
    if (!ok && blockIdx.x == 0 && threadIdx.x == 0) dg_cuda_flag_bad(bad, node);
    DG_CUDA_FOR(s, S) pos[s] = ok ? (int32_t)(dg_layout_cp_position(s, S / 2, r, cp) + offset) : 0;
}

int dg_cuda_k_cp_positions(DG_CUDA_KARGS) {
    (void)g;
    int64_t S = n->attrs.i[1];
    dg_cuda_ctx *c = dg_cuda_ctx_of(e);
    positions_kernel<<<dg_cuda_blocks(S, TPB), TPB, 0, c->stream>>>((const int32_t *)in[0], (int32_t *)out[0], S,
                                                                    (int)n->attrs.i[0], n->attrs.i[2], c->bad,
                                                                    n->id);
    return dg_cuda_launched();
}

/* ---- rope_pos(x [B, S, NH, D], pos [S]) ---------------------------------------------------------
 * rope with token s at position pos[s]: one thread per (row, i < D - R/2),
 * i < R/2 rotating a pair, the others copying dim R/2 + i (as the rope
 * kernel); the angle in double, its cosine and sine rounded to float once,
 * as the CPU's table. */
__global__ static void rope_pos_kernel(const float *x, const int32_t *pos, float *y, int64_t rows, int64_t S,
                                       int64_t NH, int64_t D, int64_t R, dg_rope_spec spec, int inverse,
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
        float c, sn;
        dg_rope_cos_sin(&spec, pos[(r / NH) % S], i, R, &c, &sn);
        float y1, y2;
        dg_rope_pair(xr[d1], xr[d2], c, inverse ? -sn : sn, &y1, &y2);
        yr[d1] = y1;
        yr[d2] = y2;
    }
}

/* attrs i[1] = inverse, i[2] = rotary_dim (0: D), f[0] = base, YaRN's as rope's */
int dg_cuda_k_rope_pos(DG_CUDA_KARGS) {
    const dg_tensor *x = DG_IN(g, n, 0);
    int64_t B = x->shape[0], S = x->shape[1], NH = x->shape[2], D = x->shape[3];
    int64_t R = n->attrs.i[2] > 0 ? n->attrs.i[2] : D, rows = B * S * NH;
    rope_pos_kernel<<<dg_cuda_blocks(rows * (D - R / 2), TPB), TPB, 0, dg_cuda_ctx_of(e)->stream>>>(
        (const float *)in[0], (const int32_t *)in[1], (float *)out[0], rows, S, NH, D, R, dg_rope_spec_of(&n->attrs),
        (int)n->attrs.i[1], (int)n->attrs.i[4]);
    return dg_cuda_launched();
}

/* ---- pos_embed_pos(x [B, S, H], table [P, H], pos [S]) = x + table[pos] ----------------------- */

__global__ static void pe_pos_kernel(const float *x, const float *tab, const int32_t *pos, float *y, int64_t B,
                                     int64_t S, int64_t H, int64_t P, int *bad, int node) {
    DG_CUDA_FOR(i, B * S * H) {
        int64_t s = (i / H) % S, p = pos[s];
        if (p < 0 || p >= P) {
            if (i % H == 0) dg_cuda_flag_bad(bad, node);
            y[i] = 0.0f;
        } else {
            y[i] = x[i] + tab[p * H + i % H];
        }
    }
}

int dg_cuda_k_pos_embed_pos(DG_CUDA_KARGS) {
    const dg_tensor *x = DG_IN(g, n, 0);
    int64_t B = x->shape[0], S = x->shape[1], H = x->shape[2], P = DG_IN(g, n, 1)->shape[0];
    dg_cuda_ctx *c = dg_cuda_ctx_of(e);
    pe_pos_kernel<<<dg_cuda_blocks(B * S * H, TPB), TPB, 0, c->stream>>>(
        (const float *)in[0], (const float *)in[1], (const int32_t *)in[2], (float *)out[0], B, S, H, P, c->bad,
        n->id);
    return dg_cuda_launched();
}

/* dtable [P, H] (zeroed first): blockIdx.y a slab of table rows, the thread a
 * column; positions in order, the batch in order within each. */
__global__ static void pe_grad_kernel(const float *dy, const int32_t *pos, float *dt, int64_t B, int64_t S,
                                      int64_t H, int64_t P, int64_t slab, int *bad, int node) {
    const int64_t p0 = (int64_t)blockIdx.y * slab, p1 = min(P, p0 + slab);
    const int64_t h = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (h >= H) return;
    for (int64_t s = 0; s < S; s++) {
        int64_t p = pos[s];
        if (p < 0 || p >= P) {
            if (h == 0 && blockIdx.y == 0) dg_cuda_flag_bad(bad, node);
            continue;
        }
        if (p < p0 || p >= p1) continue;
        float *row = dt + p * H + h;
        for (int64_t b = 0; b < B; b++) *row += dy[(b * S + s) * H + h];
    }
}

/* inputs dy [B, S, H], pos [S]; attrs i[0] = P */
int dg_cuda_k_pos_embed_pos_grad(DG_CUDA_KARGS) {
    const dg_tensor *d = DG_IN(g, n, 0);
    int64_t B = d->shape[0], S = d->shape[1], H = d->shape[2], P = n->attrs.i[0];
    dg_cuda_ctx *c = dg_cuda_ctx_of(e);
    if (cudaMemsetAsync(out[0], 0, sizeof(float) * (size_t)(P * H), c->stream) != cudaSuccess) return DG_EINTERNAL;
    if (H == 0 || P == 0) return dg_cuda_launched();
    int64_t nslab = P < 32 ? P : 32, slab = (P + nslab - 1) / nslab;
    nslab = (P + slab - 1) / slab;
    dim3 grid((unsigned)((H + 127) / 128), (unsigned)nslab);
    pe_grad_kernel<<<grid, 128, 0, c->stream>>>((const float *)in[0], (const int32_t *)in[1], (float *)out[0], B, S,
                                                H, P, slab, c->bad, n->id);
    return dg_cuda_launched();
}

/* ---- cp_xent_sum: softmax_xent's kernel, then its mean times the count ---------------------- */

/* loss = (float)(loss * count), count = sum(mask) (rows without a mask):
 * dg_cp_mean_to_sum on the device. One block. */
__global__ static void mean_to_sum_kernel(float *loss, float *count, const float *mask, int64_t rows) {
    __shared__ double sh[1024];
    double cnt = 0;
    if (mask)
        for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) cnt += mask[r];
    cnt = dg_cuda_block_sum(cnt, sh);
    if (threadIdx.x != 0) return;
    if (!mask) cnt = (double)rows;
    *loss = (float)((double)*loss * cnt);
    *count = (float)cnt;
}

/* inputs logits, targets (, mask); outputs loss_sum, lse, count */
int dg_cuda_k_cp_xent_sum(DG_CUDA_KARGS) {
    DG_TRY(dg_cuda_k_xent(e, g, n, in, out));
    mean_to_sum_kernel<<<1, 1024, 0, dg_cuda_ctx_of(e)->stream>>>(
        (float *)out[0], (float *)out[2], n->n_in > 2 ? (const float *)in[2] : NULL, dg_rows(DG_IN(g, n, 0)));
    return dg_cuda_launched();
}

/* ---- cp_div(num, den) = num / den, 0 when den <= 0 (no tokens) -------------------------------- */

__global__ static void div_kernel(const float *num, const float *den, float *out) {
    float d = *den;
    *out = d > 0 ? *num / d : 0.0f;
}

int dg_cuda_k_cp_div(DG_CUDA_KARGS) {
    (void)g;
    (void)n;
    div_kernel<<<1, 1, 0, dg_cuda_ctx_of(e)->stream>>>((const float *)in[0], (const float *)in[1], (float *)out[0]);
    return dg_cuda_launched();
}

/* ---- lse_merge and its adjoint: one thread per (b, h, s) row ---------------------------------- *
 * o* [B, S, H, D], l* [B, H, S]. */

struct merge_dims {
    int64_t B, S, H, D;
};

__device__ static inline void merge_at(const merge_dims &m, int64_t t, int64_t *li, int64_t *oi) {
    int64_t s = t % m.S, h = (t / m.S) % m.H, b = t / (m.S * m.H);
    *li = t;
    *oi = ((b * m.S + s) * m.H + h) * m.D;
}

__global__ static void merge_kernel(merge_dims m, const float *o1, const float *l1, const float *o2, const float *l2,
                                    float *o, float *l) {
    DG_CUDA_FOR(t, m.B * m.H * m.S) {
        int64_t li, oi;
        merge_at(m, t, &li, &oi);
        dg_lse_merge_row(m.D, o1 + oi, l1[li], o2 + oi, l2[li], o + oi, l + li);
    }
}

__global__ static void merge_bwd_kernel(merge_dims m, const float *o1, const float *l1, const float *o2,
                                        const float *l2, const float *o, const float *l, const float *dout,
                                        const float *dl, float *do1, float *dl1, float *do2, float *dl2) {
    DG_CUDA_FOR(t, m.B * m.H * m.S) {
        int64_t li, oi;
        merge_at(m, t, &li, &oi);
        dg_lse_merge_bwd_row(m.D, o1 + oi, l1[li], o2 + oi, l2[li], o + oi, l[li], dout + oi, dl ? dl[li] : 0.0f,
                             do1 + oi, dl1 + li, do2 + oi, dl2 + li);
    }
}

static merge_dims merge_dims_of(const dg_graph *g, const dg_node *n) {
    const dg_tensor *o = DG_IN(g, n, 0);
    return merge_dims{o->shape[0], o->shape[1], o->shape[2], o->shape[3]};
}

/* inputs o1, l1, o2, l2 -> o, l */
int dg_cuda_k_lse_merge(DG_CUDA_KARGS) {
    merge_dims m = merge_dims_of(g, n);
    merge_kernel<<<dg_cuda_blocks(m.B * m.H * m.S, TPB), TPB, 0, dg_cuda_ctx_of(e)->stream>>>(
        m, (const float *)in[0], (const float *)in[1], (const float *)in[2], (const float *)in[3], (float *)out[0],
        (float *)out[1]);
    return dg_cuda_launched();
}

/* inputs o1, l1, o2, l2, o, l, do (, dl) -> do1, dl1, do2, dl2 */
int dg_cuda_k_lse_merge_bwd(DG_CUDA_KARGS) {
    merge_dims m = merge_dims_of(g, n);
    merge_bwd_kernel<<<dg_cuda_blocks(m.B * m.H * m.S, TPB), TPB, 0, dg_cuda_ctx_of(e)->stream>>>(
        m, (const float *)in[0], (const float *)in[1], (const float *)in[2], (const float *)in[3],
        (const float *)in[4], (const float *)in[5], (const float *)in[6], n->n_in > 7 ? (const float *)in[7] : NULL,
        (float *)out[0], (float *)out[1], (float *)out[2], (float *)out[3]);
    return dg_cuda_launched();
}
