/* dg_cuda_k_cp_attn.cu — ring attention's block, forward and backward
 * (cp_attn_block, cp_attn_block_bwd: parallel/cp/dg_op_ring_attn.c), with the CPU
 * kernel's contract (kernels/cpu/dg_cpu_ring_attn.h):
 *   q, o, do, dq [B, 2c, Hq, D]   k, v, dk, dv [B, 2c, Hkv, D]   lse, dlse [B, Hq, 2c]
 *
 * The block's mode (DIAG, LOWER, UPPER) follows from the cp rank, a device
 * i32, so the kernels read it themselves (no host synchronisation) and turn
 * it into which keys each query sees, always a prefix [0, kend(i)):
 *   DIAG   kend = i + 1      (causal over the local 2c tokens)
 *   LOWER  kend = c          (both query halves see K/V half A)
 *   UPPER  kend = 2c for i >= c, none below (half A sees nothing: o = 0,
 *          lse = -inf; half B sees both halves)
 * and, for the backward, which queries see key j: [j, 2c), [0, 2c) for
 * j < c (none above), [c, 2c). The CPU runs LOWER and UPPER as two c x c
 * attentions on gathered halves (UPPER merged by lse, the gradients added);
 * here one pass walks the visible keys in order with the same online
 * softmax, the same sums rounded differently. The tiling is
 * dg_cuda_k_attn.cu's (a query row per thread, BK keys of K and V staged
 * in shared memory; the backward's three flash-attention-2 passes, each
 * output row with one writer, no atomics), with the same DG_HD exp,
 * rescale and dscore helpers as the CPU; dg_cuda_k_attn.cu is unchanged.
 * Head dims up to 128. A cp rank outside [0, cp) flags the node.
 * Dropout (attrs f[1] > 0): the rank input is {cp_rank, attention key}
 * (dg_op_attn_key.h); each probability draws the CPU's factor at its
 * chunks' global places (the query's chunk r or 2cp-1-r, the key's of rank
 * r - step), as dg_attn_drop_factor. */
#include "dg_cuda_k_par.h"

#define BQ 64
#define BK 32
#define MAX_D 128

struct cpa_args {
    int64_t B, S, c, Hq, Hkv, D;
    int cp, step;
    float scale;
    int64_t site;
    double p; /* dropout: rank then holds the attention key after the rank */
    const int32_t *rank;
    const float *q, *k, *v, *o, *dout, *lse, *dlse;
    float *out, *lse_out, *dq, *dk, *dv, *delta;
    int *bad, node;
};

/* The block's mode, or -1 (flagged) for a rank outside [0, cp). */
__device__ static int cpa_mode(const cpa_args &a) {
    int r = *a.rank;
    if (r < 0 || r >= a.cp) {
        if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) dg_cuda_flag_bad(a.bad, a.node);
        return -1;
    }
    return (int)dg_ring_mode_of(r, a.step, a.cp);
}

/* Dropout's draw of this block: the rank's chunks for the queries, rank
 * r - step's for the keys, of the whole sequence 2c cp. */
__device__ static dg_attn_drop cpa_drop(const cpa_args &a) {
    const int32_t zero[DG_ATTN_KEY_LEN] = {0, 0, 0, 0, 0};
    dg_attn_drop z = dg_attn_drop_make(a.p > 0 ? a.rank + 1 : zero, a.site, a.p > 0 ? a.p : 0.0);
    int64_t r = a.rank[0], j = ((r - a.step) % a.cp + a.cp) % a.cp;
    z.S = a.S * a.cp;
    z.qc = z.kc = a.c;
    z.qa = r;
    z.qb = 2 * a.cp - 1 - r;
    z.ka = j;
    z.kb = 2 * a.cp - 1 - j;
    return z;
}

__device__ static inline float zf(const dg_attn_drop &z, int64_t S, int64_t b, int64_t h, int64_t i, int64_t j) {
    return z.p > 0.0f ? dg_attn_drop_factor(&z, S, b, h, i, j) : 1.0f;
}

/* Keys [0, kend) that query i sees. */
__device__ static inline int64_t kend_of(int mode, int64_t i, int64_t c, int64_t S) {
    return mode == DG_RING_DIAG ? i + 1 : mode == DG_RING_LOWER ? c : (i >= c ? S : 0);
}

/* Queries [*qb, *qe) that see key j. */
__device__ static inline void qrange_of(int mode, int64_t j, int64_t c, int64_t S, int64_t *qb, int64_t *qe) {
    *qe = S;
    *qb = mode == DG_RING_DIAG ? j : mode == DG_RING_LOWER ? (j < c ? 0 : S) : c;
}

/* Keys the block's query rows [i0, i0 + BQ) see, together. */
__device__ static inline int64_t block_key_end(int mode, int64_t i0, int64_t c, int64_t S) {
    int64_t last = min(S, i0 + BQ) - 1;
    return last < i0 ? 0 : kend_of(mode, last, c, S);
}

/* Rows [r0, r0 + BK) of head h of a [B, S, H, D] tensor into s[BK][D], zeros past S. */
__device__ static void stage(const float *t, int64_t b, int64_t S, int64_t H, int64_t h, int64_t D, int64_t r0,
                             float *s) {
    for (int64_t idx = threadIdx.x; idx < BK * D; idx += blockDim.x) {
        int64_t r = r0 + idx / D;
        s[idx] = r < S ? t[((b * S + r) * H + h) * D + idx % D] : 0.0f;
    }
}

template <int DM>
__device__ static inline float dot(const float *x, const float *y, int64_t D) {
    float s = 0;
#pragma unroll
    for (int d = 0; d < DM; d++)
        if (d < D) s += x[d] * y[d];
    return s;
}

/* ---- forward: online softmax over each row's visible keys -------------------------------------- */

template <int DM>
__global__ static void cpa_fwd_kernel(cpa_args a) {
    extern __shared__ float sm[];
    const int mode = cpa_mode(a);
    if (mode < 0) return;
    float *Ks = sm, *Vs = sm + BK * a.D;
    const int64_t b = blockIdx.y / a.Hq, h = blockIdx.y % a.Hq, hk = h / (a.Hq / a.Hkv), D = a.D;
    const int64_t i0 = (int64_t)blockIdx.x * BQ, i = i0 + threadIdx.x;
    const bool valid = i < a.S;
    const int64_t kend = valid ? kend_of(mode, i, a.c, a.S) : 0, kblock = block_key_end(mode, i0, a.c, a.S);
    float qr[DM], acc[DM];
    const float *qp = a.q + ((b * a.S + i) * a.Hq + h) * D;
#pragma unroll
    for (int d = 0; d < DM; d++) {
        qr[d] = valid && d < D ? qp[d] : 0.0f;
        acc[d] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    const dg_attn_drop z = cpa_drop(a);
    for (int64_t k0 = 0; k0 < kblock; k0 += BK) {
        __syncthreads(); /* the previous tile is no longer read */
        stage(a.k, b, a.S, a.Hkv, hk, D, k0, Ks);
        stage(a.v, b, a.S, a.Hkv, hk, D, k0, Vs);
        __syncthreads();
        for (int jj = 0; jj < BK; jj++) {
            int64_t j = k0 + jj;
            if (j >= kend) break;
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
    const bool none = kend == 0; /* UPPER's half A: o = 0, lse = -inf, as the CPU */
#pragma unroll
    for (int d = 0; d < DM; d++)
        if (d < D) op[d] = none ? 0.0f : acc[d] / l;
    a.lse_out[(b * a.Hq + h) * a.S + i] = none ? -INFINITY : m + logf(l);
}

/* ---- backward ----------------------------------------------------------------------------------- */

/* Delta[b, h, i] = sum_d dO * O - dlse */
__global__ static void cpa_delta_kernel(cpa_args a) {
    DG_CUDA_FOR(t, a.B * a.Hq * a.S) {
        int64_t i = t % a.S, h = (t / a.S) % a.Hq, b = t / (a.S * a.Hq);
        const int64_t off = ((b * a.S + i) * a.Hq + h) * a.D;
        float s = 0;
        for (int64_t d = 0; d < a.D; d++) s += a.dout[off + d] * a.o[off + d];
        a.delta[t] = s - (a.dlse ? a.dlse[t] : 0.0f);
    }
}

/* dK, dV: a thread per key row, over the group's query heads in order, then
 * the query tiles that can see the block's keys, in order. */
template <int DM>
__global__ static void cpa_dkdv_kernel(cpa_args a) {
    extern __shared__ float sm[];
    const int mode = cpa_mode(a);
    if (mode < 0) return;
    const int64_t D = a.D;
    float *Qs = sm, *Os = sm + BK * D, *Ls = Os + BK * D, *Ds = Ls + BK;
    const int64_t b = blockIdx.y / a.Hkv, hk = blockIdx.y % a.Hkv, G = a.Hq / a.Hkv;
    const int64_t j0 = (int64_t)blockIdx.x * BQ, j = j0 + threadIdx.x;
    const bool valid = j < a.S;
    int64_t qb = a.S, qe = a.S, bb, be;
    if (valid) qrange_of(mode, j, a.c, a.S, &qb, &qe);
    qrange_of(mode, j0, a.c, a.S, &bb, &be); /* the block's first key sees the most queries */
    const dg_attn_drop z = cpa_drop(a);
    float kr[DM], vr[DM], dk[DM], dv[DM];
    const int64_t koff = ((b * a.S + j) * a.Hkv + hk) * D;
#pragma unroll
    for (int d = 0; d < DM; d++) {
        kr[d] = valid && d < D ? a.k[koff + d] : 0.0f;
        vr[d] = valid && d < D ? a.v[koff + d] : 0.0f;
        dk[d] = dv[d] = 0.0f;
    }
    for (int64_t h = hk * G; h < (hk + 1) * G; h++) {
        for (int64_t i0 = bb / BK * BK; i0 < be; i0 += BK) {
            __syncthreads();
            stage(a.q, b, a.S, a.Hq, h, D, i0, Qs);
            stage(a.dout, b, a.S, a.Hq, h, D, i0, Os);
            for (int ii = threadIdx.x; ii < BK; ii += blockDim.x) {
                int64_t i = i0 + ii, r = (b * a.Hq + h) * a.S + i;
                Ls[ii] = i < a.S ? a.lse[r] : 0.0f;
                Ds[ii] = i < a.S ? a.delta[r] : 0.0f;
            }
            __syncthreads();
            for (int ii = 0; ii < BK; ii++) {
                int64_t i = i0 + ii;
                if (i >= qe) break;
                if (i < qb) continue;
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

/* dQ: a thread per query row, its visible keys in order (0 when none). */
template <int DM>
__global__ static void cpa_dq_kernel(cpa_args a) {
    extern __shared__ float sm[];
    const int mode = cpa_mode(a);
    if (mode < 0) return;
    const int64_t D = a.D;
    float *Ks = sm, *Vs = sm + BK * D;
    const int64_t b = blockIdx.y / a.Hq, h = blockIdx.y % a.Hq, hk = h / (a.Hq / a.Hkv);
    const int64_t i0 = (int64_t)blockIdx.x * BQ, i = i0 + threadIdx.x;
    const bool valid = i < a.S;
    const int64_t kend = valid ? kend_of(mode, i, a.c, a.S) : 0, kblock = block_key_end(mode, i0, a.c, a.S);
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
    const dg_attn_drop z = cpa_drop(a);
    for (int64_t k0 = 0; k0 < kblock; k0 += BK) {
        __syncthreads();
        stage(a.k, b, a.S, a.Hkv, hk, D, k0, Ks);
        stage(a.v, b, a.S, a.Hkv, hk, D, k0, Vs);
        __syncthreads();
        for (int jj = 0; jj < BK; jj++) {
            int64_t j = k0 + jj;
            if (j >= kend) break;
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

/* ---- wrappers ------------------------------------------------------------------------------------ */

static cpa_args args_of(const dg_exec_env *e, const dg_graph *g, const dg_node *n) {
    const dg_tensor *q = DG_IN(g, n, 0), *k = DG_IN(g, n, 1);
    cpa_args a;
    memset(&a, 0, sizeof a);
    a.B = q->shape[0];
    a.S = q->shape[1];
    a.c = a.S / 2;
    a.Hq = q->shape[2];
    a.Hkv = k->shape[2];
    a.D = q->shape[3];
    a.cp = (int)n->attrs.i[0];
    a.step = (int)n->attrs.i[1];
    a.scale = (float)n->attrs.f[0];
    a.site = n->attrs.i[3];
    a.p = n->attrs.f[1];
    a.bad = dg_cuda_ctx_of(e)->bad;
    a.node = n->id;
    return a;
}

/* Launch K<DM> for this head dim with `extra` floats of shared memory
 * beyond the two staged tiles. */
#define CPA_LAUNCH(K, grid, a, extra, st)                                                      \
    do {                                                                                       \
        size_t sh_ = sizeof(float) * (size_t)(2 * BK * (a).D + (extra));                      \
        if ((a).D <= 64)                                                                       \
            K<64><<<grid, BQ, sh_, st>>>(a);                                                   \
        else                                                                                   \
            K<128><<<grid, BQ, sh_, st>>>(a);                                                  \
    } while (0)

/* inputs q, k, v, cp_rank; outputs o, lse; attrs i[0] = cp, i[1] = step, f[0] = scale */
int dg_cuda_k_cp_attn_block(DG_CUDA_KARGS) {
    cpa_args a = args_of(e, g, n);
    if (a.S == 0) return DG_OK;
    if (a.D > MAX_D) return DG_EINTERNAL;
    a.q = (const float *)in[0];
    a.k = (const float *)in[1];
    a.v = (const float *)in[2];
    a.rank = (const int32_t *)in[3];
    a.out = (float *)out[0];
    a.lse_out = (float *)out[1];
    dim3 grid((unsigned)((a.S + BQ - 1) / BQ), (unsigned)(a.B * a.Hq));
    CPA_LAUNCH(cpa_fwd_kernel, grid, a, 0, dg_cuda_ctx_of(e)->stream);
    return dg_cuda_launched();
}

size_t dg_cuda_ws_cp_attn_block_bwd(const dg_graph *g, const dg_node *n) {
    const dg_tensor *q = DG_IN(g, n, 0);
    return sizeof(float) * (size_t)(q->shape[0] * q->shape[2] * q->shape[1]);
}

/* inputs q, k, v, cp_rank, o, do, lse (, dlse); outputs dq, dk, dv */
int dg_cuda_k_cp_attn_block_bwd(DG_CUDA_KARGS) {
    cpa_args a = args_of(e, g, n);
    if (a.S == 0) return DG_OK;
    if (a.D > MAX_D || e->workspace_bytes < dg_cuda_ws_cp_attn_block_bwd(g, n)) return DG_EINTERNAL;
    a.q = (const float *)in[0];
    a.k = (const float *)in[1];
    a.v = (const float *)in[2];
    a.rank = (const int32_t *)in[3];
    a.o = (const float *)in[4];
    a.dout = (const float *)in[5];
    a.lse = (const float *)in[6];
    a.dlse = n->n_in > 7 ? (const float *)in[7] : NULL;
    a.dq = (float *)out[0];
    a.dk = (float *)out[1];
    a.dv = (float *)out[2];
    a.delta = (float *)e->workspace;
    cudaStream_t st = dg_cuda_ctx_of(e)->stream;
    unsigned tiles = (unsigned)((a.S + BQ - 1) / BQ);
    cpa_delta_kernel<<<dg_cuda_blocks(a.B * a.Hq * a.S, 256), 256, 0, st>>>(a);
    dim3 gkv(tiles, (unsigned)(a.B * a.Hkv)), gq(tiles, (unsigned)(a.B * a.Hq));
    CPA_LAUNCH(cpa_dkdv_kernel, gkv, a, 2 * BK, st);
    CPA_LAUNCH(cpa_dq_kernel, gq, a, 0, st);
    return dg_cuda_launched();
}
