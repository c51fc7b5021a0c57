/* dg_trace_stats.c — busy time, exposed communication and h per rank of a
 * trace (see dg_trace_stats.h). */
#include "dg_trace_stats.h"

#include <stdlib.h>
#include <string.h>

typedef struct span_iv {
    double a, b;
} span_iv;

static int by_start(const void *x, const void *y) {
    double d = ((const span_iv *)x)->a - ((const span_iv *)y)->a;
    return d < 0 ? -1 : d > 0;
}

/* Sort iv[0..n) and merge it into disjoint intervals; returns their count. */
static int merge(span_iv *iv, int n) {
    qsort(iv, (size_t)n, sizeof *iv, by_start);
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (k && iv[i].a <= iv[k - 1].b) iv[k - 1].b = DG_MAX(iv[k - 1].b, iv[i].b);
        else iv[k++] = iv[i];
    }
    return k;
}

static double total(const span_iv *iv, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += iv[i].b - iv[i].a;
    return s;
}

/* Length of the disjoint sorted set m minus the disjoint sorted set c. */
static double minus(const span_iv *m, int nm, const span_iv *c, int nc) {
    double s = 0;
    int j = 0;
    for (int i = 0; i < nm; i++) {
        double a = m[i].a;
        while (j < nc && c[j].b <= a) j++;
        for (int k = j; k < nc && c[k].a < m[i].b; k++) {
            if (c[k].a > a) s += c[k].a - a;
            a = DG_MAX(a, c[k].b);
        }
        if (a < m[i].b) s += m[i].b - a;
    }
    return s;
}

static void rank_stats(const dg_trace_file *t, int pid, span_iv *iv[2], dg_trace_rank_stats *r) {
    memset(r, 0, sizeof *r);
    r->pid = pid;
    double lo = 1e300, hi = -1e300;
    for (int i = 0; i < t->n_ev; i++) {
        const dg_trace_event *e = &t->ev[i];
        if (e->pid != pid) continue;
        lo = DG_MIN(lo, e->ts);
        hi = DG_MAX(hi, e->ts + e->dur);
        if (e->tid < 0 || e->tid >= DG_TRACE_N_STREAMS) continue;
        iv[e->tid][r->n_ev[e->tid]++] = (span_iv){e->ts, e->ts + e->dur};
    }
    r->span = hi > lo ? hi - lo : 0;
    int n[DG_TRACE_N_STREAMS];
    for (int s = 0; s < DG_TRACE_N_STREAMS; s++) {
        n[s] = merge(iv[s], r->n_ev[s]);
        r->busy[s] = total(iv[s], n[s]);
    }
    double tm = r->busy[DG_TRACE_COMM];
    r->exposed = minus(iv[DG_TRACE_COMM], n[DG_TRACE_COMM], iv[DG_TRACE_COMPUTE], n[DG_TRACE_COMPUTE]);
    /* The comm time that ran under compute, over all comm: in [0, 1] since
     * 0 <= exposed <= tm. (T_compute + T_comm - T_span) / T_comm counted
     * the time neither stream ran (a pipeline's bubble, a late peer) as
     * comm left exposed, and went negative under PP.) */
    r->h = tm > 0 ? DG_MIN(DG_MAX(1.0 - r->exposed / tm, 0.0), 1.0) : 0;
}

static int by_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

int dg_trace_rank_stats_of(const dg_trace_file *t, dg_trace_rank_stats **out) {
    int *pids = dg_malloc(sizeof(int) * (size_t)DG_MAX(t->n_ev, 1)), np = 0;
    for (int i = 0; i < t->n_ev; i++) pids[i] = t->ev[i].pid;
    qsort(pids, (size_t)t->n_ev, sizeof *pids, by_int);
    for (int i = 0; i < t->n_ev; i++)
        if (!np || pids[np - 1] != pids[i]) pids[np++] = pids[i];
    span_iv *iv[DG_TRACE_N_STREAMS];
    for (int s = 0; s < DG_TRACE_N_STREAMS; s++) iv[s] = dg_malloc(sizeof(span_iv) * (size_t)DG_MAX(t->n_ev, 1));
    dg_trace_rank_stats *r = dg_calloc((size_t)DG_MAX(np, 1), sizeof *r);
    for (int k = 0; k < np; k++) rank_stats(t, pids[k], iv, &r[k]);
    for (int s = 0; s < DG_TRACE_N_STREAMS; s++) dg_free(iv[s]);
    dg_free(pids);
    *out = r;
    return np;
}
