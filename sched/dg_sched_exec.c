/* dg_sched_exec.c — the runtime (threads, buffers) and running a step.
 *
 * One driver thread per stream: the compute stream and a comm stream per
 * distinct comm group of the plan's lanes (dg_sched.h). All scheduler state
 * of a step lives in a run_state guarded by one mutex: per-node
 * remaining-predecessor counts, a ready heap for the out-of-order compute
 * stream, and for each in-order comm stream its tasks (its lanes' merged in
 * plan order) and a cursor. A driver takes a task under the lock, runs it unlocked, then under
 * the lock releases its successors (an edge to another stream signals that
 * stream's driver) and counts it done. A driver with nothing to do sleeps on
 * its condition variable; the caller of dg_sched_run sleeps until the step
 * is finished. One lock is enough: a task holds it twice for well under a
 * microsecond, and compute kernels run one at a time anyway.
 *
 * Before sleeping, a driver spins briefly (without the lock) on its stream's
 * kick counter, which make_ready bumps: a cross-stream edge is often
 * released within microseconds, and waking a sleeping thread costs several.
 * The spin is bounded, so an idle runtime sleeps.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "dg_op.h"
#include "dg_pool.h"
#include "dg_prio.h"
#include "dg_sched.h"
#include "dg_runtime_internal.h"
#include "dg_stream.h"

typedef struct run_state {
    const dg_sched_plan *p;
    int *remaining;                 /* per node: predecessors not finished */
    dg_heap heap[DG_SCHED_LANES];   /* ready tasks of out-of-order streams */
    int *seq[DG_SCHED_LANES];       /* in-order streams: their tasks in plan order */
    int len[DG_SCHED_LANES];
    int next[DG_SCHED_LANES];       /* in-order streams: index into seq[s] */
    int *seq_buf;
    int done, inflight, failed, finished, status;
    dg_err err;
    double *t0, *t1;                /* per node: start and end (dg_now) */
    double sched_time[DG_SCHED_LANES];
} run_state;

/* ---- the step's state machine (all under rt->mu) ---------------------------------- */

static int has_work(const dg_runtime *rt, const run_state *rs, int s) {
    if (rs->failed) return 0;
    if (rt->streams[s]->in_order) return rs->next[s] < rs->len[s] && rs->remaining[rs->seq[s][rs->next[s]]] == 0;
    return rs->heap[s].n > 0;
}

static int take(const dg_runtime *rt, run_state *rs, int s) {
    if (rt->streams[s]->in_order) return rs->seq[s][rs->next[s]++];
    return dg_heap_pop(&rs->heap[s]);
}

/* Node v's last predecessor finished: queue it and wake its stream's driver
 * unless that is the caller itself (it will look again before sleeping). */
static void kick(dg_runtime *rt, int s) {
    atomic_fetch_add_explicit(&rt->kick[s], 1, memory_order_release);
    pthread_cond_signal(&rt->cv[s]);
}

static void make_ready(dg_runtime *rt, run_state *rs, int v, int self) {
    int s = rt->lane_stream[rs->p->lane[v]];
    if (rt->streams[s]->in_order) {
        if (rs->next[s] < rs->len[s] && rs->seq[s][rs->next[s]] == v && s != self) kick(rt, s);
    } else {
        dg_heap_push(&rs->heap[s], v);
        if (s != self) kick(rt, s);
    }
}

static void release(dg_runtime *rt, run_state *rs, int v, int self) {
    const dg_sched_plan *p = rs->p;
    for (int e = p->succ_off[v]; e < p->succ_off[v + 1]; e++) {
        int w = p->succ[e];
        if (--rs->remaining[w] == 0) make_ready(rt, rs, w, self);
    }
}

static void check_finished(dg_runtime *rt, run_state *rs) {
    if (rs->done == rs->p->n_nodes || (rs->failed && rs->inflight == 0)) {
        rs->finished = 1;
        pthread_cond_signal(&rt->cv_caller);
        return;
    }
    if (rs->inflight == 0) { /* nothing running: someone must have work */
        for (int s = 0; s < rt->n_streams; s++)
            if (has_work(rt, rs, s)) return;
        rs->failed = 1;
        rs->status = dg_err_set(&rs->err, DG_EINTERNAL, "scheduler stalled after %d of %d tasks",
                                rs->done, rs->p->n_nodes);
        rs->finished = 1;
        pthread_cond_signal(&rt->cv_caller);
    }
}

static void *driver_main(void *arg) {
    driver *d = arg;
    dg_runtime *rt = d->rt;
    int s = d->s;
    if (rt->pin) {
        if (s == DG_STREAM_COMPUTE) dg_topo_bind_self(rt->topo, 0, "compute.0");
        else dg_topo_bind_self(rt->topo, rt->comm_slot, dg_stream_name(DG_STREAM_COMM));
    }
    pthread_mutex_lock(&rt->mu);
    rt->started++;
    pthread_cond_broadcast(&rt->cv_caller);
    for (;;) {
        while (!rt->stop && !(rt->run && has_work(rt, rt->run, s))) {
            /* spin a little without the lock, then sleep */
            unsigned long seen = atomic_load(&rt->kick[s]);
            int in_step = rt->spin && rt->run != NULL;
            pthread_mutex_unlock(&rt->mu);
            for (int i = 0; in_step && i < DG_DRIVER_SPIN; i++)
                if (atomic_load_explicit(&rt->kick[s], memory_order_acquire) != seen) break;
            pthread_mutex_lock(&rt->mu);
            if (rt->stop || (rt->run && has_work(rt, rt->run, s))) break;
            if (atomic_load(&rt->kick[s]) != seen) continue;
            pthread_cond_wait(&rt->cv[s], &rt->mu);
        }
        if (rt->stop) break;
        double tw = dg_now();
        run_state *rs = rt->run;
        const dg_sched_plan *p = rs->p;
        const dg_graph *g = p->g;
        int v = take(rt, rs, s);
        rs->inflight++;
        pthread_mutex_unlock(&rt->mu);

        /* run the task, unlocked */
        const dg_node *n = &g->nodes[v];
        void *in[DG_MAX_INPUTS], *out[DG_MAX_OUTPUTS];
        for (int i = 0; i < n->n_in; i++) in[i] = n->in[i] >= 0 ? rt->ptr[n->in[i]] : NULL;
        for (int j = 0; j < n->n_out; j++) out[j] = n->out[j] >= 0 ? rt->ptr[n->out[j]] : NULL;
        dg_err e = {{0}};
        double t0 = dg_now();
        int st = rt->streams[s]->ops->exec(rt->streams[s], g, n, in, out, &e);
        double t1 = dg_now();

        pthread_mutex_lock(&rt->mu);
        rs->t0[v] = t0;
        rs->t1[v] = t1;
        if (st != DG_OK) {
            if (!rs->failed) {
                rs->failed = 1;
                rs->status = st;
                rs->err = e;
            }
        } else {
            release(rt, rs, v, s);
        }
        rs->done++;
        rs->inflight--;
        check_finished(rt, rs);
        rs->sched_time[s] += (t0 - tw) + (dg_now() - t1);
    }
    pthread_mutex_unlock(&rt->mu);
    return NULL;
}

/* ---- the runtime ------------------------------------------------------------------------ */

dg_runtime *dg_runtime_new(const dg_runtime_opts *o, dg_err *err) {
    dg_runtime_opts dflt;
    memset(&dflt, 0, sizeof dflt);
    if (!o) o = &dflt;
    dg_topo *topo = dg_topo_new(err);
    if (!topo) return NULL;
    dg_topo_info info;
    dg_topo_get_info(topo, &info);
    int nth = o->compute_threads > 0 ? o->compute_threads : info.rank_cores;
    if (nth < 1) nth = 1;
    if (nth > 1024) {
        dg_topo_free(topo);
        dg_err_set(err, DG_EINPUT, "compute threads: %d is more than 1024", nth);
        return NULL;
    }
    dg_runtime *rt = dg_calloc(1, sizeof *rt);
    rt->topo = topo;
    rt->nthreads = nth;
    rt->rank = o->rank;
    rt->pin = !o->no_pin;
    /* The comm thread gets a core of its own when the team leaves one free;
     * otherwise it floats over the rank's cores (it mostly sleeps). Spinning
     * before sleep pays only when no two busy threads share a core. */
    rt->comm_slot = nth < info.rank_cores ? info.rank_cores - 1 : -1;
    rt->self = dg_comm_self_new();
    for (int a = 0; a < DG_AXIS_COUNT; a++) rt->groups[a] = o->groups[a] ? o->groups[a] : rt->self;
    /* A comm stream per distinct group of more than one rank; the lanes of
     * one-rank groups (which wait for no peer) share the self group's. */
    rt->n_streams = 1;
    rt->lane_stream[0] = DG_STREAM_COMPUTE;
    for (int a = 0; a < DG_AXIS_COUNT; a++) {
        dg_comm *key = rt->groups[a]->size > 1 ? rt->groups[a] : rt->self;
        int s = 1;
        while (s < rt->n_streams && rt->stream_group[s] != key) s++;
        if (s == rt->n_streams) rt->stream_group[rt->n_streams++] = key;
        rt->lane_stream[1 + a] = s;
    }
    rt->spin = nth + rt->n_streams - 1 <= info.rank_cores;
    rt->pool = dg_pool_new(nth, rt->pin ? topo : NULL, 0, "compute");
    DG_CHECK0(pthread_mutex_init(&rt->mu, NULL));
    DG_CHECK0(pthread_cond_init(&rt->cv_caller, NULL));
    if (o->make_device) { /* a device runs the steps: no stream drivers here */
        dg_err why = {{0}}; /* the factory's own reason when it fails */
        rt->dev = o->make_device(dg_pool_team(rt->pool), o->make_device_arg, &why);
        if (!rt->dev) {
            dg_runtime_free(rt);
            if (!why.msg[0]) dg_err_set(&why, DG_EINTERNAL, "runtime: the device factory failed without saying why");
            if (err) *err = why;
            return NULL;
        }
        rt->dev->ops->set_groups(rt->dev, rt->groups);
        rt->host_fallback = o->host_fallback;
        return rt;
    }
    rt->streams[DG_STREAM_COMPUTE] = dg_stream_cpu_compute_new(dg_pool_team(rt->pool));
    for (int s = 1; s < rt->n_streams; s++) rt->streams[s] = dg_stream_cpu_comm_new(rt->groups);
    for (int s = 0; s < rt->n_streams; s++) {
        atomic_init(&rt->kick[s], 0);
        DG_CHECK0(pthread_cond_init(&rt->cv[s], NULL));
        rt->drivers[s] = (driver){rt, s, 0};
        DG_CHECK0(pthread_create(&rt->drivers[s].thread, NULL, driver_main, &rt->drivers[s]));
        rt->n_drivers++;
    }
    /* Wait until the drivers are pinned, so a placement report is complete. */
    pthread_mutex_lock(&rt->mu);
    while (rt->started < rt->n_drivers) pthread_cond_wait(&rt->cv_caller, &rt->mu);
    pthread_mutex_unlock(&rt->mu);
    return rt;
}

void dg_runtime_free(dg_runtime *rt) {
    if (!rt) return;
    pthread_mutex_lock(&rt->mu);
    rt->stop = 1;
    for (int s = 0; s < rt->n_drivers; s++) pthread_cond_broadcast(&rt->cv[s]);
    pthread_mutex_unlock(&rt->mu);
    for (int s = 0; s < rt->n_drivers; s++) DG_CHECK0(pthread_join(rt->drivers[s].thread, NULL));
    for (int s = 0; s < rt->n_drivers; s++) pthread_cond_destroy(&rt->cv[s]);
    for (int s = 0; s < DG_SCHED_LANES; s++) dg_stream_free(rt->streams[s]);
    if (rt->dev) dg_runtime_dev_free(rt); /* its buffers, then the device (its threads) */
    dg_device_free(rt->dev);
    pthread_cond_destroy(&rt->cv_caller);
    pthread_mutex_destroy(&rt->mu);
    dg_pool_free(rt->pool);
    dg_comm_free(rt->self);
    if (rt->persist)
        for (int t = 0; t < rt->bound_nt; t++) dg_free(rt->persist[t]);
    dg_free(rt->persist);
    dg_free(rt->ptr);
    dg_free(rt->arena);
    dg_topo_free(rt->topo);
    dg_free(rt);
}

int dg_runtime_threads(const dg_runtime *rt) { return rt->nthreads; }
const dg_team *dg_runtime_team(const dg_runtime *rt) { return dg_pool_team(rt->pool); }
dg_topo *dg_runtime_topo(dg_runtime *rt) { return rt->topo; }
void dg_runtime_set_trace(dg_runtime *rt, dg_trace *tr) { rt->trace = tr; }

int dg_runtime_bind(dg_runtime *rt, const dg_sched_plan *p, dg_err *err) {
    if (rt->dev) return dg_runtime_dev_bind(rt, p, 1, err);
    const dg_graph *g = p->g;
    int nt = g->n_tensors;
    if (rt->bound_graph != g || rt->bound_nt != nt) {
        if (rt->persist)
            for (int t = 0; t < rt->bound_nt; t++) dg_free(rt->persist[t]);
        dg_free(rt->persist);
        dg_free(rt->ptr);
        rt->persist = dg_calloc((size_t)DG_MAX(nt, 1), sizeof(void *));
        rt->ptr = dg_calloc((size_t)DG_MAX(nt, 1), sizeof(void *));
        rt->bound_graph = g;
        rt->bound_nt = nt;
    }
    size_t need = p->planned ? p->mem.arena_bytes : 0;
    if (need > rt->arena_bytes) {
        /* One allocation for all activations (jemalloc, 64-byte aligned). */
        dg_free(rt->arena);
        rt->arena = dg_aligned_alloc(need);
        rt->arena_bytes = need;
    }
    for (int t = 0; t < nt; t++) {
        if (p->planned && p->mem.offset[t] >= 0) {
            rt->ptr[t] = (char *)rt->arena + p->mem.offset[t];
            continue;
        }
        if (!rt->persist[t]) rt->persist[t] = dg_aligned_alloc(dg_tensor_bytes(&g->tensors[t]));
        rt->ptr[t] = rt->persist[t];
    }
    return DG_OK;
}

void *dg_runtime_ptr(const dg_runtime *rt, int t) {
    return rt->ptr && t >= 0 && t < rt->bound_nt ? rt->ptr[t] : NULL;
}

const char *dg_runtime_device(const dg_runtime *rt) { return rt->dev ? rt->dev->ops->name : NULL; }

/* ---- a step ---------------------------------------------------------------------------- */

typedef struct ival {
    double a, b;
} ival;

static int ival_cmp(const void *x, const void *y) {
    double a = ((const ival *)x)->a, b = ((const ival *)y)->a;
    return (a > b) - (a < b);
}

/* Time of the comm intervals not covered by any compute interval, summed
 * over the comm intervals. The compute intervals are disjoint (one task at
 * a time); comm intervals of different lanes may overlap each other. */
static double exposed(ival *comp, int nc, ival *comm, int nm) {
    qsort(comp, (size_t)nc, sizeof *comp, ival_cmp);
    qsort(comm, (size_t)nm, sizeof *comm, ival_cmp);
    double total = 0;
    int j = 0;
    for (int i = 0; i < nm; i++) {
        double a = comm[i].a, b = comm[i].b, covered = 0;
        while (j < nc && comp[j].b <= a) j++;
        for (int k = j; k < nc && comp[k].a < b; k++)
            covered += DG_MIN(b, comp[k].b) - DG_MAX(a, comp[k].a);
        total += (b - a) - covered;
    }
    return total;
}

void dg_sched_step_stats(const dg_sched_plan *p, const double *t0, const double *t1,
                         double sched_seconds, dg_sched_stats *st) {
    int nn = p->n_nodes;
    double lo = nn ? t0[0] : 0, hi = nn ? t1[0] : 0;
    ival *iv[DG_STREAM_COUNT];
    int ni[DG_STREAM_COUNT] = {0};
    for (int s = 0; s < DG_STREAM_COUNT; s++) iv[s] = dg_malloc(sizeof(ival) * (size_t)DG_MAX(nn, 1));
    st->n_tasks = nn;
    for (int v = 0; v < nn; v++) {
        int s = p->stream[v];
        lo = DG_MIN(lo, t0[v]);
        hi = DG_MAX(hi, t1[v]);
        st->busy[s] += t1[v] - t0[v];
        st->n_tasks_stream[s]++;
        iv[s][ni[s]++] = (ival){t0[v], t1[v]};
    }
    st->t_step = hi - lo;
    double tm = st->busy[DG_STREAM_COMM];
    st->exposed_comm = exposed(iv[DG_STREAM_COMPUTE], ni[DG_STREAM_COMPUTE], iv[DG_STREAM_COMM],
                               ni[DG_STREAM_COMM]);
    /* h: the comm time that ran under compute, over all comm. Not
     * (T_compute + T_comm - t_step) / T_comm: that counts the time neither
     * stream ran (a pipeline's bubble, a late peer) as exposed comm, and
     * went negative under PP. */
    st->hidden_frac = tm > 0 ? DG_MIN(DG_MAX(1.0 - st->exposed_comm / tm, 0.0), 1.0) : 0;
    for (int s = 0; s < DG_STREAM_COUNT; s++) dg_free(iv[s]);
    st->overhead_per_task = nn ? sched_seconds / nn : 0;
}

int dg_sched_run(dg_sched_plan *p, dg_runtime *rt, dg_sched_stats *stats, dg_err *err) {
    if (rt->dev) return dg_runtime_dev_run(p, rt, stats, err);
    double w0 = dg_now();
    /* Cheap when already bound (a pointer per tensor), and it re-points the
     * arena tensors if the caller alternates plans of one graph. */
    DG_TRY(dg_runtime_bind(rt, p, err));
    int nn = p->n_nodes;
    size_t sz = (size_t)DG_MAX(nn, 1);
    run_state rs;
    memset(&rs, 0, sizeof rs);
    rs.p = p;
    rs.remaining = dg_malloc(sizeof(int) * sz);
    memcpy(rs.remaining, p->npred, sizeof(int) * (size_t)nn);
    rs.t0 = dg_calloc(sz, sizeof(double));
    rs.t1 = dg_calloc(sz, sizeof(double));
    rs.heap[DG_STREAM_COMPUTE] =
        (dg_heap){dg_malloc(sizeof(int) * (size_t)DG_MAX(p->n_stream[DG_STREAM_COMPUTE], 1)), 0, p->rank};
    /* each comm stream's tasks: its lanes' merged in plan order */
    int ncomm = p->n_stream[DG_STREAM_COMM];
    rs.seq_buf = dg_malloc(sizeof(int) * (size_t)DG_MAX(ncomm, 1));
    for (int l = 1; l < DG_SCHED_LANES; l++) rs.len[rt->lane_stream[l]] += p->n_lane[l];
    for (int s = 1, at = 0; s < rt->n_streams; at += rs.len[s], s++) rs.seq[s] = rs.seq_buf + at;
    int fill[DG_SCHED_LANES] = {0};
    for (int k = 0; k < ncomm; k++) {
        int v = p->seq[DG_STREAM_COMM][k], s = rt->lane_stream[p->lane[v]];
        rs.seq[s][fill[s]++] = v;
    }

    pthread_mutex_lock(&rt->mu);
    DG_ASSERT(rt->run == NULL); /* one step at a time per runtime */
    for (int k = 0; k < nn; k++)
        if (rs.remaining[p->order[k]] == 0) make_ready(rt, &rs, p->order[k], -1);
    if (nn == 0) rs.finished = 1;
    rt->run = &rs;
    for (int s = 0; s < rt->n_streams; s++) kick(rt, s);
    while (!rs.finished) pthread_cond_wait(&rt->cv_caller, &rt->mu);
    rt->run = NULL;
    pthread_mutex_unlock(&rt->mu);

    int st = rs.status;
    if (st != DG_OK && err) *err = rs.err;
    /* Finish the step's sends. The comm thread is idle now, so this thread
     * may call the backend (MPI_THREAD_SERIALIZED is enough). */
    for (int a = 0; a < DG_AXIS_COUNT; a++) {
        dg_err fe = {{0}};
        int fs = dg_comm_flush(rt->groups[a], &fe);
        if (fs != DG_OK && st == DG_OK) {
            st = fs;
            if (err) *err = fe;
        }
    }
    dg_sched_stats local;
    memset(&local, 0, sizeof local);
    local.step = rt->step;
    if (st == DG_OK) {
        double sched = 0;
        for (int s = 0; s < rt->n_streams; s++) sched += rs.sched_time[s];
        dg_sched_step_stats(p, rs.t0, rs.t1, sched, &local);
        if (rt->trace)
            for (int v = 0; v < nn; v++)
                dg_trace_add(rt->trace, p->g, v, p->stream[v], rt->step, rs.t0[v], rs.t1[v]);
    }
    rt->step++;
    local.wall = dg_now() - w0;
    if (stats) *stats = local;
    dg_free(rs.remaining);
    dg_free(rs.t0);
    dg_free(rs.t1);
    dg_free(rs.heap[DG_STREAM_COMPUTE].a);
    dg_free(rs.seq_buf);
    return st;
}

void dg_sched_stats_print(const dg_sched_stats *s, FILE *f, const char *prefix) {
    if (!prefix) prefix = "";
    fprintf(f,
            "%sstep %d: %d tasks in %.3f ms | compute busy %.3f ms (%d tasks) | comm busy %.3f ms "
            "(%d tasks) | exposed comm %.3f ms | hidden comm h = %.3f (overlapped %.1f%%) | "
            "scheduler overhead %.3f us/task\n",
            prefix, s->step, s->n_tasks, 1e3 * s->t_step, 1e3 * s->busy[DG_STREAM_COMPUTE],
            s->n_tasks_stream[DG_STREAM_COMPUTE], 1e3 * s->busy[DG_STREAM_COMM],
            s->n_tasks_stream[DG_STREAM_COMM], 1e3 * s->exposed_comm, s->hidden_frac,
            100.0 * s->hidden_frac, 1e6 * s->overhead_per_task);
}
