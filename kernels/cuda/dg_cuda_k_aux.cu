/* dg_cuda_k_aux.cu — the load-balancing (aux) loss and its gradient, the
 * CPU kernels' contract (dg_cpu_moe.h, moe/dg_moe_loss.h):
 *   aux = coeff * E / (k S^2) / B * sum_b sum_e P_be f_be
 * over logits [T, E] in B sequences of S tokens; f [B, E] counts from the
 * routing input (indices [T, k] or tokens per expert [E]) or, without one,
 * from the top-k of each token's aux scores (Megatron's own counts). The
 * per-token math is the shared DG_HD helpers; P_be sums its sequence's
 * tokens in token order (one thread per (b, e)); the final sum runs in one
 * block in a fixed order. Attrs: i = {k, score, B, seq_major, seq_counts},
 * f = {coeff}; seq_counts: the routing input is i32 counts [B, E].
 * moe_seq_counts: Megatron's own counts as i32 [B, E]. */
#include "dg_cuda_internal.h"

#define TPB 256

static dg_moe_seqs seqs_of(const dg_node *n) {
    dg_moe_seqs q = {n->attrs.i[2] > 1 ? n->attrs.i[2] : 1, (int)n->attrs.i[3]};
    return q;
}

/* coeff * E / (k S^2) / B, as the CPU's aux_scale */
static double aux_scale(int64_t T, int64_t E, int k, dg_moe_seqs q, float coeff) {
    double B = (double)q.B, S = (double)T / B;
    return (double)E * coeff / ((double)k * S * S) / B;
}

/* workspace: f [B*E] floats, idx [T*k] i32, scores [T*E] floats, P [B*E] doubles */
typedef struct aux_ws {
    float *f, *scores;
    int32_t *idx;
    double *P;
} aux_ws;

static size_t al(size_t x) { return (x + 255) & ~(size_t)255; }

static size_t ws_layout(int64_t T, int64_t E, int64_t k, dg_moe_seqs q, char *base, aux_ws *w) {
    size_t o = 0;
    if (w) w->f = (float *)(base + o);
    o += al(sizeof(float) * (size_t)(q.B * E));
    if (w) w->idx = (int32_t *)(base + o);
    o += al(sizeof(int32_t) * (size_t)(T * k));
    if (w) w->scores = (float *)(base + o);
    o += al(sizeof(float) * (size_t)(T * E));
    if (w) w->P = (double *)(base + o);
    o += al(sizeof(double) * (size_t)(q.B * E));
    return o;
}

/* logits are input zin; the routing input, if any, follows them */
static size_t ws_aux_at(const dg_graph *g, const dg_node *n, int zin) {
    const dg_tensor *z = DG_IN(g, n, zin);
    return ws_layout(z->shape[0], z->shape[1], n->attrs.i[0], seqs_of(n), NULL, NULL);
}
size_t dg_cuda_ws_aux(const dg_graph *g, const dg_node *n) { return ws_aux_at(g, n, 0); }
size_t dg_cuda_ws_aux_grad(const dg_graph *g, const dg_node *n) { return ws_aux_at(g, n, 1); }

__global__ static void aux_topk_kernel(dg_moe_score_fn score, const float *z, int64_t T, int64_t E,
                                       int k, int32_t *idx) {
    DG_CUDA_FOR(t, T) dg_moe_aux_topk_row(score, z + t * E, E, k, idx + t * k);
}

/* f [B, E]: slots of indices [T, k] per (sequence, expert); ids outside
 * [0, E) are skipped */
__global__ static void aux_count_kernel(const int32_t *idx, int64_t T, int k, int64_t E, dg_moe_seqs q,
                                        float *f) {
    DG_CUDA_FOR(u, q.B * E) {
        int64_t b = u / E, e = u % E;
        float c = 0.0f;
        for (int64_t i = 0; i < T * k; i++)
            if (idx[i] == e && dg_moe_seq_of(q, i / k, T) == b) c += 1.0f;
        f[u] = c;
    }
}

__global__ static void aux_tpe_kernel(const int32_t *c, int64_t E, float *f) {
    DG_CUDA_FOR(e, E) f[e] = (float)c[e];
}

__global__ static void aux_scores_kernel(dg_moe_score_fn score, const float *z, int64_t T, int64_t E,
                                         float *s) {
    DG_CUDA_FOR(t, T) dg_moe_aux_scores_row(score, z + t * E, E, s + t * E);
}

/* P [B, E]: each sequence's scores summed in token order */
__global__ static void aux_p_kernel(const float *s, int64_t T, int64_t E, dg_moe_seqs q, double *P) {
    DG_CUDA_FOR(u, q.B * E) {
        int64_t b = u / E, e = u % E, S = T / q.B;
        double acc = 0;
        for (int64_t i = 0; i < S; i++) {
            int64_t t = q.seq_major ? i * q.B + b : b * S + i;
            acc += s[t * E + e];
        }
        P[u] = acc;
    }
}

__global__ static void aux_sum_kernel(const double *P, const float *f, int64_t n, double scale, float *out) {
    __shared__ double sh[1024];
    double s = 0;
    for (int64_t u = threadIdx.x; u < n; u += blockDim.x) s += P[u] * (double)f[u];
    s = dg_cuda_block_sum(s, sh);
    if (threadIdx.x == 0) out[0] = (float)(s * scale);
}

__global__ static void aux_bwd_kernel(dg_moe_score_fn score, const float *z, int64_t T, int64_t E,
                                      dg_moe_seqs q, const float *f, const float *dloss, double scale,
                                      float *dz) {
    float c = (float)((double)*dloss * scale);
    DG_CUDA_FOR(t, T) dg_moe_aux_bwd_row(score, z + t * E, E, f + dg_moe_seq_of(q, t, T) * E, c, dz + t * E);
}

/* f into w->f from the routing input r (NULL: Megatron's top-k counts) */
static int aux_counts(cudaStream_t st, const dg_node *n, const float *z, int64_t T, int64_t E,
                      const dg_tensor *r, const void *routing, aux_ws *w) {
    int k = (int)n->attrs.i[0];
    dg_moe_seqs q = seqs_of(n);
    dg_moe_score_fn score = (dg_moe_score_fn)n->attrs.i[1];
    if (k > DG_MOE_MAX_K) return DG_EINTERNAL;
    if (!r) {
        aux_topk_kernel<<<dg_cuda_blocks(T, 128), 128, 0, st>>>(score, z, T, E, k, w->idx);
        aux_count_kernel<<<dg_cuda_blocks(q.B * E, 64), 64, 0, st>>>(w->idx, T, k, E, q, w->f);
    } else if (n->attrs.i[4]) { /* seq_counts: i32 counts per sequence [B, E] */
        aux_tpe_kernel<<<dg_cuda_blocks(q.B * E, 64), 64, 0, st>>>((const int32_t *)routing, q.B * E, w->f);
    } else if (r->ndim == 2) {
        aux_count_kernel<<<dg_cuda_blocks(q.B * E, 64), 64, 0, st>>>((const int32_t *)routing, T,
                                                                      (int)r->shape[1], E, q, w->f);
    } else {
        aux_tpe_kernel<<<dg_cuda_blocks(E, 64), 64, 0, st>>>((const int32_t *)routing, E, w->f);
    }
    return dg_cuda_launched();
}

/* inputs logits [T, E] (, routing); out the loss [1] */
int dg_cuda_k_aux_loss(DG_CUDA_KARGS) {
    const dg_tensor *zt = DG_IN(g, n, 0);
    int64_t T = zt->shape[0], E = zt->shape[1];
    if (e->workspace_bytes < dg_cuda_ws_aux(g, n)) return DG_EINTERNAL;
    cudaStream_t st = dg_cuda_ctx_of(e)->stream;
    dg_moe_seqs q = seqs_of(n);
    aux_ws w;
    ws_layout(T, E, n->attrs.i[0], q, (char *)e->workspace, &w);
    const float *z = (const float *)in[0];
    DG_TRY(aux_counts(st, n, z, T, E, n->n_in > 1 ? DG_IN(g, n, 1) : NULL, n->n_in > 1 ? in[1] : NULL, &w));
    dg_moe_score_fn score = (dg_moe_score_fn)n->attrs.i[1];
    aux_scores_kernel<<<dg_cuda_blocks(T, 128), 128, 0, st>>>(score, z, T, E, w.scores);
    aux_p_kernel<<<dg_cuda_blocks(q.B * E, 64), 64, 0, st>>>(w.scores, T, E, q, w.P);
    aux_sum_kernel<<<1, 1024, 0, st>>>(w.P, w.f, q.B * E,
                                       aux_scale(T, E, (int)n->attrs.i[0], q, (float)n->attrs.f[0]),
                                       (float *)out[0]);
    return dg_cuda_launched();
}

/* inputs dloss (device scalar), logits (, routing); out dlogits [T, E] */
int dg_cuda_k_aux_loss_grad(DG_CUDA_KARGS) {
    const dg_tensor *zt = DG_IN(g, n, 1);
    int64_t T = zt->shape[0], E = zt->shape[1];
    if (e->workspace_bytes < dg_cuda_ws_aux_grad(g, n)) return DG_EINTERNAL;
    cudaStream_t st = dg_cuda_ctx_of(e)->stream;
    dg_moe_seqs q = seqs_of(n);
    aux_ws w;
    ws_layout(T, E, n->attrs.i[0], q, (char *)e->workspace, &w);
    const float *z = (const float *)in[1];
    DG_TRY(aux_counts(st, n, z, T, E, n->n_in > 2 ? DG_IN(g, n, 2) : NULL, n->n_in > 2 ? in[2] : NULL, &w));
    aux_bwd_kernel<<<dg_cuda_blocks(T, 128), 128, 0, st>>>(
        (dg_moe_score_fn)n->attrs.i[1], z, T, E, q, w.f, (const float *)in[0],
        aux_scale(T, E, (int)n->attrs.i[0], q, (float)n->attrs.f[0]), (float *)out[0]);
    return dg_cuda_launched();
}

__global__ static void seq_counts_int_kernel(const float *f, int64_t n, int32_t *c) {
    DG_CUDA_FOR(u, n) c[u] = (int32_t)f[u];
}

size_t dg_cuda_ws_seq_counts(const dg_graph *g, const dg_node *n) { return ws_aux_at(g, n, 0); }

/* inputs logits [T, E]; out i32 counts [B, E] */
int dg_cuda_k_seq_counts(DG_CUDA_KARGS) {
    const dg_tensor *zt = DG_IN(g, n, 0);
    int64_t T = zt->shape[0], E = zt->shape[1];
    if (e->workspace_bytes < dg_cuda_ws_seq_counts(g, n)) return DG_EINTERNAL;
    cudaStream_t st = dg_cuda_ctx_of(e)->stream;
    dg_moe_seqs q = seqs_of(n);
    aux_ws w;
    ws_layout(T, E, n->attrs.i[0], q, (char *)e->workspace, &w);
    DG_TRY(aux_counts(st, n, (const float *)in[0], T, E, NULL, NULL, &w));
    seq_counts_int_kernel<<<dg_cuda_blocks(q.B * E, 64), 64, 0, st>>>(w.f, q.B * E, (int32_t *)out[0]);
    return dg_cuda_launched();
}
