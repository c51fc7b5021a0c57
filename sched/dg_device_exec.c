/* dg_device_exec.c — a plan's step on a device (see dg_device_exec.h). */
#include "dg_device_exec.h"

#include <string.h>

void dg_device_free(dg_device *d) {
    if (d) d->ops->free(d);
}

/* Each node's device stream (dg_device_exec.h, "Device streams"). */
static void assign_streams(dg_device_step *ds, const dg_sched_plan *p, dg_comm *const *groups,
                           int max_streams) {
    const dg_graph *g = p->g;
    const dg_comm *seen[DG_DEVICE_MAX_STREAMS];
    int n_seen = 0;
    ds->n_streams = 1;
    for (int k = 0; k < p->n_nodes; k++) { /* collectives: one stream per group, in plan order */
        int v = p->order[k];
        const dg_node *n = &g->nodes[v];
        ds->stream[v] = -1;
        if (p->stream[v] == DG_STREAM_COMPUTE) {
            ds->stream[v] = DG_STREAM_COMPUTE;
            continue;
        }
        if (n->op->comm == DG_COMM_NONE) continue; /* below */
        const dg_comm *c = (unsigned)n->group < DG_AXIS_COUNT && groups ? groups[n->group] : NULL;
        if (!c && groups) c = groups[DG_AXIS_NONE];
        int i = 0;
        while (i < n_seen && seen[i] != c) i++;
        if (i == n_seen && n_seen < max_streams - 1) seen[n_seen++] = c;
        ds->stream[v] = 1 + DG_MIN(i, max_streams - 2);
        ds->n_streams = DG_MAX(ds->n_streams, ds->stream[v] + 1);
    }
    /* compute ops on the comm stream: the stream of the first collective
     * they feed, else of the collective that feeds them, else stream 1 */
    for (int k = p->n_nodes - 1; k >= 0; k--) {
        int v = p->order[k];
        if (ds->stream[v] >= 0) continue;
        for (int e = p->succ_off[v]; e < p->succ_off[v + 1] && ds->stream[v] < 0; e++) {
            int w = p->succ[e];
            if (p->stream[w] != DG_STREAM_COMPUTE && ds->stream[w] > 0) ds->stream[v] = ds->stream[w];
        }
    }
    for (int k = 0; k < p->n_nodes; k++) {
        int v = p->order[k];
        if (ds->stream[v] >= 0) continue;
        const dg_node *n = &g->nodes[v];
        for (int i = 0; i < n->n_in && ds->stream[v] < 0; i++) {
            int u = n->in[i] >= 0 ? g->tensors[n->in[i]].producer : -1;
            if (u >= 0 && p->stream[u] != DG_STREAM_COMPUTE && ds->stream[u] > 0) ds->stream[v] = ds->stream[u];
        }
        if (ds->stream[v] < 0) ds->stream[v] = 1;
        ds->n_streams = DG_MAX(ds->n_streams, ds->stream[v] + 1);
    }
}

void dg_device_step_init(dg_device_step *ds, const dg_sched_plan *p, dg_comm *const *groups,
                         int max_streams) {
    memset(ds, 0, sizeof *ds);
    ds->p = p;
    int nn = p->n_nodes;
    size_t sz = (size_t)DG_MAX(nn, 1);
    ds->stream = dg_malloc(sizeof(int) * sz);
    assign_streams(ds, p, groups, DG_MAX(2, DG_MIN(max_streams, DG_DEVICE_MAX_STREAMS)));
    int ns = ds->n_streams;
    ds->wait_on = dg_malloc(sizeof(int) * sz * (size_t)ns);
    ds->record = dg_calloc(sz, 1);
    /* latest[v][s]: the latest (in plan order) predecessor of v on stream s */
    int *latest = dg_malloc(sizeof(int) * sz * (size_t)ns);
    for (size_t i = 0; i < sz * (size_t)ns; i++) latest[i] = ds->wait_on[i] = -1;
    for (int u = 0; u < nn; u++)
        for (int e = p->succ_off[u]; e < p->succ_off[u + 1]; e++) {
            int v = p->succ[e], *l = &latest[v * ns + ds->stream[u]];
            if (ds->stream[u] != ds->stream[v] && (*l < 0 || p->pos[u] > p->pos[*l])) *l = u;
        }
    /* Walk the plan as the enqueue will: a stream that already waited for a
     * later node of the other stream need not wait again. */
    int *waited = dg_malloc(sizeof(int) * (size_t)(ns * ns));
    for (int i = 0; i < ns * ns; i++) waited[i] = -1;
    for (int k = 0; k < nn; k++) {
        int v = p->order[k], s = ds->stream[v];
        for (int o = 0; o < ns; o++) {
            int u = latest[v * ns + o];
            if (u < 0 || p->pos[u] <= waited[s * ns + o]) continue;
            waited[s * ns + o] = p->pos[u];
            ds->wait_on[v * ns + o] = u;
            ds->n_waits++;
            if (!ds->record[u]) ds->n_records++;
            ds->record[u] = 1;
        }
    }
    dg_free(waited);
    dg_free(latest);
}

void dg_device_step_free(dg_device_step *ds) {
    dg_free(ds->stream);
    dg_free(ds->wait_on);
    dg_free(ds->record);
    memset(ds, 0, sizeof *ds);
}

/* Steps 1-3 of dg_device_exec.h: enqueue everything. */
/* Node v on the host: inputs down, its CPU kernel, outputs up, in stream s. */
static int enqueue_fallback(dg_device *d, int s, const dg_device_fallback *f, dg_err *err) {
    for (int i = 0; i < f->n_in; i++)
        DG_TRY(d->ops->copy(d, s, f->in[i].host, f->in[i].dev, f->in[i].bytes, DG_COPY_DOWN, err));
    DG_TRY(d->ops->host_call(d, s, f->run, f->arg, f->status, f->err, err));
    for (int j = 0; j < f->n_out; j++)
        DG_TRY(d->ops->copy(d, s, f->out[j].dev, f->out[j].host, f->out[j].bytes, DG_COPY_UP, err));
    return DG_OK;
}

static int enqueue_step(dg_device *d, const dg_device_step *ds, void *const *dptr,
                        const dg_device_xfer *up, int n_up, const dg_device_xfer *down, int n_down,
                        dg_device_fallback *const *fb, dg_err *err) {
    const dg_sched_plan *p = ds->p;
    const dg_graph *g = p->g;
    const dg_device_ops *o = d->ops;
    int ns = ds->n_streams, ev_up = p->n_nodes, ev_end = p->n_nodes + 1; /* ev_end + s - 1: stream s's end */
    for (int i = 0; i < n_up; i++)
        DG_TRY(o->copy(d, DG_STREAM_COMPUTE, up[i].dev, up[i].host, up[i].bytes, DG_COPY_UP, err));
    DG_TRY(o->record(d, DG_STREAM_COMPUTE, ev_up, err));
    for (int s = 1; s < ns; s++) DG_TRY(o->wait(d, s, ev_up, err));
    for (int k = 0; k < p->n_nodes; k++) {
        int v = p->order[k], s = ds->stream[v];
        for (int other = 0; other < ns; other++) {
            int u = ds->wait_on[v * ns + other];
            if (u >= 0) DG_TRY(o->wait(d, s, u, err));
        }
        const dg_node *n = &g->nodes[v];
        void *in[DG_MAX_INPUTS], *out[DG_MAX_OUTPUTS];
        for (int i = 0; i < n->n_in; i++) in[i] = n->in[i] >= 0 ? dptr[n->in[i]] : NULL;
        for (int j = 0; j < n->n_out; j++) out[j] = n->out[j] >= 0 ? dptr[n->out[j]] : NULL;
        if (fb && fb[v]) DG_TRY(enqueue_fallback(d, s, fb[v], err));
        else DG_TRY(o->launch(d, s, g, n, in, out, err));
        if (ds->record[v]) DG_TRY(o->record(d, s, v, err));
    }
    for (int s = 1; s < ns; s++) {
        DG_TRY(o->record(d, s, ev_end + s - 1, err));
        DG_TRY(o->wait(d, DG_STREAM_COMPUTE, ev_end + s - 1, err));
    }
    for (int i = 0; i < n_down; i++)
        DG_TRY(o->copy(d, DG_STREAM_COMPUTE, down[i].host, down[i].dev, down[i].bytes, DG_COPY_DOWN, err));
    return DG_OK;
}

int dg_device_run_step(dg_device *d, const dg_device_step *ds, void *const *dptr,
                       const dg_device_xfer *up, int n_up, const dg_device_xfer *down, int n_down,
                       dg_device_fallback *const *fb, dg_err *err) {
    int st = enqueue_step(d, ds, dptr, up, n_up, down, n_down, fb, err);
    /* Wait for what was enqueued even when enqueueing failed half way: no
     * stream may still read buffers the caller frees or refills. */
    dg_err se = {{0}};
    int ss = d->ops->sync(d, &se);
    if (st == DG_OK && ss != DG_OK) {
        st = ss;
        if (err) *err = se;
    }
    return st;
}
