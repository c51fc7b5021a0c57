/* dg_cuda_k_vocab.cu — vocab-parallel embedding and cross entropy
 * (parallel/tp/dg_op_vocab.c; kernels/cpu/dg_cpu_embedding.h, dg_cpu_xent.h) and
 * the CP x TP loss as a sum and a count (cp_vocab_xent_sum, parallel/cp/dg_op_cp.h).
 *
 * This tp rank holds vocab rows (or logit columns) [lo, lo + vl), lo = rank
 * * vl, with the rank a device i32 read by the kernels. A token or target
 * outside the whole vocabulary [0, V) flags the node, as the CPU kernels
 * return DG_EINPUT (targets only on rows whose mask is not 0).
 *
 * The embedding's weight gradient: each thread owns one column of a slab of
 * vocab rows and adds the tokens that fall in the slab in token order, the
 * CPU's order per element (bitwise the same sums, no atomics). Sums over
 * rows (the loss) run in one block, in double, in a fixed tree order. */
#include "dg_cuda_k_par.h"

#define TPB 256

/* vocab_embedding_bwd's rows: attrs i[1] */
static int64_t local_vocab(const dg_node *n) { return n->attrs.i[1]; }

/* ---- embedding: table [vl, H], tokens [N], rank -> out [N, H] ---------------------------- */

__global__ static void vemb_kernel(const float *table, const int32_t *tok, const int32_t *rank, float *out,
                                   int64_t N, int64_t vl, int64_t H, int64_t V, int *bad, int node) {
    const int64_t lo = (int64_t)*rank * vl;
    DG_CUDA_FOR(i, N * H) {
        int32_t t = tok[i / H];
        int64_t v = (int64_t)t - lo;
        if (t < 0 || t >= V) {
            if (i % H == 0) dg_cuda_flag_bad(bad, node);
            out[i] = 0.0f;
        } else {
            out[i] = v >= 0 && v < vl ? table[v * H + i % H] : 0.0f;
        }
    }
}

/* dtable [vl, H] (zeroed first): blockIdx.y picks a slab of vocab rows,
 * the thread a column; tokens in order. */
__global__ static void vemb_bwd_kernel(const float *dout, const int32_t *tok, const int32_t *rank, float *dtable,
                                       int64_t N, int64_t vl, int64_t H, int64_t V, int64_t slab, int *bad,
                                       int node) {
    const int64_t lo = (int64_t)*rank * vl, v0 = (int64_t)blockIdx.y * slab, v1 = min(vl, v0 + slab);
    const int64_t h = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (h >= H) return;
    for (int64_t i = 0; i < N; i++) {
        int32_t t = tok[i];
        if (t < 0 || t >= V) {
            if (h == 0 && blockIdx.y == 0) dg_cuda_flag_bad(bad, node);
            continue;
        }
        int64_t v = (int64_t)t - lo;
        if (v >= v0 && v < v1) dtable[v * H + h] += dout[i * H + h];
    }
}

int dg_cuda_k_vocab_embedding(DG_CUDA_KARGS) {
    const dg_tensor *tb = DG_IN(g, n, 0);
    int64_t N = dg_tensor_numel(DG_IN(g, n, 1)), vl = tb->shape[0], H = tb->shape[1];
    dg_cuda_ctx *c = dg_cuda_ctx_of(e);
    vemb_kernel<<<dg_cuda_blocks(N * H, TPB), TPB, 0, c->stream>>>(
        (const float *)in[0], (const int32_t *)in[1], (const int32_t *)in[2], (float *)out[0], N, vl, H,
        n->attrs.i[0], c->bad, n->id);
    return dg_cuda_launched();
}

/* inputs dout [N, H], tokens, rank; attrs i[0] = V, i[1] = vl */
int dg_cuda_k_vocab_embedding_bwd(DG_CUDA_KARGS) {
    const dg_tensor *d = DG_IN(g, n, 0);
    int64_t N = dg_rows(d), H = dg_cols(d), vl = local_vocab(n);
    dg_cuda_ctx *c = dg_cuda_ctx_of(e);
    if (cudaMemsetAsync(out[0], 0, sizeof(float) * (size_t)(vl * H), c->stream) != cudaSuccess) return DG_EINTERNAL;
    if (H == 0 || vl == 0) return dg_cuda_launched();
    /* up to 32 slabs: more threads than one per column, each token read per slab */
    int64_t nslab = vl < 32 ? vl : 32, slab = (vl + nslab - 1) / nslab;
    nslab = (vl + slab - 1) / slab;
    dim3 grid((unsigned)((H + 127) / 128), (unsigned)nslab);
    vemb_bwd_kernel<<<grid, 128, 0, c->stream>>>((const float *)in[0], (const int32_t *)in[1],
                                                 (const int32_t *)in[2], (float *)out[0], N, vl, H,
                                                 n->attrs.i[0], slab, c->bad, n->id);
    return dg_cuda_launched();
}

/* ---- stats: logits [N, vl], targets, rank -> stats [1, N, 2] ------------------------------ */

/* One block per row: the slice's logsumexp (max-shifted, double sum) and the
 * target's logit when the slice holds it, else 0. */
__global__ static void vstats_kernel(const float *logits, const int32_t *tgt, const int32_t *rank, float *stats,
                                     int64_t vl) {
    __shared__ double sh[TPB];
    __shared__ float shf[TPB];
    const int64_t r = blockIdx.x, lo = (int64_t)*rank * vl;
    const float *x = logits + r * vl;
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < vl; j += blockDim.x) mx = fmaxf(mx, x[j]);
    mx = dg_cuda_block_max(mx, shf);
    double s = 0;
    for (int64_t j = threadIdx.x; j < vl; j += blockDim.x) s += expf(x[j] - mx);
    s = dg_cuda_block_sum(s, sh);
    if (threadIdx.x != 0) return;
    int64_t t = (int64_t)tgt[r] - lo;
    stats[2 * r] = mx + (float)log(s);
    stats[2 * r + 1] = t >= 0 && t < vl ? x[t] : 0.0f;
}

int dg_cuda_k_vocab_xent_stats(DG_CUDA_KARGS) {
    const dg_tensor *lg = DG_IN(g, n, 0);
    int64_t N = dg_rows(lg);
    if (N == 0) return DG_OK;
    vstats_kernel<<<(unsigned)N, TPB, 0, dg_cuda_ctx_of(e)->stream>>>(
        (const float *)in[0], (const int32_t *)in[1], (const int32_t *)in[2], (float *)out[0], dg_cols(lg));
    return dg_cuda_launched();
}

/* ---- combine: stats [P, N, 2] -> lse [N], tl [N] ------------------------------------------ */

__global__ static void vcombine_kernel(const float *stats, int64_t P, int64_t N, float *lse, float *tl) {
    DG_CUDA_FOR(r, N) dg_vocab_xent_combine_row(stats, P, N, r, &lse[r], &tl[r]);
}

int dg_cuda_k_vocab_xent_combine(DG_CUDA_KARGS) {
    const dg_tensor *st = DG_IN(g, n, 0);
    int64_t P = st->shape[0], N = st->shape[1];
    vcombine_kernel<<<dg_cuda_blocks(N, TPB), TPB, 0, dg_cuda_ctx_of(e)->stream>>>(
        (const float *)in[0], P, N, (float *)out[0], (float *)out[1]);
    return dg_cuda_launched();
}

/* ---- the loss: sum(mask * (lse - tl)) / sum(mask) ------------------------------------------- */

/* One block. out[0] = the masked mean (0 when the mask sums to 0); with
 * count != NULL (cp_vocab_xent_sum) the mean times the rows it averaged
 * (the sum of the mask, or N), and *count = that count, as
 * dg_cp_mean_to_sum rounds them. */
__global__ static void vloss_kernel(const int32_t *tgt, const float *mask, const float *lse, const float *tl,
                                    int64_t N, int64_t V, float *loss, float *count, int *bad, int node) {
    __shared__ double sh[1024];
    double num = 0, den = 0, cnt = 0;
    for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
        float m = mask ? mask[i] : 1.0f;
        cnt += m;
        if (m == 0.0f) continue;
        if (tgt[i] < 0 || tgt[i] >= V) dg_cuda_flag_bad(bad, node);
        num += (double)m * (lse[i] - tl[i]);
        den += m;
    }
    num = dg_cuda_block_sum(num, sh);
    den = dg_cuda_block_sum(den, sh);
    cnt = dg_cuda_block_sum(cnt, sh);
    if (threadIdx.x != 0) return;
    float l = den != 0 ? (float)(num / den) : 0.0f;
    if (!count) {
        loss[0] = l;
        return;
    }
    if (!mask) cnt = (double)N;
    loss[0] = (float)((double)l * cnt);
    count[0] = (float)cnt;
}

static int vloss(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in, float *count,
                 void *const *out) {
    dg_cuda_ctx *c = dg_cuda_ctx_of(e);
    vloss_kernel<<<1, 1024, 0, c->stream>>>((const int32_t *)in[1], n->n_in > 5 ? (const float *)in[5] : NULL,
                                            (const float *)in[3], (const float *)in[4],
                                            dg_tensor_numel(DG_IN(g, n, 1)), n->attrs.i[0], (float *)out[0],
                                            count, c->bad, n->id);
    return dg_cuda_launched();
}

/* inputs logits, targets, rank, lse, tlogit (, mask) -> loss [] */
int dg_cuda_k_vocab_xent(DG_CUDA_KARGS) { return vloss(e, g, n, in, NULL, out); }

/* the same inputs -> loss_sum [], count [] */
int dg_cuda_k_cp_vocab_xent_sum(DG_CUDA_KARGS) { return vloss(e, g, n, in, (float *)out[1], out); }

/* ---- backward: logits, targets, rank, lse, dloss (, mask) -> dlogits [N, vl] ---------------- */

/* *den = sum(mask) in double (N without a mask); one block. */
__global__ static void mask_sum_kernel(const float *mask, int64_t N, double *den) {
    __shared__ double sh[1024];
    double d = 0;
    for (int64_t i = threadIdx.x; i < N; i += blockDim.x) d += mask ? mask[i] : 1.0f;
    d = dg_cuda_block_sum(d, sh);
    if (threadIdx.x == 0) *den = d;
}

/* (softmax - onehot of a target inside the slice) * mask * dloss / sum(mask);
 * rows whose mask is 0 get 0 and their target is not read. */
__global__ static void vxent_bwd_kernel(const float *logits, const int32_t *tgt, const int32_t *rank,
                                        const float *mask, const float *lse, const float *dloss,
                                        const double *den, float *d, int64_t N, int64_t vl, int64_t V, int *bad,
                                        int node) {
    const float scale = *den != 0 ? (float)((double)*dloss / *den) : 0.0f;
    const int64_t lo = (int64_t)*rank * vl;
    DG_CUDA_FOR(i, N * vl) {
        int64_t r = i / vl, j = i % vl;
        float m = mask ? mask[r] : 1.0f, s = m * scale;
        int64_t t = m != 0.0f ? (int64_t)tgt[r] : -1;
        if (m != 0.0f && (t < 0 || t >= V)) {
            if (j == 0) dg_cuda_flag_bad(bad, node);
            d[i] = 0.0f;
            continue;
        }
        if (s == 0.0f) {
            d[i] = 0.0f;
            continue;
        }
        float p = expf(logits[i] - lse[r]);
        d[i] = j == t - lo ? (p - 1.0f) * s : p * s; /* (p - 1) * s: no cancellation */
    }
}

size_t dg_cuda_ws_vocab_xent_bwd(const dg_graph *g, const dg_node *n) {
    (void)g;
    (void)n;
    return 256;
}

int dg_cuda_k_vocab_xent_bwd(DG_CUDA_KARGS) {
    const dg_tensor *lg = DG_IN(g, n, 0);
    int64_t N = dg_rows(lg), vl = dg_cols(lg);
    if (e->workspace_bytes < sizeof(double)) return DG_EINTERNAL;
    dg_cuda_ctx *c = dg_cuda_ctx_of(e);
    const float *mask = n->n_in > 5 ? (const float *)in[5] : NULL;
    double *den = (double *)e->workspace;
    mask_sum_kernel<<<1, 1024, 0, c->stream>>>(mask, N, den);
    vxent_bwd_kernel<<<dg_cuda_blocks(N * vl, TPB), TPB, 0, c->stream>>>(
        (const float *)in[0], (const int32_t *)in[1], (const int32_t *)in[2], mask, (const float *)in[3],
        (const float *)in[4], den, (float *)out[0], N, vl, n->attrs.i[0], c->bad, n->id);
    return dg_cuda_launched();
}
