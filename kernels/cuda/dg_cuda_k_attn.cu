/* dg_cuda_k_attn.cu — tiled flash-style attention, forward and backward,
 * causal or not, grouped-query heads; the CPU kernel's contract
 * (dg_cpu_attention.h):
 *   q, o, dq, do [B, S, Hq, D]   k, v, dk, dv [B, S, Hkv, D]   lse, dlse [B, Hq, S]
 *
 * Forward: a block holds BQ query rows (one thread each) of one (b, head)
 * and walks the key tiles (BK keys of K and V staged in shared memory) up to
 * the diagonal, keeping the running max, sum and output accumulator of the
 * online softmax in registers: scores never exist beyond one row's tile.
 * Backward, as the CPU's flash-attention-2 passes, each output row with one
 * writer and a fixed order (no atomics, reproducible):
 *   1. Delta = rowsum(dO * O) - dlse, one thread per query row;
 *   2. dK, dV, one thread per key row, over the group's query heads in head
 *      order, then query tiles in order (Q, dO, lse, Delta staged);
 *   3. dQ, one thread per query row, key tiles in order.
 * P is recomputed from lse with the same exp as the CPU (dg_attn_exp).
 * Head dims up to DG_CUDA_ATTN_MAX_D = 128 (instantiations for <= 64 and
 * <= 128: a row lives in registers; 32 keys of K and V staged take at most
 * 32 KB of shared memory). This is the correct, simple form: the
 * tensor-core version (wgmma tiles) is future work (docs/cuda.md).
 * Dropout (attrs f[1] > 0, the attention key an input): each thread draws
 * its probabilities' factors with the CPU's DG_HD dg_attn_drop_factor, the
 * key read on the device: l sums the undropped exponentials, o the kept
 * ones; the backward's dS = P (Z dP - Delta), dV from P Z. */
#include "dg_cuda_internal.h"

#define BQ 64
#define DG_CUDA_ATTN_MAX_D 128

struct attn_args {
    int64_t B, S, Hq, Hkv, D;
    int causal;
    float scale;
    const int32_t *key; /* the attention key (dropout), or NULL */
    int64_t site;
    double p;
    const float *q, *k, *v, *o, *dout, *lse, *dlse;
    float *out, *lse_out, *dq, *dk, *dv, *delta;
};

/* Stage rows [r0, r0 + BK) of a [B, S, H, D] tensor's head h into s[BK][D]
 * (zeros past S). */
template <int BK>
__device__ static void stage(const float *t, int64_t b, int64_t S, int64_t H, int64_t h, int64_t D,
                             int64_t r0, float *s) {
    for (int64_t idx = threadIdx.x; idx < BK * D; idx += blockDim.x) {
        int64_t r = r0 + idx / D;
        s[idx] = r < S ? t[((b * S + r) * H + h) * D + idx % D] : 0.0f;
    }
}

/* Keys this block's query rows can see: up to its last row when causal. */
__device__ static inline int64_t key_end(const attn_args &a) {
    return a.causal ? min(a.S, ((int64_t)blockIdx.x + 1) * BQ) : a.S;
}

/* Stage the key tile at k0 of K and V (kv head hk) for the whole block. */
template <int BK>
__device__ static void stage_kv(const attn_args &a, int64_t b, int64_t hk, int64_t k0, float *Ks,
                                float *Vs) {
    __syncthreads(); /* the previous tile is no longer read */
    stage<BK>(a.k, b, a.S, a.Hkv, hk, a.D, k0, Ks);
    stage<BK>(a.v, b, a.S, a.Hkv, hk, a.D, k0, Vs);
    __syncthreads();
}

/* Dropout's draw for this node (p 0: none, or outside training). */
__device__ static inline dg_attn_drop drop_of(const attn_args &a) {
    const int32_t zero[DG_ATTN_KEY_LEN] = {0, 0, 0, 0, 0};
    return dg_attn_drop_make(a.key ? a.key : zero, a.site, a.key ? a.p : 0.0);
}

/* Z of (query i, key j) of head h, sample b: 1 without dropout. */
__device__ static inline float zf(const dg_attn_drop &z, int64_t S, int64_t b, int64_t h, int64_t i, int64_t j) {
    return z.p > 0.0f ? dg_attn_drop_factor(&z, S, b, h, i, j) : 1.0f;
}

template <int DM>
__device__ static inline float dot(const float *a, const float *b, int64_t D) {
    float s = 0;
#pragma unroll
    for (int d = 0; d < DM; d++)
        if (d < D) s += a[d] * b[d];
    return s;
}

template <int DM, int BK>
__global__ static void attn_fwd_kernel(attn_args a) {
    extern __shared__ float sm[];
    float *Ks = sm, *Vs = sm + BK * a.D;
    const int64_t b = blockIdx.y / a.Hq, h = blockIdx.y % a.Hq, hk = h / (a.Hq / a.Hkv);
    const int64_t i = (int64_t)blockIdx.x * BQ + threadIdx.x, D = a.D;
    const bool valid = i < a.S;
    float qr[DM], acc[DM];
    const float *qp = a.q + ((b * a.S + i) * a.Hq + h) * D;
#pragma unroll
    for (int d = 0; d < DM; d++) {
        qr[d] = valid && d < D ? qp[d] : 0.0f;
        acc[d] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    const dg_attn_drop z = drop_of(a);
    for (int64_t k0 = 0; k0 < key_end(a); k0 += BK) {
        stage_kv<BK>(a, b, hk, k0, Ks, Vs);
        if (!valid) continue;
        for (int jj = 0; jj < BK; jj++) {
            int64_t j = k0 + jj;
            if (j >= a.S || (a.causal && j > i)) break;
            float s = a.scale * dot<DM>(qr, Ks + jj * D, D);
            if (s > m) {
                float corr = dg_attn_rescale(m, s);
                l *= corr;
#pragma unroll
                for (int d = 0; d < DM; d++) acc[d] *= corr;
                m = s;
            }
            float p = dg_attn_exp(s - m);
            l += p;
            p *= zf(z, a.S, b, h, i, j); /* the output sums the kept ones */
#pragma unroll
            for (int d = 0; d < DM; d++)
                if (d < D) acc[d] += p * Vs[jj * D + d];
        }
    }
    if (!valid) return;
    float *op = a.out + ((b * a.S + i) * a.Hq + h) * D;
#pragma unroll
    for (int d = 0; d < DM; d++)
        if (d < D) op[d] = acc[d] / l;
    a.lse_out[(b * a.Hq + h) * a.S + i] = m + logf(l);
}

/* Delta[b, h, i] = sum_d dO * O - dlse */
__global__ static void attn_delta_kernel(attn_args a) {
    DG_CUDA_FOR(t, a.B * a.Hq * a.S) {
        int64_t i = t % a.S, h = (t / a.S) % a.Hq, b = t / (a.S * a.Hq);
        const int64_t off = ((b * a.S + i) * a.Hq + h) * a.D;
        float s = 0;
        for (int64_t d = 0; d < a.D; d++) s += a.dout[off + d] * a.o[off + d];
        a.delta[t] = s - (a.dlse ? a.dlse[t] : 0.0f);
    }
}

template <int DM, int BK>
__global__ static void attn_dkdv_kernel(attn_args a) {
    extern __shared__ float sm[];
    const int64_t D = a.D;
    float *Qs = sm, *Os = sm + BK * D, *Ls = Os + BK * D, *Ds = Ls + BK;
    const int64_t b = blockIdx.y / a.Hkv, hk = blockIdx.y % a.Hkv, G = a.Hq / a.Hkv;
    const int64_t j = (int64_t)blockIdx.x * BQ + threadIdx.x;
    const bool valid = j < a.S;
    float kr[DM], vr[DM], dk[DM], dv[DM];
    const int64_t koff = ((b * a.S + j) * a.Hkv + hk) * D;
#pragma unroll
    for (int d = 0; d < DM; d++) {
        kr[d] = valid && d < D ? a.k[koff + d] : 0.0f;
        vr[d] = valid && d < D ? a.v[koff + d] : 0.0f;
        dk[d] = dv[d] = 0.0f;
    }
    const int64_t i_start = a.causal ? ((int64_t)blockIdx.x * BQ) / BK * BK : 0;
    const dg_attn_drop z = drop_of(a);
    for (int64_t h = hk * G; h < (hk + 1) * G; h++) {
        for (int64_t i0 = i_start; i0 < a.S; i0 += BK) {
            __syncthreads();
            stage<BK>(a.q, b, a.S, a.Hq, h, D, i0, Qs);
            stage<BK>(a.dout, b, a.S, a.Hq, h, D, i0, Os);
            for (int ii = threadIdx.x; ii < BK; ii += blockDim.x) {
                int64_t i = i0 + ii, r = (b * a.Hq + h) * a.S + i;
                Ls[ii] = i < a.S ? a.lse[r] : 0.0f;
                Ds[ii] = i < a.S ? a.delta[r] : 0.0f;
            }
            __syncthreads();
            if (!valid) continue;
            for (int ii = 0; ii < BK; ii++) {
                int64_t i = i0 + ii;
                if (i >= a.S) break;
                if (a.causal && i < j) continue;
                const float *qi = Qs + ii * D, *oi = Os + ii * D;
                float p = dg_attn_exp(a.scale * dot<DM>(kr, qi, D) - Ls[ii]);
                float zz = zf(z, a.S, b, h, i, j);
                float ds = dg_attn_dscore(p, zz * dot<DM>(vr, oi, D), Ds[ii]);
                float pz = p * zz;
#pragma unroll
                for (int d = 0; d < DM; d++)
                    if (d < D) {
                        dv[d] += pz * oi[d];
                        dk[d] += a.scale * ds * qi[d];
                    }
            }
        }
    }
    if (!valid) return;
#pragma unroll
    for (int d = 0; d < DM; d++)
        if (d < D) {
            a.dk[koff + d] = dk[d];
            a.dv[koff + d] = dv[d];
        }
}

template <int DM, int BK>
__global__ static void attn_dq_kernel(attn_args a) {
    extern __shared__ float sm[];
    const int64_t D = a.D;
    float *Ks = sm, *Vs = sm + BK * D;
    const int64_t b = blockIdx.y / a.Hq, h = blockIdx.y % a.Hq, hk = h / (a.Hq / a.Hkv);
    const int64_t i = (int64_t)blockIdx.x * BQ + threadIdx.x;
    const bool valid = i < a.S;
    const int64_t off = ((b * a.S + i) * a.Hq + h) * D;
    float qr[DM], orow[DM], dq[DM];
#pragma unroll
    for (int d = 0; d < DM; d++) {
        qr[d] = valid && d < D ? a.q[off + d] : 0.0f;
        orow[d] = valid && d < D ? a.dout[off + d] : 0.0f;
        dq[d] = 0.0f;
    }
    const int64_t r = (b * a.Hq + h) * a.S + i;
    const float l = valid ? a.lse[r] : 0.0f, delta = valid ? a.delta[r] : 0.0f;
    const dg_attn_drop z = drop_of(a);
    for (int64_t k0 = 0; k0 < key_end(a); k0 += BK) {
        stage_kv<BK>(a, b, hk, k0, Ks, Vs);
        if (!valid) continue;
        for (int jj = 0; jj < BK; jj++) {
            int64_t j = k0 + jj;
            if (j >= a.S || (a.causal && j > i)) break;
            const float *kj = Ks + jj * D;
            float p = dg_attn_exp(a.scale * dot<DM>(qr, kj, D) - l);
            float ds = dg_attn_dscore(p, zf(z, a.S, b, h, i, j) * dot<DM>(orow, Vs + jj * D, D), delta);
#pragma unroll
            for (int d = 0; d < DM; d++)
                if (d < D) dq[d] += a.scale * ds * kj[d];
        }
    }
    if (!valid) return;
#pragma unroll
    for (int d = 0; d < DM; d++)
        if (d < D) a.dq[off + d] = dq[d];
}

static attn_args args_of(const dg_graph *g, const dg_node *n) {
    const dg_tensor *q = DG_IN(g, n, 0), *k = DG_IN(g, n, 1);
    attn_args a;
    memset(&a, 0, sizeof a);
    a.B = q->shape[0];
    a.S = q->shape[1];
    a.Hq = q->shape[2];
    a.Hkv = k->shape[2];
    a.D = q->shape[3];
    a.causal = (int)n->attrs.i[0];
    a.scale = (float)n->attrs.f[0];
    a.site = n->attrs.i[3];
    a.p = n->attrs.f[1];
    return a;
}

/* Launch kernel K<DM, BK> for this head dim with `extra` floats of shared
 * memory beyond the two staged tiles. */
#define ATTN_LAUNCH(K, grid, a, extra, st)                                                     \
    do {                                                                                       \
        size_t sh_ = sizeof(float) * (size_t)(2 * 32 * (a).D + (extra));                      \
        if ((a).D <= 64)                                                                       \
            K<64, 32><<<grid, BQ, sh_, st>>>(a);                                               \
        else                                                                                   \
            K<128, 32><<<grid, BQ, sh_, st>>>(a);                                              \
    } while (0)

int dg_cuda_k_attn(DG_CUDA_KARGS) {
    attn_args a = args_of(g, n);
    if (a.D > DG_CUDA_ATTN_MAX_D || a.S == 0) return a.S == 0 ? DG_OK : DG_EINTERNAL;
    a.q = (const float *)in[0];
    a.k = (const float *)in[1];
    a.v = (const float *)in[2];
    if (a.p > 0) a.key = (const int32_t *)in[n->n_in - 1]; /* after q, k, v (and a sink) */
    a.out = (float *)out[0];
    a.lse_out = (float *)out[1];
    dim3 grid((unsigned)((a.S + BQ - 1) / BQ), (unsigned)(a.B * a.Hq));
    ATTN_LAUNCH(attn_fwd_kernel, grid, a, 0, dg_cuda_ctx_of(e)->stream);
    return dg_cuda_launched();
}

size_t dg_cuda_ws_attn_bwd(const dg_graph *g, const dg_node *n) {
    attn_args a = args_of(g, n);
    return sizeof(float) * (size_t)(a.B * a.Hq * a.S);
}

/* inputs q, k, v, o, dout, lse (, key) (, dlse); outputs dq, dk, dv */
int dg_cuda_k_attn_bwd(DG_CUDA_KARGS) {
    attn_args a = args_of(g, n);
    if (a.D > DG_CUDA_ATTN_MAX_D || a.S == 0) return a.S == 0 ? DG_OK : DG_EINTERNAL;
    if (e->workspace_bytes < dg_cuda_ws_attn_bwd(g, n)) return DG_EINTERNAL;
    a.q = (const float *)in[0];
    a.k = (const float *)in[1];
    a.v = (const float *)in[2];
    a.o = (const float *)in[3];
    a.dout = (const float *)in[4];
    a.lse = (const float *)in[5];
    int dl = a.p > 0 ? 7 : 6;
    if (a.p > 0) a.key = (const int32_t *)in[6];
    a.dlse = n->n_in > dl ? (const float *)in[dl] : NULL;
    a.dq = (float *)out[0];
    a.dk = (float *)out[1];
    a.dv = (float *)out[2];
    a.delta = (float *)e->workspace;
    cudaStream_t st = dg_cuda_ctx_of(e)->stream;
    unsigned tiles = (unsigned)((a.S + BQ - 1) / BQ);
    attn_delta_kernel<<<dg_cuda_blocks(a.B * a.Hq * a.S, 256), 256, 0, st>>>(a);
    dim3 gkv(tiles, (unsigned)(a.B * a.Hkv)), gq(tiles, (unsigned)(a.B * a.Hq));
    ATTN_LAUNCH(attn_dkdv_kernel, gkv, a, 2 * 32, st);
    ATTN_LAUNCH(attn_dq_kernel, gq, a, 0, st);
    return dg_cuda_launched();
}
