/* dg_cpu_attention.c — flash-style attention forward and backward (see
 * dg_cpu_attention.h for the algorithm and the layouts). */
#include "dg_cpu_attention.h"

#include <cblas.h>
#include <math.h>

#include "dg_base.h"

#define T DG_ATTN_TILE

/* Everything a pass needs; one per kernel call, read-only in the passes. */
typedef struct attn_ctx {
    const dg_attn_dims *d;
    const float *q, *k, *v, *o, *dout, *lse, *dlse;
    const float *sink; /* [Hq] when d->sink == 2 */
    float *o_out, *lse_out, *dq, *dk, *dv;
    float *delta;     /* [B, Hq, S] */
    char *scratch;    /* nth blocks of per_thread bytes */
    size_t per_thread;
    int nth;
    int64_t nt;       /* tiles along S */
} attn_ctx;

static size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

/* Carve 64-byte aligned float arrays out of a thread's scratch block. */
static float *take(char **p, size_t nfloats) {
    float *r = (float *)*p;
    *p += round64(sizeof(float) * nfloats);
    return r;
}

/* Per-thread scratch. Forward: score tile [T, T], Q^T [D, T], accumulator
 * [T, D], and per row m, l, new max, rescale factor, tile sum [T], and
 * dropout's factors of a tile row [T].
 * Backward: two score tiles [T, T], two transposed operand tiles [D, T],
 * lse / Delta of a query tile and dropout's factors [T]. */
static size_t fwd_thread_bytes(const dg_attn_dims *d) {
    return round64(sizeof(float) * T * T) + 2 * round64(sizeof(float) * T * (size_t)d->D) +
           6 * round64(sizeof(float) * T);
}
static size_t bwd_thread_bytes(const dg_attn_dims *d) {
    return 2 * round64(sizeof(float) * T * T) + 2 * round64(sizeof(float) * T * (size_t)d->D) +
           3 * round64(sizeof(float) * T);
}
static size_t delta_bytes(const dg_attn_dims *d) {
    return round64(sizeof(float) * (size_t)(d->B * d->Hq * d->S));
}

size_t dg_cpu_attention_fwd_workspace(const dg_attn_dims *d, int nthreads) {
    return (size_t)DG_MAX(nthreads, 1) * fwd_thread_bytes(d);
}

size_t dg_cpu_attention_bwd_workspace(const dg_attn_dims *d, int nthreads) {
    return delta_bytes(d) + (size_t)DG_MAX(nthreads, 1) * bwd_thread_bytes(d);
}

static int team_size(const dg_team *team) { return team && team->nthreads > 1 ? team->nthreads : 1; }

/* Rows of a tile: T, or what is left at the end of the sequence. */
static int tile_rows(const dg_attn_dims *d, int64_t tile) {
    return (int)DG_MIN((int64_t)T, d->S - tile * T);
}

/* dst[D, T] (ld T) = the transpose of src[rows, D] (row stride ld): a
 * transposed operand lets every tile product run as one of OpenBLAS's
 * small-matrix kernels (the row-major A B^T form falls back to its slower
 * packed path at these sizes). Columns >= rows are left as they are. */
static void transpose_tile(float *restrict dst, const float *restrict src, int rows, int64_t D,
                           int64_t ld) {
    for (int r = 0; r < rows; r++)
        for (int64_t e = 0; e < D; e++) dst[e * T + r] = src[r * ld + e];
}

/* y[0, n) *= a, in 16-wide blocks (vectorized) and a scalar tail. */
static void scale_row(float *restrict y, float a, int64_t n) {
    int64_t e = 0;
    for (; e + 16 <= n; e += 16)
        for (int i = 0; i < 16; i++) y[e + i] *= a;
    for (; e < n; e++) y[e] *= a;
}

/* Dropout's factors along a tile row: z[c] = Z of (query i + c, key j)
 * when along_q, else of (query i, key j + c), for c < n; 0 past n. */
static void drop_row(const dg_attn_dims *d, int64_t b, int64_t h, int64_t i, int64_t j, int n, int along_q,
                     float *restrict z) {
    for (int c = 0; c < T; c++)
        z[c] = c >= n ? 0.0f
                      : dg_attn_drop_factor(&d->drop, d->S, b, h, along_q ? i + c : i, along_q ? j : j + c);
}

/* y[c] *= z[c] over a tile row. */
static void mul_row(float *restrict y, const float *restrict z) {
    for (int c = 0; c < T; c++) y[c] *= z[c];
}

/* ---- row helpers over a full tile row (fixed width T, so they vectorize) ---- */

/* Largest of x[c] for lo <= c < lim; fixed lane order, so the result is
 * exact (-inf when the range is empty). */
static float row_max(const float *restrict x, int lo, int lim) {
    float lane[16];
    for (int i = 0; i < 16; i++) lane[i] = -INFINITY;
    for (int c0 = 0; c0 < T; c0 += 16)
        for (int i = 0; i < 16; i++) {
            float v = x[c0 + i]; /* the whole row is readable: load, then mask */
            v = c0 + i >= lo && c0 + i < lim ? v : -INFINITY;
            lane[i] = v > lane[i] ? v : lane[i];
        }
    /* pairwise tree: a short dependency chain, and still a fixed order */
    for (int w = 8; w >= 1; w /= 2)
        for (int i = 0; i < w; i++) lane[i] = lane[i + w] > lane[i] ? lane[i + w] : lane[i];
    return lane[0];
}

/* x[c] = exp(x[c] - m) for lo <= c < lim, 0 elsewhere; returns the row sum
 * (16 lanes, then a pairwise tree: a fixed order). */
static float row_exp_sum(float *restrict x, int lo, int lim, float m) {
    float lane[16] = {0};
    for (int c0 = 0; c0 < T; c0 += 16)
        for (int i = 0; i < 16; i++) {
            int c = c0 + i;
            float p = c >= lo && c < lim ? dg_attn_exp(x[c] - m) : 0.0f;
            x[c] = p;
            lane[i] += p;
        }
    for (int w = 8; w >= 1; w /= 2)
        for (int i = 0; i < w; i++) lane[i] += lane[i + w];
    return lane[0];
}

/* Backward, a row of a score tile (query r fixed): p = exp(s - lse)
 * (0 where masked: outside [lo, lim)), ds = p * (dp - delta). s becomes P,
 * dp becomes dS. */
static void row_p_ds(float *restrict s, float *restrict dp, int lo, int lim, float lse, float delta) {
    for (int c = 0; c < T; c++) {
        int in = c >= lo && c < lim;
        float p = in ? dg_attn_exp(s[c] - lse) : 0.0f;
        s[c] = p;
        dp[c] = in ? dg_attn_dscore(p, dp[c], delta) : 0.0f;
    }
}

/* The same on a transposed tile (key fixed, queries r along the row):
 * queries lo <= r < hi see the key; lse and delta are per column. */
static void row_p_ds_t(float *restrict s, float *restrict dp, int lo, int hi,
                       const float *restrict lse, const float *restrict delta) {
    for (int r = 0; r < T; r++) {
        /* unconditional loads (all rows are T long) and a mask: vectorizes */
        float x = s[r] - lse[r], g = dp[r], dl = delta[r];
        float p = r >= lo && r < hi ? dg_attn_exp(x) : 0.0f;
        s[r] = p;
        dp[r] = dg_attn_dscore(p, g, dl); /* 0 where p is */
    }
}

/* The columns [*lo, *hi) of a key tile (first key j0, bc keys) that query
 * i sees: all; up to the diagonal when causal; from i - W + 1 on in a
 * window of W. Empty (lo >= hi) when none. */
static void row_range(const dg_attn_dims *d, int64_t i, int64_t j0, int bc, int *lo, int *hi) {
    i += d->qoff;
    int64_t h = d->causal ? DG_MIN((int64_t)bc, i - j0 + 1) : (int64_t)bc;
    int64_t l = d->window > 0 ? DG_MAX((int64_t)0, i - d->window + 1 - j0) : 0;
    *hi = (int)DG_MAX((int64_t)0, h);
    *lo = (int)DG_MIN(l, (int64_t)bc);
}

/* The first key tile a query tile starting at i0 sees (a window starts
 * later than key 0), and the last query tile that sees a key tile whose
 * last key is j1 (a window ends W - 1 queries after it). */
static int64_t first_key_tile(const dg_attn_dims *d, int64_t i0) {
    return d->window > 0 ? DG_MAX((int64_t)0, i0 + d->qoff - d->window + 1) / T : 0;
}
static int64_t last_query_tile(const attn_ctx *c, int64_t j1) {
    const dg_attn_dims *d = c->d;
    if (d->window <= 0) return c->nt - 1;
    int64_t last = j1 + d->window - 1 - d->qoff; /* may be < 0: no query sees the tile */
    return last < 0 ? -1 : DG_MIN(c->nt - 1, last / T);
}
/* The last key tile the query tile it (rows i0 .. i0 + br - 1) sees. */
static int64_t last_key_tile(const attn_ctx *c, int64_t i0, int br) {
    if (!c->d->causal) return c->nt - 1;
    int64_t last = i0 + br - 1 + c->d->qoff;
    return last < 0 ? -1 : DG_MIN(c->nt - 1, last / T);
}
/* The first query tile that sees key j0 when causal (query i + qoff >= j). */
static int64_t first_query_tile(const dg_attn_dims *d, int64_t j0) {
    return d->causal ? DG_MAX((int64_t)0, j0 - d->qoff) / T : 0;
}

/* Fold the sink logit into a row: lse0 = m + log l without it; returns
 * the row's lse with it, and *keep = exp(lse0 - lse), the factor the row's
 * output shrinks by (its probabilities lose the sink's share). */
static float add_sink(float lse0, float sink, float *keep) {
    float hi = lse0 > sink ? lse0 : sink, lo = lse0 > sink ? sink : lse0;
    float lse = hi + log1pf(expf(lo - hi));
    *keep = expf(lse0 - lse);
    return lse;
}

/* ---- forward ------------------------------------------------------------------ */

/* One (b, h, query tile): online softmax over the visible key tiles. */
static void fwd_unit(const attn_ctx *c, int64_t u, char *scr) {
    const dg_attn_dims *d = c->d;
    const int64_t D = d->D, Hq = d->Hq, Hkv = d->Hkv, S = d->S, G = Hq / Hkv;
    const int64_t it = u % c->nt, h = (u / c->nt) % Hq, b = u / (c->nt * Hq);
    const int64_t kh = h / G, ldq = Hq * D, ldk = Hkv * D, i0 = it * T;
    const int br = tile_rows(d, it);
    float *st = take(&scr, T * T), *qt = take(&scr, (size_t)(T * D));
    float *acc = take(&scr, (size_t)(T * D)), *m = take(&scr, T), *l = take(&scr, T);
    float *mx = take(&scr, T), *alpha = take(&scr, T), *rsum = take(&scr, T), *z = take(&scr, T);
    const int drop = d->drop.p > 0.0f;
    /* per-row state for all T rows, so the row loops below have a fixed
     * width and vectorize; rows >= br stay inert (max 0, sum 0) */
    for (int r = 0; r < T; r++) {
        m[r] = r < br ? -INFINITY : 0.0f;
        l[r] = 0.0f;
        mx[r] = 0.0f;
        rsum[r] = 0.0f;
    }
    memset(acc, 0, sizeof(float) * (size_t)(br * D));

    const float *qi = c->q + ((b * S + i0) * Hq + h) * D;
    transpose_tile(qt, qi, br, D, ldq);
    const int64_t last = last_key_tile(c, i0, br);
    int lo[T], hi[T];
    for (int64_t jt = first_key_tile(d, i0); jt <= last; jt++) {
        const int64_t j0 = jt * T;
        const int bc = tile_rows(d, jt);
        for (int r = 0; r < br; r++) row_range(d, i0 + r, j0, bc, &lo[r], &hi[r]);
        const float *kj = c->k + ((b * S + j0) * Hkv + kh) * D;
        const float *vj = c->v + ((b * S + j0) * Hkv + kh) * D;
        /* st[br, bc] = scale Qi Kj^T, Qi given as its transpose qt */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasTrans, br, bc, (int)D, d->scale, qt, T, kj,
                    (int)ldk, 0.0f, st, T);
        /* online softmax: new row maxima, rescale factors, exponentials */
        for (int r = 0; r < br; r++) mx[r] = row_max(st + (size_t)r * T, lo[r], hi[r]);
        for (int r = 0; r < T; r++) {
            float mnew = mx[r] > m[r] ? mx[r] : m[r];
            /* a row that has seen no key yet (a window's first tiles) keeps
             * max -inf: nothing to rescale, and -inf - -inf would be NaN */
            alpha[r] = mnew == -INFINITY ? 1.0f : dg_attn_rescale(m[r], mnew);
            m[r] = mnew;
        }
        for (int r = 0; r < br; r++) rsum[r] = row_exp_sum(st + (size_t)r * T, lo[r], hi[r], m[r]);
        for (int r = 0; r < T; r++) l[r] = l[r] * alpha[r] + rsum[r];
        if (drop) /* l sums the undropped exponentials; P V the kept ones */
            for (int r = 0; r < br; r++) {
                drop_row(d, b, h, i0 + r, j0, bc, 0, z);
                mul_row(st + (size_t)r * T, z);
            }
        for (int r = 0; r < br; r++)
            if (alpha[r] != 1.0f) scale_row(acc + r * D, alpha[r], D);
        /* acc[br, D] += P[br, bc] Vj[bc, D] */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, br, (int)D, bc, 1.0f, st, T, vj,
                    (int)ldk, 1.0f, acc, (int)D);
    }
    float *oi = c->o_out + ((b * S + i0) * Hq + h) * D;
    float *lse = c->lse_out + (b * Hq + h) * S + i0;
    for (int r = 0; r < br; r++) {
        if (l[r] == 0.0f) { /* no key visible (a block of ring attention's): nothing */
            memset(oi + r * ldq, 0, sizeof(float) * (size_t)D);
            lse[r] = -INFINITY;
            continue;
        }
        /* self-attention: every row sees at least its own key, so l[r] >= 1 */
        float lse0 = m[r] + logf(l[r]), keep = 1.0f;
        lse[r] = d->sink ? add_sink(lse0, d->sink == 2 ? c->sink[h] : 0.0f, &keep) : lse0;
        scale_row(acc + r * D, keep / l[r], D);
        memcpy(oi + r * ldq, acc + r * D, sizeof(float) * (size_t)D);
    }
}

/* Thread t's share: unit `t` of each round of nth units, counted from the
 * other end in odd rounds (see the header on balance). */
static int64_t dealt_unit(int64_t round, int nth, int64_t t) {
    return round * nth + (round % 2 ? nth - 1 - t : t);
}

static void fwd_threads(void *p, int64_t t0, int64_t t1) {
    const attn_ctx *c = p;
    int64_t units = c->d->B * c->d->Hq * c->nt;
    for (int64_t t = t0; t < t1; t++)
        for (int64_t k = 0; k * c->nth < units; k++) {
            int64_t u = dealt_unit(k, c->nth, t);
            if (u < units) fwd_unit(c, u, c->scratch + t * c->per_thread);
        }
}

void dg_cpu_attention_fwd(const dg_team *team, const dg_attn_dims *d, const float *q,
                          const float *k, const float *v, float *o, float *lse, void *ws) {
    dg_cpu_attention_fwd_ex(team, d, q, k, v, NULL, o, lse, ws);
}

void dg_cpu_attention_fwd_ex(const dg_team *team, const dg_attn_dims *d, const float *q,
                             const float *k, const float *v, const float *sink, float *o,
                             float *lse, void *ws) {
    if (d->B <= 0 || d->S <= 0 || d->Hq <= 0) return;
    attn_ctx c = {.d = d, .q = q, .k = k, .v = v, .sink = sink, .o_out = o, .lse_out = lse,
                  .scratch = ws, .per_thread = fwd_thread_bytes(d), .nth = team_size(team),
                  .nt = (d->S + T - 1) / T};
    dg_team_run(team, c.nth, fwd_threads, &c);
}

/* ---- backward ------------------------------------------------------------------ */

/* Pass 1, one (b, h, query tile): Delta = rowsum(dO * O) - dlse. */
static void delta_unit(const attn_ctx *c, int64_t u) {
    const dg_attn_dims *d = c->d;
    const int64_t D = d->D, Hq = d->Hq, S = d->S;
    const int64_t it = u % c->nt, h = (u / c->nt) % Hq, b = u / (c->nt * Hq), i0 = it * T;
    const int br = tile_rows(d, it);
    for (int r = 0; r < br; r++) {
        const int64_t off = ((b * S + i0 + r) * Hq + h) * D;
        double s = 0.0;
        for (int64_t e = 0; e < D; e++) s += (double)c->dout[off + e] * c->o[off + e];
        const int64_t li = (b * Hq + h) * S + i0 + r;
        c->delta[li] = (float)s - (c->dlse ? c->dlse[li] : 0.0f);
    }
}

/* Pass 2, one (b, kv head, key tile): dK and dV rows of that tile, summed
 * over the group's query heads (in order) and query tiles (in order). It
 * works on transposed score tiles, S^T [keys, queries], so that dV = P^T dO
 * and dK = scale dS^T Q are plain products. */
static void dkv_unit(const attn_ctx *c, int64_t u, char *scr) {
    const dg_attn_dims *d = c->d;
    const int64_t D = d->D, Hq = d->Hq, Hkv = d->Hkv, S = d->S, G = Hq / Hkv;
    const int64_t jt = u % c->nt, kh = (u / c->nt) % Hkv, b = u / (c->nt * Hkv);
    const int64_t ldq = Hq * D, ldk = Hkv * D, j0 = jt * T;
    const int bc = tile_rows(d, jt);
    float *pt = take(&scr, T * T), *dst = take(&scr, T * T);
    float *kt = take(&scr, (size_t)(T * D)), *vt = take(&scr, (size_t)(T * D));
    float *lsev = take(&scr, T), *deltav = take(&scr, T), *z = take(&scr, T);
    const int drop = d->drop.p > 0.0f;
    float *dkj = c->dk + ((b * S + j0) * Hkv + kh) * D;
    float *dvj = c->dv + ((b * S + j0) * Hkv + kh) * D;
    for (int r = 0; r < bc; r++) {
        memset(dkj + r * ldk, 0, sizeof(float) * (size_t)D);
        memset(dvj + r * ldk, 0, sizeof(float) * (size_t)D);
    }
    transpose_tile(kt, c->k + ((b * S + j0) * Hkv + kh) * D, bc, D, ldk);
    transpose_tile(vt, c->v + ((b * S + j0) * Hkv + kh) * D, bc, D, ldk);
    for (int64_t h = kh * G; h < (kh + 1) * G; h++)
        for (int64_t it = first_query_tile(d, j0), itl = last_query_tile(c, j0 + bc - 1); it <= itl; it++) {
            const int64_t i0 = it * T;
            const int br = tile_rows(d, it);
            const float *qi = c->q + ((b * S + i0) * Hq + h) * D;
            const float *doi = c->dout + ((b * S + i0) * Hq + h) * D;
            const float *lse = c->lse + (b * Hq + h) * S + i0;
            const float *delta = c->delta + (b * Hq + h) * S + i0;
            for (int r = 0; r < T; r++) {
                lsev[r] = r < br ? lse[r] : 0.0f;
                deltav[r] = r < br ? delta[r] : 0.0f;
            }
            /* pt[bc, br] = scale K Qi^T,  dst[bc, br] = V dOi^T */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasTrans, bc, br, (int)D, d->scale, kt, T, qi,
                        (int)ldq, 0.0f, pt, T);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasTrans, bc, br, (int)D, 1.0f, vt, T, doi,
                        (int)ldq, 0.0f, dst, T);
            /* key j is seen by queries i >= j when causal, and i < j + W
             * in a window of W */
            for (int cc = 0; cc < bc; cc++) {
                const int64_t j = j0 + cc;
                int qlo = d->causal ? (int)DG_MIN((int64_t)T, DG_MAX((int64_t)0, j - d->qoff - i0)) : 0;
                int qhi = d->window > 0 ? (int)DG_MAX((int64_t)0, DG_MIN((int64_t)br, j + d->window - d->qoff - i0)) : br;
                if (drop) { /* dS = P (Z dP - Delta), dV from P Z */
                    drop_row(d, b, h, i0, j, br, 1, z);
                    mul_row(dst + (size_t)cc * T, z);
                }
                row_p_ds_t(pt + (size_t)cc * T, dst + (size_t)cc * T, qlo, qhi, lsev, deltav);
                if (drop) mul_row(pt + (size_t)cc * T, z);
            }
            /* dV[bc, D] += P^T dO;  dK[bc, D] += scale dS^T Q */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bc, (int)D, br, 1.0f, pt, T, doi,
                        (int)ldq, 1.0f, dvj, (int)ldk);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bc, (int)D, br, d->scale, dst, T,
                        qi, (int)ldq, 1.0f, dkj, (int)ldk);
        }
}

/* Pass 3, one (b, q head, query tile): dQ rows, key tiles in order. */
static void dq_unit(const attn_ctx *c, int64_t u, char *scr) {
    const dg_attn_dims *d = c->d;
    const int64_t D = d->D, Hq = d->Hq, Hkv = d->Hkv, S = d->S, G = Hq / Hkv;
    const int64_t it = u % c->nt, h = (u / c->nt) % Hq, b = u / (c->nt * Hq);
    const int64_t ldq = Hq * D, ldk = Hkv * D, i0 = it * T, kh = h / G;
    const int br = tile_rows(d, it);
    float *st = take(&scr, T * T), *dpt = take(&scr, T * T);
    float *qt = take(&scr, (size_t)(T * D)), *dot = take(&scr, (size_t)(T * D)), *z = take(&scr, T);
    float *dqi = c->dq + ((b * S + i0) * Hq + h) * D;
    const float *lse = c->lse + (b * Hq + h) * S + i0;
    const float *delta = c->delta + (b * Hq + h) * S + i0;
    for (int r = 0; r < br; r++) memset(dqi + r * ldq, 0, sizeof(float) * (size_t)D);
    transpose_tile(qt, c->q + ((b * S + i0) * Hq + h) * D, br, D, ldq);
    transpose_tile(dot, c->dout + ((b * S + i0) * Hq + h) * D, br, D, ldq);
    const int64_t last = last_key_tile(c, i0, br);
    for (int64_t jt = first_key_tile(d, i0); jt <= last; jt++) {
        const int bc = tile_rows(d, jt);
        const float *kj = c->k + ((b * S + jt * T) * Hkv + kh) * D;
        const float *vj = c->v + ((b * S + jt * T) * Hkv + kh) * D;
        /* st[br, bc] = scale Qi Kj^T,  dpt[br, bc] = dOi Vj^T */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasTrans, br, bc, (int)D, d->scale, qt, T, kj,
                    (int)ldk, 0.0f, st, T);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasTrans, br, bc, (int)D, 1.0f, dot, T, vj,
                    (int)ldk, 0.0f, dpt, T);
        for (int r = 0; r < br; r++) {
            int lo, hi;
            row_range(d, i0 + r, jt * T, bc, &lo, &hi);
            if (d->drop.p > 0.0f) { /* dS = P (Z dP - Delta) */
                drop_row(d, b, h, i0 + r, jt * T, bc, 0, z);
                mul_row(dpt + (size_t)r * T, z);
            }
            row_p_ds(st + (size_t)r * T, dpt + (size_t)r * T, lo, hi, lse[r], delta[r]);
        }
        /* dQ[br, D] += scale dS[br, bc] K[bc, D] */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, br, (int)D, bc, d->scale, dpt, T,
                    kj, (int)ldk, 1.0f, dqi, (int)ldq);
    }
}

typedef enum { PASS_DELTA, PASS_DKV, PASS_DQ } bwd_pass;
typedef struct bwd_job {
    const attn_ctx *c;
    bwd_pass pass;
} bwd_job;

static void bwd_threads(void *p, int64_t t0, int64_t t1) {
    const bwd_job *j = p;
    const attn_ctx *c = j->c;
    const dg_attn_dims *d = c->d;
    int64_t units = d->B * (j->pass == PASS_DKV ? d->Hkv : d->Hq) * c->nt;
    for (int64_t t = t0; t < t1; t++) {
        char *scr = c->scratch + t * c->per_thread;
        for (int64_t k = 0; k * c->nth < units; k++) {
            int64_t u = dealt_unit(k, c->nth, t);
            if (u >= units) continue;
            if (j->pass == PASS_DELTA) delta_unit(c, u);
            else if (j->pass == PASS_DKV) dkv_unit(c, u, scr);
            else dq_unit(c, u, scr);
        }
    }
}

void dg_cpu_attention_bwd(const dg_team *team, const dg_attn_dims *d, const float *q,
                          const float *k, const float *v, const float *o, const float *dout,
                          const float *lse, const float *dlse, float *dq, float *dk, float *dv,
                          void *ws) {
    if (d->B <= 0 || d->S <= 0 || d->Hq <= 0) return;
    attn_ctx c = {.d = d, .q = q, .k = k, .v = v, .o = o, .dout = dout, .lse = lse, .dlse = dlse,
                  .dq = dq, .dk = dk, .dv = dv, .delta = ws,
                  .scratch = (char *)ws + delta_bytes(d), .per_thread = bwd_thread_bytes(d),
                  .nth = team_size(team), .nt = (d->S + T - 1) / T};
    /* each pass ends before the next starts: dg_team_run returns when all
     * ranges are done */
    for (int p = PASS_DELTA; p <= PASS_DQ; p++) {
        bwd_job j = {&c, (bwd_pass)p};
        dg_team_run(team, c.nth, bwd_threads, &j);
    }
}

/* ---- the sink's gradient -------------------------------------------------------- */

void dg_cpu_attention_sink_grad(const dg_attn_dims *d, const float *sink, const float *o,
                                const float *dout, const float *lse, const float *dlse,
                                float *dsink) {
    const int64_t B = d->B, S = d->S, Hq = d->Hq, D = d->D;
    for (int64_t h = 0; h < Hq; h++) {
        double acc = 0.0;
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < S; i++) {
                const int64_t off = ((b * S + i) * Hq + h) * D, li = (b * Hq + h) * S + i;
                double delta = 0.0;
                for (int64_t e = 0; e < D; e++) delta += (double)dout[off + e] * o[off + e];
                if (dlse) delta -= dlse[li];
                acc -= exp((double)sink[h] - lse[li]) * delta;
            }
        dsink[h] = (float)acc;
    }
}

/* ---- a sink folded into finished attention ----------------------------------------- */

void dg_cpu_attn_sink_fwd(int64_t B, int64_t S, int64_t H, int64_t D, const float *o, const float *lse,
                          const float *sink, float *o2, float *lse2) {
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < S; i++) {
                const int64_t li = (b * H + h) * S + i, off = ((b * S + i) * H + h) * D;
                float keep;
                lse2[li] = add_sink(lse[li], sink ? sink[h] : 0.0f, &keep);
                for (int64_t e = 0; e < D; e++) o2[off + e] = o[off + e] * keep;
            }
}

void dg_cpu_attn_sink_bwd(int64_t B, int64_t S, int64_t H, int64_t D, const float *o2, const float *do2,
                          const float *lse, const float *lse2, const float *dlse2, float *dout,
                          float *dlse, float *dsink) {
    for (int64_t h = 0; h < H; h++) {
        double acc = 0.0;
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < S; i++) {
                const int64_t li = (b * H + h) * S + i, off = ((b * S + i) * H + h) * D;
                double g = 0.0;
                for (int64_t e = 0; e < D; e++) g += (double)do2[off + e] * o2[off + e];
                double keep = exp((double)lse[li] - lse2[li]), ps = 1.0 - keep;
                double dl2 = dlse2 ? dlse2[li] : 0.0;
                for (int64_t e = 0; e < D; e++) dout[off + e] = (float)(do2[off + e] * keep);
                dlse[li] = (float)(g * ps + dl2 * keep);
                acc += ps * (dl2 - g);
            }
        if (dsink) dsink[h] = (float)acc;
    }
}
