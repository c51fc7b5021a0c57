/* dg_cpu_ring_attn.c — see dg_cpu_ring_attn.h. */
#include "dg_cpu_ring_attn.h"

#include <math.h>

/* Floats rounded up to 64 bytes, so each carved buffer stays aligned. */
static size_t al(int64_t n) { return (size_t)((n + 15) / 16 * 16); }

/* Half h of x [B, 2c, H, D] <-> y [B, c, H, D]. */
static void gather_rows(const float *x, float *y, int64_t B, int64_t c, int64_t HD, int h) {
    for (int64_t b = 0; b < B; b++) memcpy(y + b * c * HD, x + (b * 2 * c + h * c) * HD, sizeof(float) * (size_t)(c * HD));
}
static void scatter_rows(const float *y, float *x, int64_t B, int64_t c, int64_t HD, int h) {
    for (int64_t b = 0; b < B; b++) memcpy(x + (b * 2 * c + h * c) * HD, y + b * c * HD, sizeof(float) * (size_t)(c * HD));
}
static void zero_rows(float *x, int64_t B, int64_t c, int64_t HD, int h) {
    for (int64_t b = 0; b < B; b++) memset(x + (b * 2 * c + h * c) * HD, 0, sizeof(float) * (size_t)(c * HD));
}
/* Half h of lse [B, H, 2c] <-> [B, H, c]. */
static void gather_lse(const float *x, float *y, int64_t BH, int64_t c, int h) {
    for (int64_t i = 0; i < BH; i++) memcpy(y + i * c, x + i * 2 * c + h * c, sizeof(float) * (size_t)c);
}
static void scatter_lse(const float *y, float *x, int64_t BH, int64_t c, int h) {
    for (int64_t i = 0; i < BH; i++) memcpy(x + i * 2 * c + h * c, y + i * c, sizeof(float) * (size_t)c);
}

static dg_attn_dims half_dims(const dg_attn_dims *d) {
    dg_attn_dims h = *d;
    h.S = d->S / 2;
    h.causal = 0;
    return h;
}

/* h (a c x c block) for query half qh and key half kh of d: dropout's
 * places become the two halves' chunks (d's drop holds the rank's pair
 * and the K/V's; a half's rows are all below c). */
static dg_attn_dims halves(dg_attn_dims h, const dg_attn_dims *d, int qh, int kh) {
    h.drop.qa = qh ? d->drop.qb : d->drop.qa;
    h.drop.ka = kh ? d->drop.kb : d->drop.ka;
    return h;
}

static dg_attn_dims diag_dims(const dg_attn_dims *d) {
    dg_attn_dims h = *d;
    h.causal = 1;
    return h;
}

size_t dg_cpu_ring_block_fwd_workspace(const dg_attn_dims *d, int nthreads) {
    dg_attn_dims h = half_dims(d);
    int64_t qs = d->B * h.S * d->Hq * d->D, ks = d->B * h.S * d->Hkv * d->D, ls = d->B * d->Hq * h.S;
    size_t sub = sizeof(float) * (3 * al(qs) + 2 * al(ks) + 2 * al(ls)) + dg_cpu_attention_fwd_workspace(&h, nthreads);
    dg_attn_dims dd = diag_dims(d);
    size_t diag = dg_cpu_attention_fwd_workspace(&dd, nthreads);
    return sub > diag ? sub : diag;
}

void dg_cpu_ring_block_fwd(const dg_team *team, const dg_attn_dims *d, dg_ring_mode mode,
                           const float *q, const float *k, const float *v, float *o, float *lse,
                           void *ws) {
    if (mode == DG_RING_DIAG) {
        dg_attn_dims dd = diag_dims(d);
        dg_cpu_attention_fwd(team, &dd, q, k, v, o, lse, ws);
        return;
    }
    dg_attn_dims h = half_dims(d);
    int64_t c = h.S, B = d->B, HqD = d->Hq * d->D, HkvD = d->Hkv * d->D, BH = B * d->Hq;
    float *qs = ws, *o1 = qs + al(B * c * HqD), *o2 = o1 + al(B * c * HqD);
    float *ks = o2 + al(B * c * HqD), *vs = ks + al(B * c * HkvD);
    float *l1 = vs + al(B * c * HkvD), *l2 = l1 + al(BH * c), *aws = l2 + al(BH * c);
    if (mode == DG_RING_LOWER) { /* both query halves against K/V half A */
        gather_rows(k, ks, B, c, HkvD, 0);
        gather_rows(v, vs, B, c, HkvD, 0);
        for (int qh = 0; qh < 2; qh++) {
            gather_rows(q, qs, B, c, HqD, qh);
            dg_attn_dims hq = halves(h, d, qh, 0);
            dg_cpu_attention_fwd(team, &hq, qs, ks, vs, o1, l1, aws);
            scatter_rows(o1, o, B, c, HqD, qh);
            scatter_lse(l1, lse, BH, c, qh);
        }
        return;
    }
    /* UPPER: half A sees nothing; half B both K/V halves, merged */
    zero_rows(o, B, c, HqD, 0);
    for (int64_t i = 0; i < BH; i++)
        for (int64_t s = 0; s < c; s++) lse[i * 2 * c + s] = -INFINITY;
    gather_rows(q, qs, B, c, HqD, 1);
    float *os[2] = {o1, o2}, *lsub[2] = {l1, l2};
    for (int kh = 0; kh < 2; kh++) {
        gather_rows(k, ks, B, c, HkvD, kh);
        gather_rows(v, vs, B, c, HkvD, kh);
        dg_attn_dims hk = halves(h, d, 1, kh);
        dg_cpu_attention_fwd(team, &hk, qs, ks, vs, os[kh], lsub[kh], aws);
    }
    dg_cpu_lse_merge_fwd(B, c, d->Hq, d->D, o1, l1, o2, l2, qs, l1); /* in place: l1 read before written */
    scatter_rows(qs, o, B, c, HqD, 1);
    scatter_lse(l1, lse, BH, c, 1);
}

size_t dg_cpu_ring_block_bwd_workspace(const dg_attn_dims *d, int nthreads) {
    dg_attn_dims h = half_dims(d);
    int64_t qs = d->B * h.S * d->Hq * d->D, ks = d->B * h.S * d->Hkv * d->D, ls = d->B * d->Hq * h.S;
    size_t sub = sizeof(float) * (5 * al(qs) + 6 * al(ks) + 2 * al(ls)) + dg_cpu_attention_bwd_workspace(&h, nthreads);
    dg_attn_dims dd = diag_dims(d);
    size_t diag = dg_cpu_attention_bwd_workspace(&dd, nthreads);
    return sub > diag ? sub : diag;
}

static void add_to(float *acc, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) acc[i] += x[i];
}

void dg_cpu_ring_block_bwd(const dg_team *team, const dg_attn_dims *d, dg_ring_mode mode,
                           const float *q, const float *k, const float *v, const float *o,
                           const float *dout, const float *lse, const float *dlse, float *dq,
                           float *dk, float *dv, void *ws) {
    if (mode == DG_RING_DIAG) {
        dg_attn_dims dd = diag_dims(d);
        dg_cpu_attention_bwd(team, &dd, q, k, v, o, dout, lse, dlse, dq, dk, dv, ws);
        return;
    }
    dg_attn_dims h = half_dims(d);
    int64_t c = h.S, B = d->B, HqD = d->Hq * d->D, HkvD = d->Hkv * d->D, BH = B * d->Hq;
    int64_t nq = B * c * HqD, nk = B * c * HkvD;
    float *qs = ws, *os = qs + al(nq), *dos = os + al(nq), *dqs = dos + al(nq), *dqa = dqs + al(nq);
    float *ks = dqa + al(nq), *vs = ks + al(nk), *dks = vs + al(nk), *dvs = dks + al(nk);
    float *dka = dvs + al(nk), *dva = dka + al(nk);
    float *ls = dva + al(nk), *dls = ls + al(BH * c), *aws = dls + al(BH * c);
    if (mode == DG_RING_LOWER) { /* K/V half A got both query halves; half B nothing */
        gather_rows(k, ks, B, c, HkvD, 0);
        gather_rows(v, vs, B, c, HkvD, 0);
        for (int qh = 0; qh < 2; qh++) {
            gather_rows(q, qs, B, c, HqD, qh);
            gather_rows(o, os, B, c, HqD, qh);
            gather_rows(dout, dos, B, c, HqD, qh);
            gather_lse(lse, ls, BH, c, qh);
            if (dlse) gather_lse(dlse, dls, BH, c, qh);
            dg_attn_dims hq = halves(h, d, qh, 0);
            dg_cpu_attention_bwd(team, &hq, qs, ks, vs, os, dos, ls, dlse ? dls : NULL, dqs,
                                 qh ? dks : dka, qh ? dvs : dva, aws);
            scatter_rows(dqs, dq, B, c, HqD, qh);
        }
        add_to(dka, dks, nk);
        add_to(dva, dvs, nk);
        scatter_rows(dka, dk, B, c, HkvD, 0);
        scatter_rows(dva, dv, B, c, HkvD, 0);
        zero_rows(dk, B, c, HkvD, 1);
        zero_rows(dv, B, c, HkvD, 1);
        return;
    }
    /* UPPER: query half B against each K/V half, with the merged (o, lse) */
    zero_rows(dq, B, c, HqD, 0);
    gather_rows(q, qs, B, c, HqD, 1);
    gather_rows(o, os, B, c, HqD, 1);
    gather_rows(dout, dos, B, c, HqD, 1);
    gather_lse(lse, ls, BH, c, 1);
    if (dlse) gather_lse(dlse, dls, BH, c, 1);
    for (int kh = 0; kh < 2; kh++) {
        gather_rows(k, ks, B, c, HkvD, kh);
        gather_rows(v, vs, B, c, HkvD, kh);
        dg_attn_dims hk = halves(h, d, 1, kh);
        dg_cpu_attention_bwd(team, &hk, qs, ks, vs, os, dos, ls, dlse ? dls : NULL, kh ? dqs : dqa, dks,
                             dvs, aws);
        scatter_rows(dks, dk, B, c, HkvD, kh);
        scatter_rows(dvs, dv, B, c, HkvD, kh);
    }
    add_to(dqa, dqs, nq);
    scatter_rows(dqa, dq, B, c, HqD, 1);
}

/* ---- with a window: blocks of chunk pairs ---------------------------------------------- */

/* The c x c block of query chunk cq against key chunk ck under the window,
 * or 0 when the window reaches none of its pairs (a later key chunk, or one
 * W or more tokens before every query). */
static int chunk_block(const dg_attn_dims *d, int64_t c, int cq, int ck, dg_attn_dims *h) {
    if (ck > cq) return 0;
    *h = half_dims(d);
    h->drop.qa = cq; /* dropout's places: the chunks themselves */
    h->drop.ka = ck;
    h->qoff = (int64_t)(cq - ck) * c;
    h->causal = cq == ck;
    return h->qoff - (c - 1) < d->window;
}

static void chunks_of(int r, int step, int cp, int cq[2], int ck[2]) {
    int j = ((r - step) % cp + cp) % cp;
    cq[0] = r, cq[1] = 2 * cp - 1 - r;
    ck[0] = j, ck[1] = 2 * cp - 1 - j;
}

void dg_cpu_ring_block_fwd_window(const dg_team *team, const dg_attn_dims *d, int r, int step, int cp,
                                  const float *q, const float *k, const float *v, float *o, float *lse, void *ws) {
    int64_t c = d->S / 2, B = d->B, HqD = d->Hq * d->D, HkvD = d->Hkv * d->D, BH = B * d->Hq;
    float *qs = ws, *o1 = qs + al(B * c * HqD), *o2 = o1 + al(B * c * HqD);
    float *ks = o2 + al(B * c * HqD), *vs = ks + al(B * c * HkvD);
    float *l1 = vs + al(B * c * HkvD), *l2 = l1 + al(BH * c), *aws = l2 + al(BH * c);
    int cq[2], ck[2];
    chunks_of(r, step, cp, cq, ck);
    for (int qh = 0; qh < 2; qh++) {
        int n = 0; /* blocks computed for this query chunk: the first in (o1, l1) */
        gather_rows(q, qs, B, c, HqD, qh);
        for (int kh = 0; kh < 2; kh++) {
            dg_attn_dims h;
            if (!chunk_block(d, c, cq[qh], ck[kh], &h)) continue;
            gather_rows(k, ks, B, c, HkvD, kh);
            gather_rows(v, vs, B, c, HkvD, kh);
            dg_cpu_attention_fwd(team, &h, qs, ks, vs, n ? o2 : o1, n ? l2 : l1, aws);
            if (n++) dg_cpu_lse_merge_fwd(B, c, d->Hq, d->D, o1, l1, o2, l2, o1, l1); /* row by row: in place */
        }
        if (n) {
            scatter_rows(o1, o, B, c, HqD, qh);
            scatter_lse(l1, lse, BH, c, qh);
        } else {
            zero_rows(o, B, c, HqD, qh);
            for (int64_t i = 0; i < BH; i++)
                for (int64_t s = 0; s < c; s++) lse[i * 2 * c + qh * c + s] = -INFINITY;
        }
    }
}

/* x's half h (rows of [B, 2c, H, D]) += y [B, c, H, D]. */
static void add_rows(const float *y, float *x, int64_t B, int64_t c, int64_t HD, int h) {
    for (int64_t b = 0; b < B; b++) add_to(x + (b * 2 * c + h * c) * HD, y + b * c * HD, c * HD);
}

void dg_cpu_ring_block_bwd_window(const dg_team *team, const dg_attn_dims *d, int r, int step, int cp,
                                  const float *q, const float *k, const float *v, const float *o,
                                  const float *dout, const float *lse, const float *dlse, float *dq, float *dk,
                                  float *dv, void *ws) {
    int64_t c = d->S / 2, B = d->B, HqD = d->Hq * d->D, HkvD = d->Hkv * d->D, BH = B * d->Hq;
    int64_t nq = B * c * HqD, nk = B * c * HkvD;
    float *qs = ws, *os = qs + al(nq), *dos = os + al(nq), *dqs = dos + al(nq), *dqa = dqs + al(nq);
    float *ks = dqa + al(nq), *vs = ks + al(nk), *dks = vs + al(nk), *dvs = dks + al(nk);
    float *dka = dvs + al(nk), *dva = dka + al(nk);
    float *ls = dva + al(nk), *dls = ls + al(BH * c), *aws = dls + al(BH * c);
    int cq[2], ck[2];
    chunks_of(r, step, cp, cq, ck);
    memset(dk, 0, sizeof(float) * (size_t)(2 * nk));
    memset(dv, 0, sizeof(float) * (size_t)(2 * nk));
    for (int qh = 0; qh < 2; qh++) {
        memset(dqa, 0, sizeof(float) * (size_t)nq);
        gather_rows(q, qs, B, c, HqD, qh);
        gather_rows(o, os, B, c, HqD, qh);
        gather_rows(dout, dos, B, c, HqD, qh);
        gather_lse(lse, ls, BH, c, qh);
        if (dlse) gather_lse(dlse, dls, BH, c, qh);
        for (int kh = 0; kh < 2; kh++) {
            dg_attn_dims h;
            if (!chunk_block(d, c, cq[qh], ck[kh], &h)) continue;
            gather_rows(k, ks, B, c, HkvD, kh);
            gather_rows(v, vs, B, c, HkvD, kh);
            dg_cpu_attention_bwd(team, &h, qs, ks, vs, os, dos, ls, dlse ? dls : NULL, dqs, dks, dvs, aws);
            add_to(dqa, dqs, nq);
            add_rows(dks, dk, B, c, HkvD, kh);
            add_rows(dvs, dv, B, c, HkvD, kh);
        }
        scatter_rows(dqa, dq, B, c, HqD, qh);
    }
}

void dg_cpu_lse_merge_fwd(int64_t B, int64_t S, int64_t H, int64_t D, const float *o1, const float *l1,
                          const float *o2, const float *l2, float *o, float *l) {
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t s = 0; s < S; s++) {
                int64_t li = (b * H + h) * S + s, oi = ((b * S + s) * H + h) * D;
                dg_lse_merge_row(D, o1 + oi, l1[li], o2 + oi, l2[li], o + oi, l + li);
            }
}

void dg_cpu_lse_merge_bwd(int64_t B, int64_t S, int64_t H, int64_t D, const float *o1, const float *l1,
                          const float *o2, const float *l2, const float *o, const float *l,
                          const float *dout, const float *dl, float *do1, float *dl1, float *do2,
                          float *dl2) {
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t s = 0; s < S; s++) {
                int64_t li = (b * H + h) * S + s, oi = ((b * S + s) * H + h) * D;
                dg_lse_merge_bwd_row(D, o1 + oi, l1[li], o2 + oi, l2[li], o + oi, l[li], dout + oi,
                                     dl ? dl[li] : 0.0f, do1 + oi, dl1 + li, do2 + oi, dl2 + li);
            }
}
