/* dg_sim_engine.c — the virtual-time executor (dg_sim_engine.h). */
#include "dg_sim_engine.h"

#include <string.h>

#include "dg_collective.h"
#include "dg_prio.h"

void dg_sim_prog_from_plan(dg_sim_prog *pr, const dg_sim_stage *s, int pp_stage, int pp_size,
                           const dg_sim_device *d, const dg_link links[DG_AXIS_COUNT], int bf16) {
    const dg_sched_plan *p = s->plan;
    const dg_graph *g = s->g;
    int n = p->n_nodes;
    size_t sz = (size_t)DG_MAX(n, 1);
    memset(pr, 0, sizeof *pr);
    pr->n = n;
    pr->dur = dg_malloc(sizeof(double) * sz);
    pr->own = dg_malloc(sizeof(double) * sz);
    pr->succ_off = dg_malloc(sizeof(int) * (sz + 1));
    memcpy(pr->succ_off, p->succ_off, sizeof(int) * ((size_t)n + 1));
    pr->succ = dg_malloc(sizeof(int) * (size_t)DG_MAX(p->succ_off[n], 1));
    memcpy(pr->succ, p->succ, sizeof(int) * (size_t)p->succ_off[n]);
    pr->npred = dg_malloc(sizeof(int) * sz);
    memcpy(pr->npred, p->npred, sizeof(int) * (size_t)n);
    pr->prio = dg_malloc(sizeof(int) * sz);
    memcpy(pr->prio, p->rank, sizeof(int) * (size_t)n);
    pr->stream = dg_malloc(sz);
    pr->n_comm = p->n_stream[DG_STREAM_COMM];
    pr->comm_seq = dg_malloc(sizeof(int) * (size_t)DG_MAX(pr->n_comm, 1));
    memcpy(pr->comm_seq, p->seq[DG_STREAM_COMM], sizeof(int) * (size_t)pr->n_comm);
    pr->lane = dg_malloc(sz);
    pr->lane_seq = dg_malloc(sizeof(int) * (size_t)DG_MAX(pr->n_comm, 1));
    pr->lane_off[0] = pr->lane_off[1] = 0; /* lane 0 computes: no sequence */
    for (int l = 1; l < DG_SCHED_LANES; l++) {
        memcpy(pr->lane_seq + pr->lane_off[l], p->lane_seq[l], sizeof(int) * (size_t)p->n_lane[l]);
        pr->lane_off[l + 1] = pr->lane_off[l] + p->n_lane[l];
    }
    pr->peer_rank = dg_malloc(sizeof(int) * sz);
    pr->peer_node = dg_malloc(sizeof(int) * sz);
    pr->p2p = dg_calloc(sz, 1);
    pr->p2p_other = dg_malloc(sizeof(int) * sz);
    pr->p2p_tag = dg_malloc(sizeof(int) * sz);
    for (int v = 0; v < n; v++) {
        const dg_node *nd = &g->nodes[v];
        pr->stream[v] = (unsigned char)p->stream[v];
        pr->lane[v] = (unsigned char)p->lane[v];
        pr->dur[v] = pr->own[v] = dg_sim_node_time(d, links, bf16, g, nd);
        pr->peer_rank[v] = pr->peer_node[v] = -1;
        int k = nd->op->comm;
        if ((k == DG_COMM_SEND || k == DG_COMM_RECV) && nd->group == DG_AXIS_PP && pp_size > 1) {
            int off = (int)nd->attrs.i[DG_COLL_PEER];
            pr->p2p[v] = k == DG_COMM_SEND ? 1 : 2;
            pr->p2p_other[v] = ((pp_stage + off) % pp_size + pp_size) % pp_size;
            pr->p2p_tag[v] = dg_sim_p2p_tag(nd);
            if (k == DG_COMM_RECV) pr->own[v] = d->comm_task_s; /* the wire time is the send's */
        }
    }
    pr->start = dg_malloc(sizeof(double) * sz);
    pr->end = dg_malloc(sizeof(double) * sz);
    pr->bstart = dg_malloc(sizeof(double) * sz);
    pr->corder = dg_malloc(sizeof(int) * sz);
}

void dg_sim_prog_free(dg_sim_prog *pr) {
    void *a[] = {pr->dur,       pr->own,       pr->succ_off, pr->succ,     pr->npred,  pr->prio,
                 pr->stream,    pr->comm_seq,  pr->peer_rank, pr->peer_node, pr->p2p, pr->p2p_other,
                 pr->p2p_tag,   pr->start,     pr->end,      pr->bstart,   pr->corder,
                 pr->lane,      pr->lane_seq};
    for (size_t i = 0; i < DG_ARRAY_LEN(a); i++) dg_free(a[i]);
    memset(pr, 0, sizeof *pr);
}

/* ---- matching ------------------------------------------------------------- */

typedef struct msg {
    int from, to, tag, seq; /* key */
    int rank, node;
} msg;

static int msg_cmp(const void *pa, const void *pb) {
    const msg *a = pa, *b = pb;
    if (a->from != b->from) return a->from < b->from ? -1 : 1;
    if (a->to != b->to) return a->to < b->to ? -1 : 1;
    if (a->tag != b->tag) return a->tag < b->tag ? -1 : 1;
    return (a->seq > b->seq) - (a->seq < b->seq);
}

int dg_sim_match(dg_sim_prog *r, int n, dg_err *err) {
    int ns = 0, nr = 0;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < r[i].n_comm; k++) {
            int v = r[i].comm_seq[k];
            ns += r[i].p2p[v] == 1;
            nr += r[i].p2p[v] == 2;
        }
    if (ns != nr) return dg_err_set(err, DG_EINTERNAL, "simulate: %d pipeline sends but %d recvs", ns, nr);
    msg *s = dg_malloc(sizeof *s * (size_t)DG_MAX(ns, 1)), *q = dg_malloc(sizeof *q * (size_t)DG_MAX(nr, 1));
    int a = 0, b = 0;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < r[i].n_comm; k++) {
            int v = r[i].comm_seq[k];
            if (r[i].p2p[v] == 1) s[a++] = (msg){i, r[i].p2p_other[v], r[i].p2p_tag[v], k, i, v};
            if (r[i].p2p[v] == 2) q[b++] = (msg){r[i].p2p_other[v], i, r[i].p2p_tag[v], k, i, v};
        }
    qsort(s, (size_t)ns, sizeof *s, msg_cmp);
    qsort(q, (size_t)nr, sizeof *q, msg_cmp);
    int st = DG_OK;
    for (int k = 0; k < ns; k++) {
        if (s[k].from != q[k].from || s[k].to != q[k].to || s[k].tag != q[k].tag) {
            st = dg_err_set(err, DG_EINTERNAL, "simulate: send from stage %d to %d (tag %d) has no matching recv",
                            s[k].from, s[k].to, s[k].tag);
            break;
        }
        r[s[k].rank].peer_rank[s[k].node] = q[k].rank;
        r[s[k].rank].peer_node[s[k].node] = q[k].node;
        r[q[k].rank].peer_rank[q[k].node] = s[k].rank;
        r[q[k].rank].peer_node[q[k].node] = s[k].node;
    }
    dg_free(s);
    dg_free(q);
    return st;
}

/* ---- the run --------------------------------------------------------------- */

typedef struct event {
    double t;
    long long seq; /* push order: ties end in the order they were started */
    int rank, stream;
} event;

typedef struct event_heap {
    event *a;
    int n, cap;
    long long seq;
} event_heap;

static int ev_less(const event *x, const event *y) { return x->t < y->t || (x->t == y->t && x->seq < y->seq); }

static void ev_push(event_heap *h, double t, int rank, int stream) {
    if (h->n == h->cap) h->a = dg_realloc(h->a, sizeof *h->a * (size_t)(h->cap = h->cap ? 2 * h->cap : 64));
    int c = h->n++;
    h->a[c] = (event){t, h->seq++, rank, stream};
    while (c > 0 && ev_less(&h->a[c], &h->a[(c - 1) / 2])) {
        event tmp = h->a[c];
        h->a[c] = h->a[(c - 1) / 2];
        h->a[(c - 1) / 2] = tmp;
        c = (c - 1) / 2;
    }
}

static event ev_pop(event_heap *h) {
    event top = h->a[0];
    h->a[0] = h->a[--h->n];
    for (int c = 0;;) {
        int l = 2 * c + 1, r = l + 1, m = c;
        if (l < h->n && ev_less(&h->a[l], &h->a[m])) m = l;
        if (r < h->n && ev_less(&h->a[r], &h->a[m])) m = r;
        if (m == c) break;
        event tmp = h->a[m];
        h->a[m] = h->a[c];
        h->a[c] = tmp;
        c = m;
    }
    return top;
}

/* Per-rank run state. */
typedef struct rstate {
    dg_heap heap;             /* ready compute tasks by priority */
    int *remaining;
    int running[DG_SCHED_LANES]; /* per lane: its task, -1: idle */
    int cursor[DG_SCHED_LANES];  /* per comm lane: its next task, in plan order */
} rstate;

/* A recv's end once its send has started: no earlier than the send's end
 * (the data has arrived), and its own hand-off after it starts. */
static void recv_end(dg_sim_prog *pr, int v, const dg_sim_prog *sp, int u) {
    double e = DG_MAX(pr->start[v] + pr->own[v], sp->end[u]);
    pr->end[v] = e;
    pr->bstart[v] = DG_MAX(pr->start[v], e - pr->dur[v]); /* waiting for the send is idle, not comm */
}

/* Start comm lane l's next task if it is ready and the lane idle. */
static void dispatch_comm(dg_sim_prog *r, rstate *rs, int i, int l, double now, event_heap *h) {
    dg_sim_prog *pr = &r[i];
    rstate *s = &rs[i];
    if (s->running[l] >= 0 || s->cursor[l] >= pr->lane_off[l + 1]) return;
    int v = pr->lane_seq[s->cursor[l]];
    if (s->remaining[v] > 0) return;
    s->cursor[l]++;
    s->running[l] = v;
    pr->start[v] = pr->bstart[v] = now;
    int pk = pr->peer_rank[v], pu = pr->peer_node[v];
    if (pr->p2p[v] == 2 && pk >= 0) { /* a recv: ends once its send has */
        if (r[pk].end[pu] >= 0) {
            recv_end(pr, v, &r[pk], pu);
            ev_push(h, pr->end[v], i, l);
        }
        return; /* else the send's dispatch ends it */
    }
    pr->end[v] = now + pr->dur[v];
    ev_push(h, pr->end[v], i, l);
    if (pr->p2p[v] == 1 && pk >= 0 && r[pk].start[pu] >= 0 && r[pk].end[pu] < 0) { /* its recv waits */
        recv_end(&r[pk], pu, pr, v);
        ev_push(h, r[pk].end[pu], pk, r[pk].lane[pu]);
    }
}

static void dispatch(dg_sim_prog *r, rstate *rs, int i, double now, event_heap *h) {
    dg_sim_prog *pr = &r[i];
    rstate *s = &rs[i];
    if (s->running[DG_STREAM_COMPUTE] < 0 && s->heap.n > 0) {
        int v = dg_heap_pop(&s->heap);
        s->running[DG_STREAM_COMPUTE] = v;
        pr->start[v] = pr->bstart[v] = now;
        pr->end[v] = now + pr->dur[v];
        pr->corder[pr->n_corder++] = v;
        ev_push(h, pr->end[v], i, DG_STREAM_COMPUTE);
    }
    for (int l = 1; l < DG_SCHED_LANES; l++) dispatch_comm(r, rs, i, l, now, h);
}

/* Whether every comm lane of a rank has run out of tasks. */
static int stage_done(const dg_sim_prog *pr, const rstate *s) {
    for (int l = 1; l < DG_SCHED_LANES; l++)
        if (s->cursor[l] < pr->lane_off[l + 1] || s->running[l] >= 0) return 0;
    return 1;
}

int dg_sim_execute(dg_sim_prog *r, int n, dg_err *err) {
    rstate *rs = dg_calloc((size_t)n, sizeof *rs);
    event_heap h = {0};
    long long total = 0, done = 0;
    for (int i = 0; i < n; i++) {
        dg_sim_prog *pr = &r[i];
        size_t sz = (size_t)DG_MAX(pr->n, 1);
        rs[i].remaining = dg_malloc(sizeof(int) * sz);
        memcpy(rs[i].remaining, pr->npred, sizeof(int) * (size_t)pr->n);
        rs[i].heap = (dg_heap){dg_malloc(sizeof(int) * sz), 0, pr->prio};
        for (int l = 0; l < DG_SCHED_LANES; l++) {
            rs[i].running[l] = -1;
            rs[i].cursor[l] = pr->lane_off[l];
        }
        pr->n_corder = 0;
        for (int v = 0; v < pr->n; v++) {
            pr->start[v] = pr->end[v] = -1;
            if (pr->npred[v] == 0 && pr->stream[v] == DG_STREAM_COMPUTE) dg_heap_push(&rs[i].heap, v);
        }
        total += pr->n;
    }
    for (int i = 0; i < n; i++) dispatch(r, rs, i, 0, &h);
    while (h.n > 0) {
        event e = ev_pop(&h);
        dg_sim_prog *pr = &r[e.rank];
        rstate *s = &rs[e.rank];
        int v = s->running[e.stream];
        s->running[e.stream] = -1;
        done++;
        for (int k = pr->succ_off[v]; k < pr->succ_off[v + 1]; k++) {
            int w = pr->succ[k];
            if (--s->remaining[w] == 0 && pr->stream[w] == DG_STREAM_COMPUTE) dg_heap_push(&s->heap, w);
        }
        dispatch(r, rs, e.rank, e.t, &h);
    }
    int st = DG_OK;
    if (done != total) {
        int i = 0;
        while (i < n - 1 && stage_done(&r[i], &rs[i])) i++;
        st = dg_err_set(err, DG_EINTERNAL, "simulate: the virtual run stalled after %lld of %lld tasks (stage %d)",
                        done, total, i);
    }
    for (int i = 0; i < n; i++) {
        dg_free(rs[i].remaining);
        dg_free(rs[i].heap.a);
    }
    dg_free(rs);
    dg_free(h.a);
    return st;
}

static int start_cmp(const void *pa, const void *pb, void *ctx) {
    const double *st = ctx;
    double a = st[*(const int *)pa], b = st[*(const int *)pb];
    return (a > b) - (a < b);
}

void dg_sim_prog_stats(const dg_sim_prog *r, double *end, double *busy_compute, double *busy_comm,
                       double *exposed) {
    double e = 0, bc = 0, bm = 0, x = 0;
    for (int v = 0; v < r->n; v++) e = DG_MAX(e, r->end[v]);
    for (int k = 0; k < r->n_corder; k++) bc += r->dur[r->corder[k]];
    /* comm intervals against the compute intervals (in dispatch order, one
     * after the other), both sorted by start: the comm lanes run side by
     * side, so plan order is not start order; each comm interval counts its
     * own uncovered time */
    int *cs = dg_malloc(sizeof(int) * (size_t)DG_MAX(r->n_comm, 1));
    memcpy(cs, r->comm_seq, sizeof(int) * (size_t)r->n_comm);
    qsort_r(cs, (size_t)r->n_comm, sizeof(int), start_cmp, r->bstart);
    int j = 0;
    for (int k = 0; k < r->n_comm; k++) {
        int v = cs[k];
        double a = r->bstart[v], b = r->end[v], covered = 0;
        bm += b - a;
        while (j < r->n_corder && r->end[r->corder[j]] <= a) j++;
        for (int q = j; q < r->n_corder && r->start[r->corder[q]] < b; q++) {
            int c = r->corder[q];
            covered += DG_MIN(b, r->end[c]) - DG_MAX(a, r->start[c]);
        }
        x += (b - a) - DG_MAX(covered, 0);
    }
    dg_free(cs);
    *end = e;
    *busy_compute = bc;
    *busy_comm = bm;
    *exposed = x;
}
