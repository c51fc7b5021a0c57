/* dg_comm_emulate.c — link emulation over another comm backend (see
 * dg_comm_emulate.h). */
#include "dg_comm_emulate.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dg_grid.h"

/* ---- the spec -------------------------------------------------------------------- */

/* "GBPS,USEC": both numbers, bandwidth > 0, latency >= 0, nothing else. */
static int parse_link(const char *v, dg_link *l) {
    char *end = NULL;
    double b = strtod(v, &end);
    if (end == v || *end != ',') return 0;
    const char *u = end + 1;
    double a = strtod(u, &end);
    if (end == u || *end) return 0;
    if (!(b > 0) || !(a >= 0) || b > 1e9 || a > 1e9) return 0;
    l->gbps = b;
    l->usec = a;
    return 1;
}

static int bad(dg_err *err, const char *flag, const char *word) {
    return dg_err_set(err, DG_EINPUT,
                      "%s: '%s' is not GBPS,USEC or AXIS=GBPS,USEC (axis tp, cp, ep, dp, pp or edp; "
                      "GBPS > 0, USEC >= 0), e.g. '10,10' or 'tp=400,2 ep=25,10'",
                      flag, word);
}

int dg_link_spec_parse(const char *s, const char *flag, dg_link_spec *out, dg_err *err) {
    memset(out, 0, sizeof *out);
    int edp_named = 0, words = 0;
    char word[128];
    for (const char *p = s; *p;) {
        while (*p == ' ' || *p == '\t') p++;
        if (!*p) break;
        size_t n = strcspn(p, " \t");
        if (n >= sizeof word) n = sizeof word - 1;
        memcpy(word, p, n);
        word[n] = 0;
        p += strcspn(p, " \t");
        words++;
        char *eq = strchr(word, '=');
        dg_link l;
        if (!eq) {
            if (!parse_link(word, &l)) return bad(err, flag, word);
            for (int a = DG_AXIS_NONE + 1; a < DG_AXIS_COUNT; a++) out->axis[a] = l;
            continue;
        }
        *eq = 0;
        int axis = -1;
        for (int a = DG_AXIS_NONE + 1; a < DG_AXIS_COUNT; a++)
            if (!strcmp(word, dg_axis_name((dg_axis)a))) axis = a;
        if (axis < 0 || !parse_link(eq + 1, &l)) {
            *eq = '=';
            return bad(err, flag, word);
        }
        out->axis[axis] = l;
        if (axis == DG_AXIS_EDP) edp_named = 1;
        else if (axis == DG_AXIS_DP && !edp_named) out->axis[DG_AXIS_EDP] = l;
    }
    if (!words) return dg_err_set(err, DG_EINPUT, "%s: expected GBPS,USEC or AXIS=GBPS,USEC, got nothing", flag);
    return DG_OK;
}

int dg_link_spec_any(const dg_link_spec *s) {
    for (int a = 0; a < DG_AXIS_COUNT; a++)
        if (s->axis[a].gbps > 0) return 1;
    return 0;
}

double dg_link_time(const dg_link *l, dg_link_op op, int p, double bytes) {
    if (!l || !(l->gbps > 0) || p <= 1) return 0;
    double B = l->gbps * 1e9, a = l->usec * 1e-6, f = (double)(p - 1) / p;
    switch (op) {
    case DG_LINK_ALL_REDUCE: return 2 * f * bytes / B + 2 * (p - 1) * a;
    case DG_LINK_REDUCE_SCATTER:
    case DG_LINK_ALL_GATHER: return f * bytes / B + (p - 1) * a;
    case DG_LINK_ALL_TO_ALL: return bytes / B + (p - 1) * a;
    case DG_LINK_P2P: return bytes / B + a;
    }
    return 0;
}

void dg_link_cost_model(const dg_link_spec *s, dg_cost_model *m) {
    *m = dg_cost_model_default();
    for (int a = DG_AXIS_NONE + 1; a < DG_AXIS_COUNT; a++)
        if (s->axis[a].gbps > 0) {
            m->axis_bytes_per_s[a] = s->axis[a].gbps * 1e9;
            m->axis_latency_s[a] = s->axis[a].usec * 1e-6;
        }
}

/* ---- the wrapper --------------------------------------------------------------------- */

typedef struct emu_impl {
    dg_comm *inner;
    dg_link link;
} emu_impl;

/* An operation in flight: the inner request and the absolute deadline. */
typedef struct emu_req {
    dg_comm_req inner;
    struct timespec deadline;
} emu_req;

static dg_comm *inner_of(dg_comm *c) { return ((emu_impl *)c->impl)->inner; }

/* Start bookkeeping: req gets an emu_req whose deadline is now + seconds. */
static int emu_started(dg_comm *c, int st, dg_comm_req *inner, dg_link_op op, double bytes,
                       dg_comm_req *req) {
    req->impl = NULL;
    if (st != DG_OK) return st;
    emu_req *r = dg_malloc(sizeof *r);
    r->inner = *inner;
    double s = dg_link_time(&((emu_impl *)c->impl)->link, op, c->size, bytes);
    clock_gettime(CLOCK_MONOTONIC, &r->deadline);
    long long ns = (long long)(s * 1e9) + r->deadline.tv_nsec;
    r->deadline.tv_sec += (time_t)(ns / 1000000000LL);
    r->deadline.tv_nsec = (long)(ns % 1000000000LL);
    req->impl = r;
    return DG_OK;
}

static int e_all_reduce(dg_comm *c, const void *send, void *recv, int64_t count, dg_dtype dt,
                        dg_comm_req *req, dg_err *err) {
    dg_comm_req in = {0};
    dg_comm *x = inner_of(c);
    int st = x->ops->all_reduce(x, send, recv, count, dt, &in, err);
    return emu_started(c, st, &in, DG_LINK_ALL_REDUCE, (double)count * (double)dg_dtype_size(dt), req);
}

static int e_all_gather(dg_comm *c, const void *send, void *recv, int64_t count, dg_dtype dt,
                        dg_comm_req *req, dg_err *err) {
    dg_comm_req in = {0};
    dg_comm *x = inner_of(c);
    int st = x->ops->all_gather(x, send, recv, count, dt, &in, err);
    double out_bytes = (double)count * c->size * (double)dg_dtype_size(dt);
    return emu_started(c, st, &in, DG_LINK_ALL_GATHER, out_bytes, req);
}

static int e_reduce_scatter(dg_comm *c, const void *send, void *recv, int64_t count, dg_dtype dt,
                            dg_comm_req *req, dg_err *err) {
    dg_comm_req in = {0};
    dg_comm *x = inner_of(c);
    int st = x->ops->reduce_scatter(x, send, recv, count, dt, &in, err);
    double in_bytes = (double)count * c->size * (double)dg_dtype_size(dt);
    return emu_started(c, st, &in, DG_LINK_REDUCE_SCATTER, in_bytes, req);
}

static int e_all_to_allv(dg_comm *c, const void *send, const int64_t *sc, const int64_t *sd, void *recv,
                         const int64_t *rc, const int64_t *rd, dg_dtype dt, dg_comm_req *req,
                         dg_err *err) {
    dg_comm_req in = {0};
    dg_comm *x = inner_of(c);
    int st = x->ops->all_to_allv(x, send, sc, sd, recv, rc, rd, dt, &in, err);
    double sent = 0, got = 0;
    for (int j = 0; j < c->size; j++)
        if (j != c->rank) sent += (double)sc[j], got += (double)rc[j];
    double bytes = (sent > got ? sent : got) * (double)dg_dtype_size(dt);
    return emu_started(c, st, &in, DG_LINK_ALL_TO_ALL, bytes, req);
}

static int e_send(dg_comm *c, const void *buf, int64_t count, dg_dtype dt, int peer, int tag,
                  dg_comm_req *req, dg_err *err) {
    dg_comm_req in = {0};
    dg_comm *x = inner_of(c);
    int st = x->ops->send(x, buf, count, dt, peer, tag, &in, err);
    double bytes = peer == c->rank ? 0 : (double)count * (double)dg_dtype_size(dt);
    return emu_started(c, st, &in, DG_LINK_P2P, bytes, req);
}

static int e_recv(dg_comm *c, void *buf, int64_t count, dg_dtype dt, int peer, int tag,
                  dg_comm_req *req, dg_err *err) {
    dg_comm_req in = {0};
    dg_comm *x = inner_of(c);
    int st = x->ops->recv(x, buf, count, dt, peer, tag, &in, err);
    double bytes = peer == c->rank ? 0 : (double)count * (double)dg_dtype_size(dt);
    return emu_started(c, st, &in, DG_LINK_P2P, bytes, req);
}

static int past(const struct timespec *d) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec > d->tv_sec || (now.tv_sec == d->tv_sec && now.tv_nsec >= d->tv_nsec);
}

/* Sleep until the absolute deadline d (restarting after a signal). */
static void sleep_until(const struct timespec *d) {
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, d, NULL) == EINTR) {
    }
}

/* Poll the inner operation every 200 us and sleep in between, never spin:
 * a blocking wait would busy-poll while a late peer is still computing
 * (Open MPI's wait does), taking the core of this rank's compute thread or
 * the peer's, which is what the emulated network must not cost. The polls
 * also drive MPI's progress of the real transfer. Then sleep out the
 * deadline. */
static int e_wait(dg_comm *c, dg_comm_req *req, dg_err *err) {
    emu_req *r = req->impl;
    if (!r) return DG_OK;
    dg_comm *x = inner_of(c);
    int st = DG_OK, done = 0;
    while (st == DG_OK && !done) {
        st = x->ops->test(x, &r->inner, &done, err);
        if (st == DG_OK && !done) {
            struct timespec t = {0, 200000};
            nanosleep(&t, NULL);
        }
    }
    if (st == DG_OK) sleep_until(&r->deadline); /* (a failed MPI call has ended the job) */
    dg_free(r);
    req->impl = NULL;
    return st;
}

static int e_test(dg_comm *c, dg_comm_req *req, int *done, dg_err *err) {
    emu_req *r = req->impl;
    *done = 1;
    if (!r) return DG_OK;
    dg_comm *x = inner_of(c);
    int in_done = 0;
    /* A finished inner request has impl NULL, and testing it again is a no-op. */
    int st = x->ops->test(x, &r->inner, &in_done, err);
    *done = st == DG_OK && in_done && past(&r->deadline);
    if (*done) {
        dg_free(r);
        req->impl = NULL;
    }
    return st;
}

static int e_barrier(dg_comm *c, dg_err *err) {
    dg_comm *x = inner_of(c);
    return x->ops->barrier(x, err);
}

static int e_split(dg_comm *c, int color, int key, dg_comm **out, dg_err *err) {
    dg_comm *x = inner_of(c), *sub = NULL;
    int st = x->ops->split(x, color, key, &sub, err);
    *out = st == DG_OK ? dg_comm_emulate_new(sub, ((emu_impl *)c->impl)->link) : NULL;
    return st;
}

static void e_free(dg_comm *c) {
    emu_impl *e = c->impl;
    dg_comm_free(e->inner);
    dg_free(e);
    dg_free(c);
}

static const dg_comm_ops emu_ops = {
    .name = "emulated",
    .all_reduce = e_all_reduce,
    .all_gather = e_all_gather,
    .reduce_scatter = e_reduce_scatter,
    .all_to_allv = e_all_to_allv,
    .send = e_send,
    .recv = e_recv,
    .wait = e_wait,
    .test = e_test,
    .barrier = e_barrier,
    .split = e_split,
    .free = e_free,
};

dg_comm *dg_comm_emulate_new(dg_comm *inner, dg_link link) {
    dg_comm *c = dg_calloc(1, sizeof *c);
    emu_impl *e = dg_calloc(1, sizeof *e);
    e->inner = inner;
    e->link = link;
    c->ops = &emu_ops;
    c->rank = inner->rank;
    c->size = inner->size;
    c->impl = e;
    return c;
}

void dg_grid_emulate_links(dg_grid *g, const dg_link_spec *s) {
    for (int a = DG_AXIS_NONE + 1; a < DG_AXIS_COUNT; a++) {
        if (!(s->axis[a].gbps > 0)) continue;
        if (a == DG_AXIS_DP) g->dp_cp = dg_comm_emulate_new(g->dp_cp, s->axis[a]);
        else g->group[a] = dg_comm_emulate_new(g->group[a], s->axis[a]);
    }
}
