/* dg_exec_serial.c — see dg_exec_serial.h. */
#include "dg_exec_serial.h"

#include "dg_kernel_call.h"

static int run(const dg_graph *g, const int *order_in, dg_buffers *b, const dg_team *team,
               int phase, dg_err *err) {
    int *order = NULL;
    if (!order_in) {
        order = dg_malloc(sizeof(int) * (size_t)DG_MAX(g->n_nodes, 1));
        int st = dg_graph_topo_order(g, order, err);
        if (st != DG_OK) {
            dg_free(order);
            return st;
        }
        order_in = order;
    }
    int st = DG_OK;
    void *ws = NULL;
    size_t ws_bytes = 0;
    dg_kernel_scratch cv = {NULL, 0};
    for (int k = 0; k < g->n_nodes && st == DG_OK; k++) {
        const dg_node *n = &g->nodes[order_in[k]];
        if (phase >= 0 && (int)n->phase != phase) continue;
        dg_kernel_fn fn = n->op->kernel;
        if (n->op->comm != DG_COMM_NONE || !fn) {
            st = dg_err_set(err, DG_EINPUT,
                            "serial executor: node %d '%s' (op %s) has no CPU kernel%s", n->id,
                            n->name, n->op->name,
                            n->op->comm != DG_COMM_NONE ? " (collectives need a comm backend)" : "");
            break;
        }
        size_t need = n->op->workspace ? n->op->workspace(g, n, team ? team->nthreads : 1) : 0;
        if (need > ws_bytes) {
            dg_free(ws);
            ws = dg_aligned_alloc(need);
            ws_bytes = need;
        }
        void *in[DG_MAX_INPUTS], *out[DG_MAX_OUTPUTS];
        for (int i = 0; i < n->n_in; i++) in[i] = b->ptr[n->in[i]];
        for (int j = 0; j < n->n_out; j++) out[j] = b->ptr[n->out[j]];
        dg_exec_env env = {team, ws, ws_bytes, DG_BACKEND_CPU, NULL};
        st = dg_kernel_call(&env, g, n, in, out, &cv);
        if (st != DG_OK)
            st = dg_err_set(err, st, "serial executor: node %d '%s' (op %s): kernel failed with status %d",
                            n->id, n->name, n->op->name, st);
    }
    dg_free(ws);
    dg_kernel_scratch_free(&cv);
    dg_free(order);
    return st;
}

int dg_run_serial(const dg_graph *g, const int *order, dg_buffers *b, const dg_team *team,
                  dg_err *err) {
    return run(g, order, b, team, -1, err);
}

int dg_run_serial_phase(const dg_graph *g, const int *order, dg_buffers *b, const dg_team *team,
                        dg_phase phase, dg_err *err) {
    return run(g, order, b, team, (int)phase, err);
}
