/* dg_cuda_k_moe.cu — MoE kernels with the CPU kernels' contracts
 * (dg_cpu_moe.h): z-loss and its gradient, token permutation (route +
 * gather), unpermutation (invert + combine), the gather by a row map, and
 * the probabilities' gradient. T tokens, E experts, k slots per token,
 * N = T*k permuted rows, H hidden.
 *
 * The permutation keeps the CPU's order exactly (rows grouped by expert,
 * tokens ascending within an expert) without a sort: one thread per expert
 * counts its slots, one thread forms the offsets, and one thread per expert
 * writes its rows in slot order. Bad expert ids or row maps flag the node
 * (DG_EINPUT at the executor's next sync). The router shares its
 * per-token selection with the CPU kernel (dg_moe_route_select); the
 * load-balancing loss runs on the host for now (docs/cuda.md). */
#include "dg_cuda_internal.h"

#define TPB 256

/* ---- z-loss: z = coeff * mean_t lse_t^2 ------------------------------------------------ */

/* lse [T] (double) of logits [T, E]; one thread per token, the shared helper. */
__global__ static void z_lse_kernel(const float *z, int64_t T, int64_t E, double *lse) {
    DG_CUDA_FOR(t, T) {
        float m;
        double s;
        dg_moe_softmax_stats(z + t * E, (int)E, &m, &s);
        lse[t] = (double)m + log(s);
    }
}

__global__ static void z_sum_kernel(const double *lse, int64_t T, float coeff, float *out) {
    __shared__ double sh[1024];
    double s = 0;
    for (int64_t t = threadIdx.x; t < T; t += blockDim.x) s += lse[t] * lse[t];
    s = dg_cuda_block_sum(s, sh);
    if (threadIdx.x == 0) out[0] = (float)(s / (double)T * coeff);
}

/* dlogits [T, E] = dloss * coeff * 2 lse_t / T * softmax(logits_t) */
__global__ static void z_grad_kernel(const float *z, int64_t T, int64_t E, float coeff,
                                     const float *dloss, float *dz) {
    float c = (float)((double)*dloss * coeff * 2.0 / (double)T);
    DG_CUDA_FOR(t, T) {
        float m;
        double s;
        dg_moe_softmax_stats(z + t * E, (int)E, &m, &s);
        double gr = (double)c * ((double)m + log(s));
        for (int64_t e = 0; e < E; e++) dz[t * E + e] = (float)(gr * dg_moe_softmax_at(z[t * E + e], m, s));
    }
}

size_t dg_cuda_ws_z_loss(const dg_graph *g, const dg_node *n) {
    return sizeof(double) * (size_t)DG_IN(g, n, 0)->shape[0];
}

int dg_cuda_k_z_loss(DG_CUDA_KARGS) {
    const dg_tensor *z = DG_IN(g, n, 0);
    int64_t T = z->shape[0], E = z->shape[1];
    if (e->workspace_bytes < dg_cuda_ws_z_loss(g, n)) return DG_EINTERNAL;
    cudaStream_t st = dg_cuda_ctx_of(e)->stream;
    double *lse = (double *)e->workspace;
    z_lse_kernel<<<dg_cuda_blocks(T, TPB), TPB, 0, st>>>((const float *)in[0], T, E, lse);
    z_sum_kernel<<<1, 1024, 0, st>>>(lse, T, (float)n->attrs.f[0], (float *)out[0]);
    return dg_cuda_launched();
}

/* inputs: dloss (device scalar), logits */
int dg_cuda_k_z_loss_grad(DG_CUDA_KARGS) {
    const dg_tensor *z = DG_IN(g, n, 1);
    int64_t T = z->shape[0], E = z->shape[1];
    z_grad_kernel<<<dg_cuda_blocks(T, TPB), TPB, 0, dg_cuda_ctx_of(e)->stream>>>(
        (const float *)in[1], T, E, (float)n->attrs.f[0], (const float *)in[0], (float *)out[0]);
    return dg_cuda_launched();
}

/* ---- permutation ------------------------------------------------------------------------ */

/* counts[e] = slots routed to e; an id outside [-1, E) flags the node. */
__global__ static void route_count_kernel(const int32_t *idx, int64_t TK, int64_t E, int32_t *counts,
                                          int *bad, int node) {
    DG_CUDA_FOR(e, E) {
        int32_t c = 0;
        for (int64_t i = 0; i < TK; i++) {
            if (idx[i] == e) c++;
            if (e == 0 && (idx[i] < -1 || idx[i] >= E)) dg_cuda_flag_bad(bad, node);
        }
        counts[e] = c;
    }
}

/* offs[e] = counts[0] + ... + counts[e-1]; one thread. */
__global__ static void route_scan_kernel(const int32_t *counts, int64_t E, int64_t *offs) {
    int64_t o = 0;
    for (int64_t e = 0; e < E; e++) {
        offs[e] = o;
        o += counts[e];
    }
}

/* row_map [TK]: expert e's rows from offs[e], slots in order; tail rows -1. */
__global__ static void route_fill_kernel(const int32_t *idx, int64_t TK, int64_t E, const int32_t *counts,
                                         const int64_t *offs, int32_t *row_map) {
    DG_CUDA_FOR(e, E) {
        int64_t o = offs[e];
        for (int64_t i = 0; i < TK; i++)
            if (idx[i] == e) row_map[o++] = (int32_t)i;
        if (e == E - 1)
            for (int64_t r = offs[e] + counts[e]; r < TK; r++) row_map[r] = -1;
    }
}

/* out [N, H]: out[r] = x[s / k] * (probs ? probs[s] : 1), s = map[r]; zero
 * rows for s = -1; s outside [-1, TK) flags the node. */
__global__ static void gather_kernel(const float *x, const float *probs, const int32_t *map, int64_t N,
                                     int64_t H, int k, int64_t TK, float *out, int *bad, int node) {
    DG_CUDA_FOR(i, N * H) {
        int64_t r = i / H, h = i % H;
        int32_t s = map[r];
        if (s < -1 || s >= TK) {
            if (h == 0) dg_cuda_flag_bad(bad, node);
            out[i] = 0.0f;
        } else {
            out[i] = s < 0 ? 0.0f : x[(s / k) * H + h] * (probs ? probs[s] : 1.0f);
        }
    }
}

/* slot_row [TK] = the row each slot went to, -1 if none (from map [N]). */
__global__ static void invert_fill_kernel(int32_t *slot_row, int64_t TK) {
    DG_CUDA_FOR(i, TK) slot_row[i] = -1;
}
__global__ static void invert_kernel(const int32_t *map, int64_t N, int64_t TK, int32_t *slot_row,
                                     int *bad, int node) {
    DG_CUDA_FOR(r, N) {
        int32_t s = map[r];
        if (s >= TK || s < -1)
            dg_cuda_flag_bad(bad, node);
        else if (s >= 0)
            slot_row[s] = (int32_t)r;
    }
}

/* out [T, H] = sum over slots j in order of (probs ? probs[t, j] : 1) * y[slot_row] */
__global__ static void combine_kernel(const float *y, const float *probs, const int32_t *slot_row,
                                      int64_t T, int k, int64_t H, float *out) {
    DG_CUDA_FOR(i, T * H) {
        int64_t t = i / H, h = i % H;
        float s = 0.0f;
        for (int j = 0; j < k; j++) {
            int32_t r = slot_row[t * k + j];
            if (r >= 0) s += (probs ? probs[t * k + j] : 1.0f) * y[(int64_t)r * H + h];
        }
        out[i] = s;
    }
}

/* dprobs [T, k] = <dy[t], y[slot_row[t, j]]> (double), 0 if dropped */
__global__ static void dprobs_kernel(const float *dy, const float *y, const int32_t *slot_row,
                                     int64_t T, int k, int64_t H, float *dp) {
    DG_CUDA_FOR(s, T * k) {
        int32_t r = slot_row[s];
        double acc = 0;
        if (r >= 0)
            for (int64_t h = 0; h < H; h++) acc += (double)dy[(s / k) * H + h] * y[(int64_t)r * H + h];
        dp[s] = (float)acc;
    }
}

static size_t ws_invert(int64_t TK) { return sizeof(int32_t) * (size_t)(TK > 0 ? TK : 1); }

size_t dg_cuda_ws_permute(const dg_graph *g, const dg_node *n) {
    (void)g;
    return sizeof(int64_t) * (size_t)(n->attrs.i[0] > 0 ? n->attrs.i[0] : 1);
}
size_t dg_cuda_ws_unpermute(const dg_graph *g, const dg_node *n) {
    (void)g;
    return ws_invert(n->attrs.i[0] * n->attrs.i[1]);
}
size_t dg_cuda_ws_dprobs(const dg_graph *g, const dg_node *n) {
    return ws_invert(DG_IN(g, n, 0)->shape[0] * n->attrs.i[0]);
}

/* inputs x [T, H], indices [T, k]; attrs i[0] = E; outputs rows [T*k, H],
 * counts [E], row_map [T*k] */
int dg_cuda_k_permute(DG_CUDA_KARGS) {
    const dg_tensor *x = DG_IN(g, n, 0), *ix = DG_IN(g, n, 1);
    int64_t T = x->shape[0], H = x->shape[1], k = ix->shape[1], E = n->attrs.i[0], TK = T * k;
    if (e->workspace_bytes < sizeof(int64_t) * (size_t)E) return DG_EINTERNAL;
    dg_cuda_ctx *c = dg_cuda_ctx_of(e);
    const int32_t *idx = (const int32_t *)in[1];
    int32_t *counts = (int32_t *)out[1], *map = (int32_t *)out[2];
    int64_t *offs = (int64_t *)e->workspace;
    route_count_kernel<<<dg_cuda_blocks(E, 64), 64, 0, c->stream>>>(idx, TK, E, counts, c->bad, n->id);
    route_scan_kernel<<<1, 1, 0, c->stream>>>(counts, E, offs);
    route_fill_kernel<<<dg_cuda_blocks(E, 64), 64, 0, c->stream>>>(idx, TK, E, counts, offs, map);
    gather_kernel<<<dg_cuda_blocks(TK * H, TPB), TPB, 0, c->stream>>>(
        (const float *)in[0], NULL, map, TK, H, (int)k, TK, (float *)out[0], c->bad, n->id);
    return dg_cuda_launched();
}

/* inputs y [N, H], row_map [N], probs [T, k] (optional); attrs i[0] = T, i[1] = k */
int dg_cuda_k_unpermute(DG_CUDA_KARGS) {
    const dg_tensor *y = DG_IN(g, n, 0);
    int64_t T = n->attrs.i[0], k = n->attrs.i[1], N = y->shape[0], H = y->shape[1];
    if (e->workspace_bytes < ws_invert(T * k)) return DG_EINTERNAL;
    dg_cuda_ctx *c = dg_cuda_ctx_of(e);
    int32_t *slot_row = (int32_t *)e->workspace;
    invert_fill_kernel<<<dg_cuda_blocks(T * k, TPB), TPB, 0, c->stream>>>(slot_row, T * k);
    invert_kernel<<<dg_cuda_blocks(N, TPB), TPB, 0, c->stream>>>((const int32_t *)in[1], N, T * k,
                                                                 slot_row, c->bad, n->id);
    combine_kernel<<<dg_cuda_blocks(T * H, TPB), TPB, 0, c->stream>>>(
        (const float *)in[0], n->n_in > 2 ? (const float *)in[2] : NULL, slot_row, T, (int)k, H,
        (float *)out[0]);
    return dg_cuda_launched();
}

/* inputs x [T, H], map [R], probs (optional); attrs i[0] = k; out [R, H] */
int dg_cuda_k_gather(DG_CUDA_KARGS) {
    const dg_tensor *x = DG_IN(g, n, 0), *m = DG_IN(g, n, 1);
    int64_t k = n->attrs.i[0], R = m->shape[0], H = x->shape[1];
    dg_cuda_ctx *c = dg_cuda_ctx_of(e);
    gather_kernel<<<dg_cuda_blocks(R * H, TPB), TPB, 0, c->stream>>>(
        (const float *)in[0], n->n_in > 2 ? (const float *)in[2] : NULL, (const int32_t *)in[1], R,
        H, (int)k, x->shape[0] * k, (float *)out[0], c->bad, n->id);
    return dg_cuda_launched();
}

/* inputs dy [T, H], y [N, H], row_map [N]; attrs i[0] = k; out [T, k] */
int dg_cuda_k_unpermute_probs_grad(DG_CUDA_KARGS) {
    const dg_tensor *dy = DG_IN(g, n, 0), *y = DG_IN(g, n, 1);
    int64_t T = dy->shape[0], k = n->attrs.i[0], H = dy->shape[1], N = y->shape[0];
    if (e->workspace_bytes < ws_invert(T * k)) return DG_EINTERNAL;
    dg_cuda_ctx *c = dg_cuda_ctx_of(e);
    int32_t *slot_row = (int32_t *)e->workspace;
    invert_fill_kernel<<<dg_cuda_blocks(T * k, TPB), TPB, 0, c->stream>>>(slot_row, T * k);
    invert_kernel<<<dg_cuda_blocks(N, TPB), TPB, 0, c->stream>>>((const int32_t *)in[2], N, T * k,
                                                                 slot_row, c->bad, n->id);
    dprobs_kernel<<<dg_cuda_blocks(T * k, TPB), TPB, 0, c->stream>>>(
        (const float *)in[0], (const float *)in[1], slot_row, T, (int)k, H, (float *)out[0]);
    return dg_cuda_launched();
}

/* ---- router (dg_cpu_moe.h) ---------------------------------------------------------------
 * logits [T, E] (, expert bias [E]) -> probs [T, k], indices [T, k] i32,
 * routed [E] i32 (counts before dropping). One thread per token runs the
 * shared per-token selection; one thread per expert counts; with a capacity
 * (and capacity <= T, as Megatron), one thread per expert ranks its slots
 * by (prob desc, slot asc) — or by position — into a drop flag per slot,
 * then one thread per slot applies the flags. The ranking is quadratic in
 * an expert's slots: the correct, simple form. */

__global__ static void router_kernel(dg_moe_router_cfg c, const float *z, int64_t T, int64_t E,
                                     float *probs, int32_t *idx_out) {
    DG_CUDA_FOR(t, T) {
        float val[DG_MOE_MAX_K], pr[DG_MOE_MAX_K];
        int idx[DG_MOE_MAX_K];
        dg_moe_route_select(&c, z + t * E, (int)E, val, idx, pr);
        for (int j = 0; j < c.k; j++) {
            probs[t * c.k + j] = c.scaling != 0.0f ? pr[j] * c.scaling : pr[j];
            idx_out[t * c.k + j] = idx[j];
        }
    }
}

/* drop[s] = 1 for the slots of expert e past its capacity */
__global__ static void router_rank_kernel(dg_moe_router_cfg c, const float *probs, const int32_t *idx,
                                          int64_t TK, int64_t E, unsigned char *drop) {
    DG_CUDA_FOR(e, E) {
        int64_t pos = 0;
        for (int64_t s = 0; s < TK; s++) {
            if (idx[s] != e) continue;
            int64_t rank = pos++;
            if (c.policy == DG_MOE_DROP_PROBS) {
                rank = 0;
                for (int64_t s2 = 0; s2 < TK; s2++)
                    if (idx[s2] == e && dg_moe_before(probs[s2], (int)s2, probs[s], (int)s)) rank++;
            }
            drop[s] = rank >= c.capacity;
        }
    }
}

__global__ static void router_drop_kernel(const unsigned char *drop, int64_t TK, float *probs, int32_t *idx) {
    DG_CUDA_FOR(s, TK) {
        if (drop[s]) {
            probs[s] = 0.0f;
            idx[s] = -1;
        }
    }
}

/* dlogits [T, E] from dprobs [T, k], logits, the forward's indices */
__global__ static void router_bwd_kernel(dg_moe_router_cfg c, const float *dprobs, const float *z,
                                         const int32_t *idx, int64_t T, int64_t E, float *dz) {
    DG_CUDA_FOR(t, T) dg_moe_router_bwd_row(&c, z + t * E, (int)E, dprobs + t * c.k, idx + t * c.k, dz + t * E);
}

/* attrs as moe/dg_router.c reads them: i = {k, score, pre_softmax, policy,
 * num_groups, group_topk}, f = {capacity factor, scaling} */
static dg_moe_router_cfg router_cfg(const dg_node *n, int64_t T, int64_t E, const float *bias) {
    dg_moe_router_cfg c;
    memset(&c, 0, sizeof c);
    c.k = (int)n->attrs.i[0];
    c.score = (dg_moe_score_fn)n->attrs.i[1];
    c.pre_softmax = (int)n->attrs.i[2];
    c.policy = (dg_moe_drop_policy)n->attrs.i[3];
    c.scaling = (float)n->attrs.f[1];
    c.capacity = n->attrs.f[0] > 0 ? dg_moe_capacity(T, c.k, E, n->attrs.f[0]) : 0;
    c.num_groups = (int)n->attrs.i[4];
    c.group_topk = (int)n->attrs.i[5];
    c.bias = bias;
    return c;
}

size_t dg_cuda_ws_router(const dg_graph *g, const dg_node *n) {
    const dg_tensor *z = DG_IN(g, n, 0);
    return (size_t)(z->shape[0] * n->attrs.i[0]) + 1;
}

int dg_cuda_k_router(DG_CUDA_KARGS) {
    const dg_tensor *zt = DG_IN(g, n, 0);
    int64_t T = zt->shape[0], E = zt->shape[1];
    dg_moe_router_cfg c = router_cfg(n, T, E, n->n_in > 1 ? (const float *)in[1] : NULL);
    int64_t TK = T * c.k;
    if (c.k > DG_MOE_MAX_K || e->workspace_bytes < dg_cuda_ws_router(g, n)) return DG_EINTERNAL;
    cudaStream_t st = dg_cuda_ctx_of(e)->stream;
    float *probs = (float *)out[0];
    int32_t *idx = (int32_t *)out[1];
    router_kernel<<<dg_cuda_blocks(T, 128), 128, 0, st>>>(c, (const float *)in[0], T, E, probs, idx);
    int kept = n->attrs.i[6] != 0; /* count after dropping (dg_router.h's count_kept) */
    if (!kept)
        route_count_kernel<<<dg_cuda_blocks(E, 64), 64, 0, st>>>(idx, TK, E, (int32_t *)out[2],
                                                                 dg_cuda_ctx_of(e)->bad, n->id);
    if (c.capacity > 0 && c.capacity <= T) {
        unsigned char *drop = (unsigned char *)e->workspace;
        router_rank_kernel<<<dg_cuda_blocks(E, 64), 64, 0, st>>>(c, probs, idx, TK, E, drop);
        router_drop_kernel<<<dg_cuda_blocks(TK, TPB), TPB, 0, st>>>(drop, TK, probs, idx);
    }
    if (kept)
        route_count_kernel<<<dg_cuda_blocks(E, 64), 64, 0, st>>>(idx, TK, E, (int32_t *)out[2],
                                                                 dg_cuda_ctx_of(e)->bad, n->id);
    return dg_cuda_launched();
}

/* inputs dprobs [T, k], logits [T, E], indices [T, k] (, bias); out dlogits */
int dg_cuda_k_router_grad(DG_CUDA_KARGS) {
    const dg_tensor *zt = DG_IN(g, n, 1);
    int64_t T = zt->shape[0], E = zt->shape[1];
    dg_moe_router_cfg c = router_cfg(n, T, E, n->n_in > 3 ? (const float *)in[3] : NULL);
    if (c.k > DG_MOE_MAX_K) return DG_EINTERNAL;
    router_bwd_kernel<<<dg_cuda_blocks(T, 128), 128, 0, dg_cuda_ctx_of(e)->stream>>>(
        c, (const float *)in[0], (const float *)in[1], (const int32_t *)in[2], T, E, (float *)out[0]);
    return dg_cuda_launched();
}
