/* dg_runtime_device.c — the runtime on a device (dg_sched.h, "On a device").
 *
 * Memory, per bound graph and plan:
 *   - the arena: the plan's activations, one device allocation at the
 *     memory plan's offsets (only regrown when a plan needs more);
 *   - the persistent block: every tensor the plan does not place
 *     (parameters, gradients, optimizer state, inputs, leaf activations),
 *     one device allocation, each tensor at a DG_DEVICE_ALIGN offset; kept
 *     for as long as the graph is bound, so parameters survive a rebind;
 *   - the host view: one pinned block with a slot for each persistent
 *     tensor (same offsets), and one for the activations that come down
 *     after a step (kept or unread).
 * A step copies the inputs' host view up, runs on the device
 * (dg_device_exec.h) and copies the logged activations down; nothing else
 * crosses. Every node's op must have a kernel on the device: a graph with
 * a host-only op is refused at bind, naming the op, unless the runtime was
 * made with host_fallback (then that node runs its CPU kernel on pinned
 * staging copies of its buffers, in its stream's order).
 */
#include <string.h>

#include "dg_device_exec.h"
#include "dg_kernel_call.h"
#include "dg_runtime_internal.h"

typedef struct dg_runtime_dev {
    const dg_sched_plan *plan;   /* bound plan */
    dg_device_step step;
    void *arena;                 /* device */
    size_t arena_bytes;
    void *persist, *host_persist; /* device / pinned host */
    size_t persist_bytes;
    int64_t *poff;               /* per tensor: offset in the persistent block, -1 if planned */
    void *host_down;             /* pinned host: the activations that come down */
    size_t host_down_bytes;
    void **dptr;                 /* per tensor: device memory */
    dg_device_xfer *up, *down;
    int n_up, n_down;
    size_t bytes_up, bytes_down;
    double *t0, *t1;             /* per node: the last step's times */
    dg_device_fallback **fb;     /* per node: its host run, NULL on the device */
    int plan_nodes;              /* fb's length */
    void *fb_host;               /* pinned: the fallback nodes' staging */
    int n_fb;
} dg_runtime_dev;

/* What a fallback node's host call needs. */
typedef struct fb_arg {
    const dg_graph *g;
    const dg_node *n;
    void *in[DG_MAX_INPUTS], *out[DG_MAX_OUTPUTS];
    void *ws;
    size_t ws_bytes;
    dg_kernel_scratch f32; /* 16-bit tensors' f32 copies (dg_kernel_call.h) */
    int status;
    dg_err err;
} fb_arg;

/* A fallback node's CPU kernel on its staging (one thread: a host call
 * must not wait on anything the device does). */
static void fb_run(void *p) {
    fb_arg *a = p;
    dg_exec_env env = {NULL, a->ws, a->ws_bytes, DG_BACKEND_CPU, NULL};
    a->status = dg_kernel_call(&env, a->g, a->n, a->in, a->out, &a->f32);
    if (a->status != DG_OK)
        dg_err_set(&a->err, a->status, "node %d '%s' (op %s, on the host): kernel failed with status %d",
                   a->n->id, a->n->name, a->n->op->name, a->status);
}

static void free_fallback(dg_runtime *rt) {
    dg_runtime_dev *dv = rt->dv;
    if (!dv->fb) return;
    for (int v = 0; v < dv->plan_nodes; v++)
        if (dv->fb[v]) {
            fb_arg *a = dv->fb[v]->arg;
            dg_free(a->ws);
            dg_kernel_scratch_free(&a->f32);
            dg_free(a);
            dg_free(dv->fb[v]);
        }
    dg_free(dv->fb);
    dv->fb = NULL;
    if (dv->fb_host) rt->dev->ops->host_release(rt->dev, dv->fb_host);
    dv->fb_host = NULL;
    dv->n_fb = 0;
}

static size_t align_up(size_t n) {
    return (n + DG_DEVICE_ALIGN - 1) & ~(size_t)(DG_DEVICE_ALIGN - 1);
}

static void release_graph(dg_runtime *rt) {
    dg_runtime_dev *dv = rt->dv;
    dg_device *d = rt->dev;
    if (!dv) return;
    free_fallback(rt);
    if (dv->arena) d->ops->release(d, dv->arena);
    if (dv->persist) d->ops->release(d, dv->persist);
    if (dv->host_persist) d->ops->host_release(d, dv->host_persist);
    if (dv->host_down) d->ops->host_release(d, dv->host_down);
    dg_device_step_free(&dv->step);
    dg_free(dv->poff);
    dg_free(dv->dptr);
    dg_free(dv->up);
    dg_free(dv->down);
    dg_free(dv->t0);
    dg_free(dv->t1);
    dg_free(dv);
    rt->dv = NULL;
}

void dg_runtime_dev_free(dg_runtime *rt) { release_graph(rt); }

static int is_planned(const dg_sched_plan *p, int t) { return p->planned && p->mem.offset[t] >= 0; }

/* The persistent block of a newly bound graph: offsets, both allocations. */
static int bind_graph(dg_runtime *rt, const dg_graph *g, const dg_sched_plan *p, dg_err *err) {
    release_graph(rt);
    dg_runtime_dev *dv = rt->dv = dg_calloc(1, sizeof *dv);
    size_t nt = (size_t)DG_MAX(g->n_tensors, 1);
    dv->poff = dg_malloc(sizeof(int64_t) * nt);
    dv->dptr = dg_calloc(nt, sizeof(void *));
    size_t off = 0;
    for (int t = 0; t < g->n_tensors; t++) {
        dv->poff[t] = is_planned(p, t) ? -1 : (int64_t)off;
        if (dv->poff[t] >= 0) off += align_up(dg_tensor_bytes(&g->tensors[t]));
    }
    dv->persist_bytes = off;
    dg_device *d = rt->dev;
    DG_TRY(d->ops->alloc(d, DG_MAX(off, 1), &dv->persist, err));
    DG_TRY(d->ops->host_alloc(d, DG_MAX(off, 1), &dv->host_persist, err));
    rt->ptr = dg_realloc(rt->ptr, sizeof(void *) * nt);
    rt->bound_graph = g;
    rt->bound_nt = g->n_tensors;
    return DG_OK;
}

/* Whether activation t comes down after a step: kept, or written and
 * unread (flags: bit 0 kept, bit 1 read by a node). */
static int comes_down(const dg_sched_plan *p, const uint8_t *flags, int t) {
    const dg_tensor *x = &p->g->tensors[t];
    return x->role == DG_ROLE_ACTIVATION && x->producer >= 0 && ((flags[t] & 1) || !(flags[t] & 2));
}

/* The copies of a step, and the host view of the plan's activations. */
static int bind_transfers(dg_runtime *rt, const dg_sched_plan *p, dg_err *err) {
    dg_runtime_dev *dv = rt->dv;
    dg_device *d = rt->dev;
    const dg_graph *g = p->g;
    int nt = g->n_tensors;
    uint8_t *kept = dg_calloc((size_t)DG_MAX(nt, 1), 1);
    for (int i = 0; i < p->n_keep; i++)
        if (p->keep[i] >= 0 && p->keep[i] < nt) kept[p->keep[i]] |= 1;
    for (int v = 0; v < g->n_nodes; v++)
        for (int i = 0; i < g->nodes[v].n_in; i++)
            if (g->nodes[v].in[i] >= 0) kept[g->nodes[v].in[i]] |= 2;
    size_t down_bytes = 0;
    for (int t = 0; t < nt; t++)
        if (is_planned(p, t) && comes_down(p, kept, t)) down_bytes += align_up(dg_tensor_bytes(&g->tensors[t]));
    if (down_bytes > dv->host_down_bytes) {
        if (dv->host_down) d->ops->host_release(d, dv->host_down);
        dv->host_down = NULL;
        int st = d->ops->host_alloc(d, down_bytes, &dv->host_down, err);
        if (st != DG_OK) {
            dg_free(kept);
            return st;
        }
        dv->host_down_bytes = down_bytes;
    }
    dg_free(dv->up);
    dg_free(dv->down);
    dv->up = dg_malloc(sizeof *dv->up * (size_t)DG_MAX(nt, 1));
    dv->down = dg_malloc(sizeof *dv->down * (size_t)DG_MAX(nt, 1));
    dv->n_up = dv->n_down = 0;
    dv->bytes_up = dv->bytes_down = 0;
    size_t hoff = 0;
    for (int t = 0; t < nt; t++) {
        size_t bytes = dg_tensor_bytes(&g->tensors[t]);
        rt->ptr[t] = NULL;
        if (dv->poff[t] >= 0) {
            rt->ptr[t] = (char *)dv->host_persist + dv->poff[t];
            dv->dptr[t] = (char *)dv->persist + dv->poff[t];
        } else {
            dv->dptr[t] = (char *)dv->arena + p->mem.offset[t];
            if (comes_down(p, kept, t)) {
                rt->ptr[t] = (char *)dv->host_down + hoff;
                hoff += align_up(bytes);
            }
        }
        dg_device_xfer x = {rt->ptr[t], dv->dptr[t], bytes};
        if (g->tensors[t].role == DG_ROLE_INPUT) dv->up[dv->n_up++] = x, dv->bytes_up += bytes;
        else if (comes_down(p, kept, t)) dv->down[dv->n_down++] = x, dv->bytes_down += bytes;
    }
    dg_free(kept);
    return DG_OK;
}

/* Every node's op has a kernel on this device, or the graph is refused
 * (without host fallback). */
static int check_kernels(const dg_runtime *rt, const dg_graph *g, dg_err *err) {
    for (int v = 0; v < g->n_nodes; v++) {
        const dg_node *n = &g->nodes[v];
        if (!n->op)
            return dg_err_set(err, DG_EINTERNAL, "node %d '%s': no op", v, n->name);
        if (!rt->dev->ops->has_kernel(rt->dev, n->op) && !(rt->host_fallback && n->op->kernel))
            return dg_err_set(err, DG_EINPUT,
                              "node %d '%s': op '%s' has no kernel on the %s device (it would run on the host: "
                              "--device-host-fallback allows that, for debugging)",
                              v, n->name, n->op->name, rt->dev->ops->name);
    }
    return DG_OK;
}

/* Host fallback: a record and pinned staging for each node whose op the
 * device lacks. */
static int bind_fallback(dg_runtime *rt, const dg_sched_plan *p, dg_err *err) {
    dg_runtime_dev *dv = rt->dv;
    const dg_graph *g = p->g;
    free_fallback(rt);
    if (!rt->host_fallback) return DG_OK;
    size_t bytes = 0;
    for (int v = 0; v < g->n_nodes; v++) {
        const dg_node *n = &g->nodes[v];
        if (rt->dev->ops->has_kernel(rt->dev, n->op)) continue;
        for (int i = 0; i < n->n_in; i++)
            if (n->in[i] >= 0) bytes += align_up(dg_tensor_bytes(&g->tensors[n->in[i]]));
        for (int j = 0; j < n->n_out; j++)
            if (n->out[j] >= 0) bytes += align_up(dg_tensor_bytes(&g->tensors[n->out[j]]));
        dv->n_fb++;
    }
    dv->plan_nodes = g->n_nodes;
    dv->fb = dg_calloc((size_t)DG_MAX(g->n_nodes, 1), sizeof *dv->fb);
    if (!dv->n_fb) return DG_OK;
    DG_TRY(rt->dev->ops->host_alloc(rt->dev, bytes, &dv->fb_host, err));
    char *h = dv->fb_host;
    for (int v = 0; v < g->n_nodes; v++) {
        const dg_node *n = &g->nodes[v];
        if (rt->dev->ops->has_kernel(rt->dev, n->op)) continue;
        dg_device_fallback *f = dv->fb[v] = dg_calloc(1, sizeof *f);
        fb_arg *a = dg_calloc(1, sizeof *a);
        a->g = g, a->n = n;
        a->ws_bytes = n->op->workspace ? n->op->workspace(g, n, 1) : 0;
        a->ws = a->ws_bytes ? dg_aligned_alloc(a->ws_bytes) : NULL;
        for (int i = 0; i < n->n_in; i++) {
            if (n->in[i] < 0) continue;
            size_t b = dg_tensor_bytes(&g->tensors[n->in[i]]);
            a->in[i] = h;
            f->in[f->n_in++] = (dg_device_xfer){h, dv->dptr[n->in[i]], b};
            h += align_up(b);
        }
        for (int j = 0; j < n->n_out; j++) {
            if (n->out[j] < 0) continue;
            size_t b = dg_tensor_bytes(&g->tensors[n->out[j]]);
            a->out[j] = h;
            f->out[f->n_out++] = (dg_device_xfer){h, dv->dptr[n->out[j]], b};
            h += align_up(b);
        }
        f->run = fb_run, f->arg = a, f->status = &a->status, f->err = &a->err;
    }
    return DG_OK;
}

int dg_runtime_dev_bind(dg_runtime *rt, const dg_sched_plan *p, int force, dg_err *err) {
    const dg_graph *g = p->g;
    /* Bound already: every step asks (force 0). A plan freed and another
     * made at the same address for the same graph would pass as bound, so
     * dg_runtime_bind, which callers that swap plans call, forces it. */
    if (!force && rt->dv && rt->dv->plan == p && rt->bound_graph == g) return DG_OK;
    DG_TRY(check_kernels(rt, g, err));
    if (!rt->dv || rt->bound_graph != g || rt->bound_nt != g->n_tensors) DG_TRY(bind_graph(rt, g, p, err));
    dg_runtime_dev *dv = rt->dv;
    dg_device *d = rt->dev;
    size_t need = p->planned ? p->mem.arena_bytes : 0;
    if (need > dv->arena_bytes || !dv->arena) {
        if (dv->arena) d->ops->release(d, dv->arena);
        dv->arena = NULL;
        DG_TRY(d->ops->alloc(d, DG_MAX(need, 1), &dv->arena, err));
        dv->arena_bytes = need;
    }
    DG_TRY(bind_transfers(rt, p, err));
    DG_TRY(bind_fallback(rt, p, err));
    DG_TRY(d->ops->prepare(d, g, err));
    dg_device_step_free(&dv->step);
    dg_device_step_init(&dv->step, p, rt->groups, d->n_streams);
    dg_free(dv->t0);
    dg_free(dv->t1);
    dv->t0 = dg_calloc((size_t)DG_MAX(p->n_nodes, 1), sizeof(double));
    dv->t1 = dg_calloc((size_t)DG_MAX(p->n_nodes, 1), sizeof(double));
    dv->plan = p;
    return DG_OK;
}

int dg_runtime_dev_run(dg_sched_plan *p, dg_runtime *rt, dg_sched_stats *stats, dg_err *err) {
    double w0 = dg_now();
    DG_TRY(dg_runtime_dev_bind(rt, p, 0, err));
    dg_runtime_dev *dv = rt->dv;
    double e0 = dg_now();
    int st = dg_device_run_step(rt->dev, &dv->step, dv->dptr, dv->up, dv->n_up, dv->down, dv->n_down, dv->fb,
                                err);
    double e1 = dg_now();
    dg_sched_stats local;
    memset(&local, 0, sizeof local);
    local.step = rt->step;
    if (st == DG_OK) {
        for (int v = 0; v < p->n_nodes; v++)
            if (!rt->dev->ops->node_time(rt->dev, v, &dv->t0[v], &dv->t1[v])) dv->t0[v] = dv->t1[v] = e0;
        /* the scheduler's own time: enqueueing, less the wait for the device */
        dg_sched_step_stats(p, dv->t0, dv->t1, 0, &local);
        local.overhead_per_task = p->n_nodes ? DG_MAX(0.0, (e1 - e0) - local.t_step) / p->n_nodes : 0;
        local.bytes_up = dv->bytes_up;
        local.bytes_down = dv->bytes_down;
        local.n_host_nodes = dv->n_fb;
        if (rt->trace)
            for (int v = 0; v < p->n_nodes; v++)
                dg_trace_add(rt->trace, p->g, v, p->stream[v], rt->step, dv->t0[v], dv->t1[v]);
    }
    rt->step++;
    local.wall = dg_now() - w0;
    if (stats) *stats = local;
    return st;
}

/* ---- moving state between steps ------------------------------------------------------ */

static int move_state(dg_runtime *rt, unsigned roles, dg_copy_dir dir, dg_err *err) {
    dg_runtime_dev *dv = rt->dv;
    if (!rt->dev || !dv) return DG_OK; /* the CPU runtime, or nothing bound yet */
    const dg_graph *g = rt->bound_graph;
    int st = DG_OK;
    for (int t = 0; t < g->n_tensors && st == DG_OK; t++) {
        if (dv->poff[t] < 0 || !(roles & (1u << g->tensors[t].role))) continue;
        void *h = (char *)dv->host_persist + dv->poff[t], *dev = (char *)dv->persist + dv->poff[t];
        size_t n = dg_tensor_bytes(&g->tensors[t]);
        st = dir == DG_COPY_UP ? rt->dev->ops->copy(rt->dev, DG_STREAM_COMPUTE, dev, h, n, dir, err)
                               : rt->dev->ops->copy(rt->dev, DG_STREAM_COMPUTE, h, dev, n, dir, err);
    }
    dg_err se = {{0}};
    int ss = rt->dev->ops->sync(rt->dev, &se);
    if (st == DG_OK && ss != DG_OK) {
        st = ss;
        if (err) *err = se;
    }
    return st;
}

int dg_runtime_upload(dg_runtime *rt, unsigned roles, dg_err *err) {
    return move_state(rt, roles, DG_COPY_UP, err);
}

int dg_runtime_download(dg_runtime *rt, unsigned roles, dg_err *err) {
    return move_state(rt, roles, DG_COPY_DOWN, err);
}
