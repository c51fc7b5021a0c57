/* dg_stream.c — the CPU compute and comm streams (see dg_stream.h). */
#include "dg_stream.h"

#include <string.h>

#include "dg_kernel_call.h"

typedef struct compute_impl {
    const dg_team *team;
    void *ws; /* grows to the largest workspace asked for; only the driver touches it */
    size_t ws_bytes;
    dg_kernel_scratch cv; /* 16-bit tensors' f32 copies (dg_kernel_call.h) */
} compute_impl;

/* Run node n's CPU kernel on team c->team with c's workspace. */
static int run_kernel(compute_impl *c, const dg_graph *g, const dg_node *n, void *const *in,
                      void *const *out, dg_err *err) {
    dg_kernel_fn fn = n->op ? n->op->kernel : NULL;
    if (!fn)
        return dg_err_set(err, DG_EINPUT, "node %d '%s' (op %s): no CPU kernel", n->id, n->name,
                          n->op ? n->op->name : "?");
    size_t need = n->op->workspace ? n->op->workspace(g, n, c->team ? c->team->nthreads : 1) : 0;
    if (need > c->ws_bytes) {
        dg_free(c->ws);
        c->ws = dg_aligned_alloc(need);
        c->ws_bytes = need;
    }
    dg_exec_env env = {c->team, c->ws, c->ws_bytes, DG_BACKEND_CPU, NULL};
    int st = dg_kernel_call(&env, g, n, in, out, &c->cv);
    if (st != DG_OK)
        return dg_err_set(err, st, "node %d '%s' (op %s): kernel failed with status %d", n->id,
                          n->name, n->op->name, st);
    return DG_OK;
}

static int compute_exec(dg_stream *s, const dg_graph *g, const dg_node *n, void *const *in,
                        void *const *out, dg_err *err) {
    return run_kernel(s->impl, g, n, in, out, err);
}

static void compute_free(dg_stream *s) {
    compute_impl *c = s->impl;
    dg_free(c->ws);
    dg_kernel_scratch_free(&c->cv);
    dg_free(c);
    dg_free(s);
}

static const dg_stream_ops compute_ops = {
    .name = "cpu-compute", .exec = compute_exec, .free = compute_free};

dg_stream *dg_stream_cpu_compute_new(const dg_team *team) {
    dg_stream *s = dg_calloc(1, sizeof *s);
    compute_impl *c = dg_calloc(1, sizeof *c);
    c->team = team;
    s->ops = &compute_ops;
    s->cls = DG_STREAM_COMPUTE;
    s->in_order = false;
    s->impl = c;
    return s;
}

typedef struct comm_impl {
    dg_comm *groups[DG_AXIS_COUNT];
    compute_impl local; /* for compute ops a pass put on the comm stream: no team */
} comm_impl;

static int comm_exec(dg_stream *s, const dg_graph *g, const dg_node *n, void *const *in,
                     void *const *out, dg_err *err) {
    comm_impl *c = s->impl;
    /* A compute op a pass placed on the comm stream (e.g. packing a buffer
     * right before its send) runs here, on this thread alone. */
    if (!n->op || n->op->comm == DG_COMM_NONE) return run_kernel(&c->local, g, n, in, out, err);
    dg_comm *comm = (unsigned)n->group < DG_AXIS_COUNT ? c->groups[n->group] : NULL;
    if (!comm) comm = c->groups[DG_AXIS_NONE];
    if (!comm)
        return dg_err_set(err, DG_EINPUT, "node %d '%s': no comm backend for the %s group", n->id,
                          n->name, dg_axis_name(n->group));
    return dg_comm_run_node(comm, g, n, in, out, err);
}

static void comm_free(dg_stream *s) {
    dg_free(((comm_impl *)s->impl)->local.ws);
    dg_kernel_scratch_free(&((comm_impl *)s->impl)->local.cv);
    dg_free(s->impl);
    dg_free(s);
}

static const dg_stream_ops comm_ops = {.name = "cpu-comm", .exec = comm_exec, .free = comm_free};

dg_stream *dg_stream_cpu_comm_new(dg_comm *const *groups) {
    dg_stream *s = dg_calloc(1, sizeof *s);
    comm_impl *c = dg_calloc(1, sizeof *c);
    for (int a = 0; a < DG_AXIS_COUNT; a++) c->groups[a] = groups ? groups[a] : NULL;
    s->ops = &comm_ops;
    s->cls = DG_STREAM_COMM;
    s->in_order = true;
    s->impl = c;
    return s;
}

void dg_stream_free(dg_stream *s) {
    if (s) s->ops->free(s);
}
