/* dg_device_exec.c — a plan's step on a device (see dg_device_exec.h). */
#include "dg_device_exec.h"

#include <string.h>

void dg_device_free(dg_device *d) {
    if (d) d->ops->free(d);
}

void dg_device_step_init(dg_device_step *ds, const dg_sched_plan *p) {
    memset(ds, 0, sizeof *ds);
    ds->p = p;
    int nn = p->n_nodes;
    size_t sz = (size_t)DG_MAX(nn, 1);
    ds->wait_on = dg_malloc(sizeof(int) * sz * DG_STREAM_COUNT);
    ds->record = dg_calloc(sz, 1);
    /* latest[v][s]: the latest (in plan order) predecessor of v on stream s */
    int *latest = dg_malloc(sizeof(int) * sz * DG_STREAM_COUNT);
    for (size_t i = 0; i < sz * DG_STREAM_COUNT; i++) latest[i] = ds->wait_on[i] = -1;
    for (int u = 0; u < nn; u++)
        for (int e = p->succ_off[u]; e < p->succ_off[u + 1]; e++) {
            int v = p->succ[e], *l = &latest[v * DG_STREAM_COUNT + p->stream[u]];
            if (p->stream[u] != p->stream[v] && (*l < 0 || p->pos[u] > p->pos[*l])) *l = u;
        }
    /* Walk the plan as the enqueue will: a stream that already waited for a
     * later node of the other stream need not wait again. */
    int waited[DG_STREAM_COUNT][DG_STREAM_COUNT];
    for (int a = 0; a < DG_STREAM_COUNT; a++)
        for (int b = 0; b < DG_STREAM_COUNT; b++) waited[a][b] = -1;
    for (int k = 0; k < nn; k++) {
        int v = p->order[k], s = p->stream[v];
        for (int o = 0; o < DG_STREAM_COUNT; o++) {
            int u = latest[v * DG_STREAM_COUNT + o];
            if (u < 0 || p->pos[u] <= waited[s][o]) continue;
            waited[s][o] = p->pos[u];
            ds->wait_on[v * DG_STREAM_COUNT + o] = u;
            ds->n_waits++;
            if (!ds->record[u]) ds->n_records++;
            ds->record[u] = 1;
        }
    }
    dg_free(latest);
}

void dg_device_step_free(dg_device_step *ds) {
    dg_free(ds->wait_on);
    dg_free(ds->record);
    memset(ds, 0, sizeof *ds);
}

/* Steps 1-3 of dg_device_exec.h: enqueue everything. */
static int enqueue_step(dg_device *d, const dg_device_step *ds, void *const *dptr,
                        const dg_device_xfer *up, int n_up, const dg_device_xfer *down, int n_down,
                        dg_err *err) {
    const dg_sched_plan *p = ds->p;
    const dg_graph *g = p->g;
    const dg_device_ops *o = d->ops;
    int ev_up = p->n_nodes, ev_comm_end = p->n_nodes + 1;
    for (int i = 0; i < n_up; i++)
        DG_TRY(o->copy(d, DG_STREAM_COMPUTE, up[i].dev, up[i].host, up[i].bytes, DG_COPY_UP, err));
    DG_TRY(o->record(d, DG_STREAM_COMPUTE, ev_up, err));
    DG_TRY(o->wait(d, DG_STREAM_COMM, ev_up, err));
    for (int k = 0; k < p->n_nodes; k++) {
        int v = p->order[k], s = p->stream[v];
        for (int other = 0; other < DG_STREAM_COUNT; other++) {
            int u = ds->wait_on[v * DG_STREAM_COUNT + other];
            if (u >= 0) DG_TRY(o->wait(d, s, u, err));
        }
        const dg_node *n = &g->nodes[v];
        void *in[DG_MAX_INPUTS], *out[DG_MAX_OUTPUTS];
        for (int i = 0; i < n->n_in; i++) in[i] = n->in[i] >= 0 ? dptr[n->in[i]] : NULL;
        for (int j = 0; j < n->n_out; j++) out[j] = n->out[j] >= 0 ? dptr[n->out[j]] : NULL;
        DG_TRY(o->launch(d, s, g, n, in, out, err));
        if (ds->record[v]) DG_TRY(o->record(d, s, v, err));
    }
    DG_TRY(o->record(d, DG_STREAM_COMM, ev_comm_end, err));
    DG_TRY(o->wait(d, DG_STREAM_COMPUTE, ev_comm_end, err));
    for (int i = 0; i < n_down; i++)
        DG_TRY(o->copy(d, DG_STREAM_COMPUTE, down[i].host, down[i].dev, down[i].bytes, DG_COPY_DOWN, err));
    return DG_OK;
}

int dg_device_run_step(dg_device *d, const dg_device_step *ds, void *const *dptr,
                       const dg_device_xfer *up, int n_up, const dg_device_xfer *down, int n_down,
                       dg_err *err) {
    int st = enqueue_step(d, ds, dptr, up, n_up, down, n_down, err);
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
