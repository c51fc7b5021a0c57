/* dg_cuda_k_xent.cu — fused softmax cross-entropy with a loss mask
 * (dg_cpu_xent.h): logits [N, V], targets [N] i32, mask [N] or none,
 * loss [1], lse [N]; backward dlogits [N, V] from lse and the device scalar
 * dloss. Rows with mask 0 never read their target; a target outside [0, V)
 * on any other row flags the node (DG_EINPUT at the executor's next sync).
 * Sums over rows run in one block in a fixed order (double). */
#include "dg_cuda_internal.h"

#define NT 256

__device__ static inline float row_mask(const float *mask, int64_t i) { return mask ? mask[i] : 1.0f; }

/* lse[r] = max + log(sum exp(x - max)) and ce[r] = mask * (lse - x[target])
 * (0 for masked rows); one block per row. ws_ce: [N]. */
__global__ static void lse_kernel(const float *logits, const int32_t *tgt, const float *mask,
                                  float *lse, double *ce, int64_t V, int *bad, int node) {
    __shared__ double sh[NT];
    __shared__ float shf[NT];
    const int64_t r = blockIdx.x;
    const float *x = logits + r * V;
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < V; j += blockDim.x) mx = fmaxf(mx, x[j]);
    mx = dg_cuda_block_max(mx, shf);
    double s = 0;
    for (int64_t j = threadIdx.x; j < V; j += blockDim.x) s += expf(x[j] - mx);
    s = dg_cuda_block_sum(s, sh);
    if (threadIdx.x != 0) return;
    float l = mx + (float)log(s);
    lse[r] = l;
    float m = row_mask(mask, r);
    double c = 0;
    if (m != 0.0f) {
        int32_t t = tgt[r];
        if (t < 0 || t >= V)
            dg_cuda_flag_bad(bad, node);
        else
            c = (double)m * (double)(l - x[t]);
    }
    ce[r] = c;
}

/* out[0] = sum(num) / sum(mask) (0 when the mask sums to 0); num may be NULL
 * (then out[0] = sum(mask), the denominator alone). One block. */
__global__ static void masked_mean_kernel(const double *num, const float *mask, int64_t N, float *out) {
    __shared__ double sh[1024];
    double a = 0, d = 0;
    for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
        if (num) a += num[i];
        d += row_mask(mask, i);
    }
    a = dg_cuda_block_sum(a, sh);
    d = dg_cuda_block_sum(d, sh);
    if (threadIdx.x == 0) out[0] = num ? (d != 0 ? (float)(a / d) : 0.0f) : (float)d;
}

size_t dg_cuda_ws_xent(const dg_graph *g, const dg_node *n) {
    return sizeof(double) * (size_t)dg_rows(DG_IN(g, n, 0)) + 256;
}

int dg_cuda_k_xent(DG_CUDA_KARGS) {
    const dg_tensor *lg = DG_IN(g, n, 0);
    int64_t N = dg_rows(lg), V = dg_cols(lg);
    if (e->workspace_bytes < dg_cuda_ws_xent(g, n)) return DG_EINTERNAL;
    dg_cuda_ctx *c = dg_cuda_ctx_of(e);
    const float *mask = n->n_in > 2 ? (const float *)in[2] : NULL;
    double *ce = (double *)e->workspace;
    if (N > 0)
        lse_kernel<<<(unsigned)N, NT, 0, c->stream>>>((const float *)in[0], (const int32_t *)in[1],
                                                      mask, (float *)out[1], ce, V, c->bad, n->id);
    masked_mean_kernel<<<1, 1024, 0, c->stream>>>(ce, mask, N, (float *)out[0]);
    return dg_cuda_launched();
}

/* dlogits = (softmax - onehot) * mask * dloss / sum(mask); den: device [1]. */
__global__ static void xent_bwd_kernel(const float *logits, const int32_t *tgt, const float *mask,
                                       const float *lse, const float *dloss, const float *den,
                                       float *d, int64_t N, int64_t V, int *bad, int node) {
    float scale = *den != 0.0f ? (float)((double)*dloss / (double)*den) : 0.0f;
    DG_CUDA_FOR(i, N * V) {
        int64_t r = i / V, j = i % V;
        float s = row_mask(mask, r) * scale;
        if (s == 0.0f) {
            d[i] = 0.0f;
            continue;
        }
        int32_t t = tgt[r];
        if (t < 0 || t >= V) {
            if (j == 0) dg_cuda_flag_bad(bad, node);
            d[i] = 0.0f;
            continue;
        }
        float p = expf(logits[i] - lse[r]);
        d[i] = j == t ? (p - 1.0f) * s : p * s;
    }
}

/* inputs: logits, targets, lse, dloss (device scalar), mask (optional) */
int dg_cuda_k_xent_bwd(DG_CUDA_KARGS) {
    const dg_tensor *lg = DG_IN(g, n, 0);
    int64_t N = dg_rows(lg), V = dg_cols(lg);
    if (e->workspace_bytes < dg_cuda_ws_xent(g, n)) return DG_EINTERNAL;
    dg_cuda_ctx *c = dg_cuda_ctx_of(e);
    const float *mask = n->n_in > 4 ? (const float *)in[4] : NULL;
    float *den = (float *)e->workspace;
    masked_mean_kernel<<<1, 1024, 0, c->stream>>>(NULL, mask, N, den);
    xent_bwd_kernel<<<dg_cuda_blocks(N * V, 256), 256, 0, c->stream>>>(
        (const float *)in[0], (const int32_t *)in[1], mask, (const float *)in[2],
        (const float *)in[3], den, (float *)out[0], N, V, c->bad, n->id);
    return dg_cuda_launched();
}
