/* dg_memplan.c — lifetimes, greedy-by-size best-fit packing, validation
 * (see dg_memplan.h). Quadratic in the number of activations, which is a
 * few thousand for a step: planning is done once per graph, not per step. */
#include "dg_memplan.h"

#include <string.h>

static size_t align_up(size_t n) {
    return (n + DG_MEMPLAN_ALIGN - 1) & ~(size_t)(DG_MEMPLAN_ALIGN - 1);
}

/* Activations, less the step's weights (dg_graph_weights: 16-bit working copies). */
static bool planned(const dg_tensor *t, bool weight) { return t->role == DG_ROLE_ACTIVATION && t->producer >= 0 && !weight; }

static bool lives_overlap(const dg_memplan *mp, int a, int b) {
    return mp->first[a] < mp->last[b] && mp->first[b] < mp->last[a];
}

/* Sort key for placement: biggest first, then earliest, then id. */
typedef struct place_key {
    size_t size;
    double first;
    int id;
} place_key;

static int place_cmp(const void *pa, const void *pb) {
    const place_key *a = pa, *b = pb;
    if (a->size != b->size) return a->size > b->size ? -1 : 1;
    if (a->first != b->first) return a->first < b->first ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

/* A lifetime boundary for the live-bytes sweep: at time t, add delta. */
typedef struct life_ev {
    double t;
    int64_t delta;
} life_ev;

static int life_ev_cmp(const void *pa, const void *pb) {
    const life_ev *a = pa, *b = pb;
    if (a->t != b->t) return a->t < b->t ? -1 : 1;
    return (a->delta > b->delta) - (a->delta < b->delta); /* frees before allocations */
}

int dg_memplan_build(const dg_graph *g, const int *order, const int *keep, int n_keep,
                     dg_memplan *mp, dg_err *err) {
    size_t nn = (size_t)DG_MAX(g->n_nodes, 1);
    double *start = dg_malloc(sizeof(double) * nn), *end = dg_malloc(sizeof(double) * nn);
    for (int k = 0; k < g->n_nodes; k++) {
        start[order[k]] = k;
        end[order[k]] = k + 1;
    }
    int st = dg_memplan_build_timed(g, start, end, keep, n_keep, mp, err);
    dg_free(start);
    dg_free(end);
    return st;
}

int dg_memplan_build_timed(const dg_graph *g, const double *start, const double *end,
                           const int *keep, int n_keep, dg_memplan *mp, dg_err *err) {
    int nt = g->n_tensors, nn = g->n_nodes;
    memset(mp, 0, sizeof *mp);
    mp->n_tensors = nt;
    mp->offset = dg_malloc(sizeof(int64_t) * (size_t)DG_MAX(nt, 1));
    mp->size = dg_calloc((size_t)DG_MAX(nt, 1), sizeof(size_t));
    mp->first = dg_malloc(sizeof(double) * (size_t)DG_MAX(nt, 1));
    mp->last = dg_malloc(sizeof(double) * (size_t)DG_MAX(nt, 1));
    bool *weight = dg_malloc(sizeof(bool) * (size_t)DG_MAX(nt, 1));
    dg_graph_weights(g, weight);
    double horizon = 0; /* the end of the step */
    for (int v = 0; v < nn; v++) horizon = DG_MAX(horizon, end[v]);

    /* 1. lifetimes: [start of producer, end of last reader); unread or kept: to the end */
    for (int t = 0; t < nt; t++) {
        mp->offset[t] = -1;
        mp->first[t] = mp->last[t] = -1;
        const dg_tensor *tt = &g->tensors[t];
        if (!planned(tt, weight[t])) continue;
        if (tt->producer >= nn) {
            dg_free(weight);
            return dg_err_set(err, DG_EINTERNAL, "memplan: tensor %d has producer %d of %d nodes", t,
                              tt->producer, nn);
        }
        mp->offset[t] = 0; /* planned; placed in 3. */
        mp->first[t] = start[tt->producer];
        mp->last[t] = -1; /* no reader yet */
        mp->size[t] = align_up(dg_tensor_bytes(tt));
        mp->naive_bytes += mp->size[t];
        mp->n_planned++;
    }
    dg_free(weight);
    for (int v = 0; v < nn; v++)
        for (int i = 0; i < g->nodes[v].n_in; i++) {
            int t = g->nodes[v].in[i];
            if (t >= 0 && t < nt && mp->offset[t] >= 0) mp->last[t] = DG_MAX(mp->last[t], end[v]);
        }
    for (int t = 0; t < nt; t++)
        if (mp->offset[t] >= 0 && mp->last[t] < 0) mp->last[t] = horizon;
    for (int k = 0; k < n_keep; k++)
        if (keep[k] >= 0 && keep[k] < nt && mp->offset[keep[k]] >= 0) mp->last[keep[k]] = horizon;

    /* 2. the lower bound: most bytes live at once (sweep over boundaries) */
    life_ev *ev = dg_malloc(sizeof *ev * (size_t)DG_MAX(2 * mp->n_planned, 1));
    int ne = 0;
    for (int t = 0; t < nt; t++)
        if (mp->offset[t] >= 0) {
            ev[ne++] = (life_ev){mp->first[t], (int64_t)mp->size[t]};
            ev[ne++] = (life_ev){mp->last[t], -(int64_t)mp->size[t]};
        }
    qsort(ev, (size_t)ne, sizeof *ev, life_ev_cmp);
    int64_t live = 0;
    for (int i = 0; i < ne; i++) {
        live += ev[i].delta;
        if (live > 0 && (size_t)live > mp->live_peak_bytes) mp->live_peak_bytes = (size_t)live;
    }
    dg_free(ev);

    /* 3. placement: biggest first, into the best (smallest) fitting gap
     * among the tensors already placed whose lifetimes intersect */
    place_key *keys = dg_malloc(sizeof *keys * (size_t)DG_MAX(mp->n_planned, 1));
    int nk = 0;
    for (int t = 0; t < nt; t++)
        if (mp->offset[t] >= 0) keys[nk++] = (place_key){mp->size[t], mp->first[t], t};
    qsort(keys, (size_t)nk, sizeof *keys, place_cmp);
    int *placed = dg_malloc(sizeof(int) * (size_t)DG_MAX(nk, 1)); /* sorted by offset */
    int np = 0;
    for (int k = 0; k < nk; k++) {
        int t = keys[k].id;
        size_t sz = mp->size[t], top = 0, best = 0, best_gap = SIZE_MAX;
        bool found = false;
        for (int j = 0; j < np; j++) {
            int u = placed[j];
            if (!lives_overlap(mp, t, u)) continue;
            size_t uo = (size_t)mp->offset[u];
            if (uo >= top && uo - top >= sz && uo - top < best_gap) {
                best = top;
                best_gap = uo - top;
                found = true;
            }
            top = DG_MAX(top, uo + mp->size[u]);
        }
        mp->offset[t] = (int64_t)(found ? best : top);
        /* insert keeping `placed` sorted by offset (ties by id) */
        int at = np;
        while (at > 0 && (mp->offset[placed[at - 1]] > mp->offset[t] ||
                          (mp->offset[placed[at - 1]] == mp->offset[t] && placed[at - 1] > t))) {
            placed[at] = placed[at - 1];
            at--;
        }
        placed[at] = t;
        np++;
        mp->arena_bytes = DG_MAX(mp->arena_bytes, (size_t)mp->offset[t] + sz);
    }
    dg_free(placed);
    dg_free(keys);
    return DG_OK;
}

/* Sweep in birth order keeping the live set: two tensors with intersecting
 * lifetimes meet when the younger one is born, so each new tensor is only
 * checked against the ones alive at that moment (a handful, not all). */
typedef struct life_key {
    double first;
    int id;
} life_key;

static int life_cmp(const void *pa, const void *pb) {
    const life_key *a = pa, *b = pb;
    if (a->first != b->first) return a->first < b->first ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

int dg_memplan_validate(const dg_graph *g, const dg_memplan *mp, dg_err *err) {
    int nt = mp->n_tensors, n = 0, st = DG_OK;
    life_key *ks = dg_malloc(sizeof *ks * (size_t)DG_MAX(nt, 1));
    for (int t = 0; t < nt && st == DG_OK; t++) {
        if (mp->offset[t] < 0) continue;
        if (mp->offset[t] % DG_MEMPLAN_ALIGN)
            st = dg_err_set(err, DG_EINTERNAL, "memplan: tensor %d '%s' at offset %lld is not %d-byte aligned",
                            t, g->tensors[t].name, (long long)mp->offset[t], DG_MEMPLAN_ALIGN);
        else if ((size_t)mp->offset[t] + dg_tensor_bytes(&g->tensors[t]) > mp->arena_bytes)
            st = dg_err_set(err, DG_EINTERNAL, "memplan: tensor %d '%s' ends past the arena (%zu bytes)",
                            t, g->tensors[t].name, mp->arena_bytes);
        ks[n++] = (life_key){mp->first[t], t};
    }
    qsort(ks, (size_t)n, sizeof *ks, life_cmp);
    int *live = dg_malloc(sizeof(int) * (size_t)DG_MAX(n, 1));
    int nl = 0;
    for (int i = 0; i < n && st == DG_OK; i++) {
        int b = ks[i].id;
        int64_t b_lo = mp->offset[b], b_hi = b_lo + (int64_t)dg_tensor_bytes(&g->tensors[b]);
        int w = 0;
        for (int k = 0; k < nl; k++) {
            int a = live[k];
            if (mp->last[a] <= mp->first[b]) continue; /* dead: drop from the live set */
            live[w++] = a;
            int64_t a_lo = mp->offset[a], a_hi = a_lo + (int64_t)dg_tensor_bytes(&g->tensors[a]);
            if (st == DG_OK && a_lo < b_hi && b_lo < a_hi)
                st = dg_err_set(err, DG_EINTERNAL,
                                "memplan: tensors %d '%s' [%g,%g) and %d '%s' [%g,%g) are live together "
                                "but overlap at arena bytes %lld..%lld",
                                a, g->tensors[a].name, mp->first[a], mp->last[a], b,
                                g->tensors[b].name, mp->first[b], mp->last[b],
                                (long long)DG_MAX(a_lo, b_lo), (long long)DG_MIN(a_hi, b_hi));
        }
        nl = w;
        live[nl++] = b;
    }
    dg_free(live);
    dg_free(ks);
    return st;
}

void dg_memplan_free(dg_memplan *mp) {
    dg_free(mp->offset);
    dg_free(mp->size);
    dg_free(mp->first);
    dg_free(mp->last);
    memset(mp, 0, sizeof *mp);
}

void dg_memplan_print(const dg_memplan *mp, FILE *f) {
    double mib = 1024.0 * 1024.0;
    fprintf(f,
            "memory plan: %d activations, planned peak %.3f MiB (%zu bytes) vs naive sum %.3f MiB "
            "(%zu bytes): %.2fx smaller; lower bound %.3f MiB\n",
            mp->n_planned, (double)mp->arena_bytes / mib, mp->arena_bytes,
            (double)mp->naive_bytes / mib, mp->naive_bytes,
            mp->arena_bytes ? (double)mp->naive_bytes / (double)mp->arena_bytes : 0.0,
            (double)mp->live_peak_bytes / mib);
}
