/* dg_device_emu.c — the emulated device (see dg_device_emu.h).
 *
 * One mutex guards every queue and event count; each stream's worker sleeps
 * on its own condition variable, the host (sync) on another. Tasks are
 * small records in a growable ring per stream. A worker takes the task at
 * its queue's head, runs it unlocked (a copy, a kernel, a collective), then
 * under the lock pops it, bumps an event if it was a record and wakes
 * whoever waits. A wait task is never run unlocked: the worker sleeps until
 * its event's count reaches the target.
 */
#include "dg_device_emu.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dg_graph.h"
#include "dg_kernel_call.h"

/* Every stream the interface allows; idle workers sleep. */
#define NS DG_DEVICE_MAX_STREAMS

typedef enum task_kind { T_COPY, T_LAUNCH, T_RECORD, T_WAIT, T_HOST } task_kind;

typedef struct task {
    task_kind kind;
    int event;           /* T_RECORD, T_WAIT */
    int64_t target;      /* T_WAIT: the count to reach */
    void *dst;           /* T_COPY */
    const void *src;
    size_t bytes;
    const dg_graph *g;   /* T_LAUNCH */
    const dg_node *n;
    void (*fn)(void *);  /* T_HOST: fn(arg), its outcome in *status, *fn_err */
    void *arg;
    int *status;
    dg_err *fn_err;
    void *in[DG_MAX_INPUTS], *out[DG_MAX_OUTPUTS];
} task;

typedef struct queue {
    task *a;
    int cap, head, n; /* ring */
} queue;

struct emu;

typedef struct worker {
    struct emu *d;
    int s;
    pthread_t thread;
    pthread_cond_t cv;
    int busy;            /* running a task unlocked */
    uint64_t rng;        /* the delays' state */
    void *ws;            /* kernel workspace (sized by prepare) */
    size_t ws_bytes;
    dg_kernel_scratch f32; /* 16-bit tensors' f32 copies (dg_kernel_call.h) */
} worker;

typedef struct emu {
    dg_device_emu_opts o;
    pthread_mutex_t mu;
    pthread_cond_t cv_host;
    queue q[NS];
    worker w[NS];
    int stop;
    int64_t *enq, *done; /* per event: records enqueued / reached */
    int n_events;
    double *t0, *t1;     /* per node: its last launch */
    int n_nodes;
    atomic_int failed;   /* an error since the last sync (read unlocked by the workers) */
    int status;          /* the first one */
    dg_err err;
    dg_comm *groups[DG_AXIS_COUNT];
} emu;

static emu *emu_of(const dg_device *d) { return d->impl; }

/* ---- the workers ---------------------------------------------------------------------- */

static void delay(worker *w) {
    if (w->d->o.delay_us <= 0) return;
    long us = (long)(dg_splitmix64(&w->rng) % (uint64_t)(w->d->o.delay_us + 1));
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static int run_launch(worker *w, task *t, dg_err *err) {
    emu *d = w->d;
    const dg_node *n = t->n;
    if (n->op->comm != DG_COMM_NONE) {
        dg_comm *c = (unsigned)n->group < DG_AXIS_COUNT ? d->groups[n->group] : NULL;
        if (!c) c = d->groups[DG_AXIS_NONE];
        if (!c)
            return dg_err_set(err, DG_EINPUT, "node %d '%s': no comm group for the %s axis", n->id,
                              n->name, dg_axis_name(n->group));
        return dg_comm_run_node(c, t->g, n, t->in, t->out, err);
    }
    const dg_team *team = w->s == DG_STREAM_COMPUTE ? d->o.team : NULL;
    dg_exec_env env = {team, w->ws, w->ws_bytes, DG_BACKEND_CPU, NULL};
    int st = dg_kernel_call(&env, t->g, n, t->in, t->out, &w->f32);
    if (st != DG_OK)
        return dg_err_set(err, st, "node %d '%s' (op %s): kernel failed with status %d", n->id,
                          n->name, n->op->name, st);
    return DG_OK;
}

/* Run task t (not a wait) unlocked; a failure is kept as the device's first. */
static void run_task(worker *w, task *t) {
    emu *d = w->d;
    if (t->kind == T_RECORD) return;
    delay(w);
    if (atomic_load(&d->failed)) return; /* skip the rest of a failed step */
    dg_err e = {{0}};
    int st = DG_OK;
    if (t->kind == T_COPY) {
        memcpy(t->dst, t->src, t->bytes);
    } else if (t->kind == T_HOST) {
        t->fn(t->arg);
        st = *t->status;
        if (st != DG_OK) e = *t->fn_err;
    } else {
        double a = dg_now();
        st = run_launch(w, t, &e);
        double b = dg_now();
        d->t0[t->n->id] = a, d->t1[t->n->id] = b;
    }
    if (st != DG_OK) {
        pthread_mutex_lock(&d->mu);
        if (!atomic_load(&d->failed)) d->status = st, d->err = e, atomic_store(&d->failed, 1);
        pthread_mutex_unlock(&d->mu);
    }
}

static void *worker_main(void *arg) {
    worker *w = arg;
    emu *d = w->d;
    queue *q = &d->q[w->s];
    pthread_mutex_lock(&d->mu);
    for (;;) {
        while (!d->stop && q->n == 0) pthread_cond_wait(&w->cv, &d->mu);
        if (d->stop) break;
        task *t = &q->a[q->head];
        if (t->kind == T_WAIT) {
            if (d->done[t->event] < t->target) {
                pthread_cond_wait(&w->cv, &d->mu);
                continue;
            }
        } else {
            w->busy = 1;
            task local = *t; /* the ring may grow while we run */
            pthread_mutex_unlock(&d->mu);
            run_task(w, &local);
            pthread_mutex_lock(&d->mu);
            w->busy = 0;
            if (local.kind == T_RECORD) {
                d->done[local.event]++;
                for (int s = 0; s < NS; s++)
                    if (s != w->s) pthread_cond_signal(&d->w[s].cv);
            }
        }
        q->head = (q->head + 1) % q->cap;
        q->n--;
        if (q->n == 0) pthread_cond_broadcast(&d->cv_host);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

/* Append t to stream s's queue and wake its worker (under the lock). */
static int enqueue(dg_device *dev, int s, const task *t, dg_err *err) {
    emu *d = emu_of(dev);
    if (s < 0 || s >= NS) return dg_err_set(err, DG_EINPUT, "emulated device: no stream %d", s);
    pthread_mutex_lock(&d->mu);
    queue *q = &d->q[s];
    if (q->n == q->cap) {
        int cap = q->cap ? 2 * q->cap : 256;
        task *a = dg_malloc(sizeof *a * (size_t)cap);
        for (int i = 0; i < q->n; i++) a[i] = q->a[(q->head + i) % q->cap];
        dg_free(q->a);
        q->a = a, q->cap = cap, q->head = 0;
    }
    task *slot = &q->a[(q->head + q->n) % q->cap];
    *slot = *t;
    if (t->kind == T_WAIT) slot->target = d->enq[t->event];
    if (t->kind == T_RECORD) d->enq[t->event]++;
    q->n++;
    pthread_cond_signal(&d->w[s].cv);
    pthread_mutex_unlock(&d->mu);
    return DG_OK;
}

/* ---- the interface -------------------------------------------------------------------- */

static int emu_alloc(dg_device *dev, size_t bytes, void **ptr, dg_err *err) {
    (void)dev;
    size_t rounded = (bytes + DG_DEVICE_ALIGN - 1) & ~(size_t)(DG_DEVICE_ALIGN - 1);
    if (!rounded) rounded = DG_DEVICE_ALIGN;
    if (posix_memalign(ptr, DG_DEVICE_ALIGN, rounded) != 0 || !*ptr)
        return dg_err_set(err, DG_EINPUT, "emulated device: out of memory allocating %zu bytes", bytes);
    memset(*ptr, 0, rounded);
    return DG_OK;
}

static void emu_release(dg_device *dev, void *ptr) {
    (void)dev;
    free(ptr);
}

static int emu_prepare(dg_device *dev, const dg_graph *g, dg_err *err) {
    (void)err;
    emu *d = emu_of(dev);
    pthread_mutex_lock(&d->mu);
    int ne = g->n_nodes + DG_DEVICE_EXTRA_EVENTS;
    if (ne > d->n_events) {
        d->enq = dg_realloc(d->enq, sizeof(int64_t) * (size_t)ne);
        d->done = dg_realloc(d->done, sizeof(int64_t) * (size_t)ne);
        for (int e = d->n_events; e < ne; e++) d->enq[e] = d->done[e] = 0;
        d->n_events = ne;
    }
    if (g->n_nodes > d->n_nodes) {
        d->t0 = dg_realloc(d->t0, sizeof(double) * (size_t)g->n_nodes);
        d->t1 = dg_realloc(d->t1, sizeof(double) * (size_t)g->n_nodes);
        d->n_nodes = g->n_nodes;
    }
    memset(d->t0, 0, sizeof(double) * (size_t)d->n_nodes);
    memset(d->t1, 0, sizeof(double) * (size_t)d->n_nodes);
    for (int s = 0; s < NS; s++) {
        worker *w = &d->w[s];
        int nth = s == DG_STREAM_COMPUTE && d->o.team ? d->o.team->nthreads : 1;
        size_t need = 0;
        for (int v = 0; v < g->n_nodes; v++) {
            const dg_node *n = &g->nodes[v];
            if (n->op && n->op->workspace) need = DG_MAX(need, n->op->workspace(g, n, nth));
        }
        if (need > w->ws_bytes) {
            dg_free(w->ws);
            w->ws = dg_aligned_alloc(need);
            w->ws_bytes = need;
        }
    }
    pthread_mutex_unlock(&d->mu);
    return DG_OK;
}

/* Whether name is one of the list's names (separated by commas or spaces). */
static int listed(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        size_t len = strcspn(p, ", ");
        if (len == n && !strncmp(p, name, n)) return 1;
        p += len;
        p += strspn(p, ", ");
    }
    return 0;
}

static int emu_has_kernel(const dg_device *dev, const dg_op_def *op) {
    if (op->comm != DG_COMM_NONE) return 1;
    return op->kernel != NULL && !listed(emu_of(dev)->o.missing_ops, op->name);
}

static int emu_copy(dg_device *dev, int s, void *dst, const void *src, size_t bytes, dg_copy_dir dir,
                    dg_err *err) {
    (void)dir;
    task t = {.kind = T_COPY, .dst = dst, .src = src, .bytes = bytes};
    return enqueue(dev, s, &t, err);
}

static int emu_launch(dg_device *dev, int s, const dg_graph *g, const dg_node *n, void *const *in,
                      void *const *out, dg_err *err) {
    if (!n->op || !emu_has_kernel(dev, n->op) || n->id >= emu_of(dev)->n_nodes)
        return dg_err_set(err, DG_EINPUT, "emulated device: node %d '%s' has no kernel (or prepare was not called)",
                          n->id, n->name);
    task t = {.kind = T_LAUNCH, .g = g, .n = n};
    for (int i = 0; i < n->n_in; i++) t.in[i] = in[i];
    for (int j = 0; j < n->n_out; j++) t.out[j] = out[j];
    return enqueue(dev, s, &t, err);
}

static int emu_host_call(dg_device *dev, int s, void (*fn)(void *), void *arg, int *status, dg_err *fn_err,
                         dg_err *err) {
    task t = {.kind = T_HOST, .fn = fn, .arg = arg, .status = status, .fn_err = fn_err};
    return enqueue(dev, s, &t, err);
}

static int check_event(const dg_device *dev, int e, dg_err *err) {
    if (e < 0 || e >= emu_of(dev)->n_events)
        return dg_err_set(err, DG_EINPUT, "emulated device: no event %d (prepare sizes them)", e);
    return DG_OK;
}

static int emu_record(dg_device *dev, int s, int e, dg_err *err) {
    DG_TRY(check_event(dev, e, err));
    task t = {.kind = T_RECORD, .event = e};
    return enqueue(dev, s, &t, err);
}

static int emu_wait(dg_device *dev, int s, int e, dg_err *err) {
    DG_TRY(check_event(dev, e, err));
    task t = {.kind = T_WAIT, .event = e};
    return enqueue(dev, s, &t, err);
}

static int emu_sync(dg_device *dev, dg_err *err) {
    emu *d = emu_of(dev);
    pthread_mutex_lock(&d->mu);
    for (;;) {
        int idle = 1;
        for (int s = 0; s < NS; s++) idle &= d->q[s].n == 0;
        if (idle) break;
        pthread_cond_wait(&d->cv_host, &d->mu);
    }
    int st = atomic_load(&d->failed) ? d->status : DG_OK;
    if (st != DG_OK && err) *err = d->err;
    atomic_store(&d->failed, 0);
    d->status = DG_OK;
    pthread_mutex_unlock(&d->mu);
    /* The workers are idle: finish the step's sends from this thread (one
     * thread in MPI at a time, as with the CPU runtime). */
    for (int a = 0; a < DG_AXIS_COUNT; a++) {
        if (!d->groups[a]) continue;
        dg_err fe = {{0}};
        int fs = dg_comm_flush(d->groups[a], &fe);
        if (fs != DG_OK && st == DG_OK) {
            st = fs;
            if (err) *err = fe;
        }
    }
    return st;
}

static int emu_node_time(const dg_device *dev, int v, double *t0, double *t1) {
    const emu *d = emu_of(dev);
    if (v < 0 || v >= d->n_nodes || d->t1[v] == 0) return 0;
    *t0 = d->t0[v], *t1 = d->t1[v];
    return 1;
}

static void emu_set_groups(dg_device *dev, dg_comm *const *groups) {
    emu *d = emu_of(dev);
    for (int a = 0; a < DG_AXIS_COUNT; a++) d->groups[a] = groups[a] ? groups[a] : groups[DG_AXIS_NONE];
}

static void emu_free(dg_device *dev) {
    emu *d = emu_of(dev);
    pthread_mutex_lock(&d->mu);
    d->stop = 1;
    for (int s = 0; s < NS; s++) pthread_cond_signal(&d->w[s].cv);
    pthread_mutex_unlock(&d->mu);
    for (int s = 0; s < NS; s++) {
        DG_CHECK0(pthread_join(d->w[s].thread, NULL));
        pthread_cond_destroy(&d->w[s].cv);
        dg_free(d->w[s].ws);
        dg_kernel_scratch_free(&d->w[s].f32);
        dg_free(d->q[s].a);
    }
    pthread_cond_destroy(&d->cv_host);
    pthread_mutex_destroy(&d->mu);
    dg_free(d->enq);
    dg_free(d->done);
    dg_free(d->t0);
    dg_free(d->t1);
    dg_free(d);
    dg_free(dev);
}

static const dg_device_ops emu_ops = {
    .name = "emulated",
    .alloc = emu_alloc,
    .release = emu_release,
    .host_alloc = emu_alloc,
    .host_release = emu_release,
    .prepare = emu_prepare,
    .has_kernel = emu_has_kernel,
    .copy = emu_copy,
    .launch = emu_launch,
    .record = emu_record,
    .wait = emu_wait,
    .host_call = emu_host_call,
    .sync = emu_sync,
    .node_time = emu_node_time,
    .set_groups = emu_set_groups,
    .free = emu_free,
};

dg_device *dg_device_emu_new(const dg_device_emu_opts *o, dg_err *err) {
    if (o && o->delay_us < 0) {
        dg_err_set(err, DG_EINPUT, "emulated device: delay %d us is negative", o->delay_us);
        return NULL;
    }
    emu *d = dg_calloc(1, sizeof *d);
    atomic_init(&d->failed, 0);
    if (o) d->o = *o;
    DG_CHECK0(pthread_mutex_init(&d->mu, NULL));
    DG_CHECK0(pthread_cond_init(&d->cv_host, NULL));
    dg_device *dev = dg_calloc(1, sizeof *dev);
    dev->ops = &emu_ops;
    dev->n_streams = NS;
    dev->impl = d;
    for (int s = 0; s < NS; s++) {
        worker *w = &d->w[s];
        w->d = d;
        w->s = s;
        w->rng = d->o.seed * 0x9E3779B97F4A7C15ull + (uint64_t)s + 1;
        DG_CHECK0(pthread_cond_init(&w->cv, NULL));
        DG_CHECK0(pthread_create(&w->thread, NULL, worker_main, w));
    }
    return dev;
}
