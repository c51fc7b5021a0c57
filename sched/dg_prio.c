/* dg_prio.c — the cost model, bottom levels, compute feeding comm and the
 * priority rank (see dg_prio.h for the policy). */
#include "dg_prio.h"

#include <math.h>

#include "dg_collective.h"
#include "dg_op.h"

dg_cost_model dg_cost_model_default(void) {
    return (dg_cost_model){.flops_per_s = 1e11,
                           .mem_bytes_per_s = 2e10,
                           .comm_bytes_per_s = 5e9,
                           .comm_latency_s = 5e-5,
                           .task_s = 2e-6};
}

double dg_prio_node_time(const dg_cost_model *m, const dg_graph *g, const dg_node *n) {
    dg_cost c = {0, 0};
    if (n->op && n->op->cost) n->op->cost(g, n, &c);
    double flops = c.flops > 0 ? c.flops : 0, bytes = c.bytes > 0 ? c.bytes : 0;
    if (n->op && n->op->comm != DG_COMM_NONE) {
        /* group size is attrs slot 0 for every collective (dg_collective.h) */
        if (n->attrs.i[DG_COLL_GROUP_SIZE] <= 1) {
            const dg_tensor *x = n->n_in > 0 ? dg_Tc(g, n->in[0]) : NULL;
            return m->task_s + (x ? (double)dg_tensor_bytes(x) : 0) / m->mem_bytes_per_s;
        }
        return m->task_s + m->comm_latency_s + bytes / m->comm_bytes_per_s;
    }
    return m->task_s + fmax(flops / m->flops_per_s, bytes / m->mem_bytes_per_s);
}

void dg_prio_bottom_levels(const dg_graph *g, const int *order, const int *succ_off,
                           const int *succ, const double *time, double *bottom) {
    for (int k = g->n_nodes - 1; k >= 0; k--) {
        int v = order[k];
        double tail = 0;
        for (int e = succ_off[v]; e < succ_off[v + 1]; e++) tail = DG_MAX(tail, bottom[succ[e]]);
        bottom[v] = time[v] + tail;
    }
}

void dg_prio_feeds_comm(const dg_graph *g, const int *is_comm, int *feeds) {
    for (int v = 0; v < g->n_nodes; v++) feeds[v] = 0;
    for (int c = 0; c < g->n_nodes; c++) {
        if (!is_comm[c]) continue;
        const dg_node *n = &g->nodes[c];
        for (int k = 0; k < n->n_in; k++) {
            int p = n->in[k] >= 0 && n->in[k] < g->n_tensors ? g->tensors[n->in[k]].producer : -1;
            if (p >= 0 && p < g->n_nodes && !is_comm[p]) feeds[p] = 1;
        }
    }
}

/* qsort has no context argument in C11: sort (key, id) records instead. */
typedef struct prio_key {
    int prio, feeds;
    double bottom;
    int id;
} prio_key;

static int key_cmp(const void *a, const void *b) {
    const prio_key *x = a, *y = b;
    if (x->prio != y->prio) return x->prio > y->prio ? -1 : 1;
    if (x->feeds != y->feeds) return x->feeds > y->feeds ? -1 : 1;
    if (x->bottom != y->bottom) return x->bottom > y->bottom ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

void dg_prio_rank(const dg_graph *g, const int *feeds, const double *bottom, int *rank) {
    int n = g->n_nodes;
    prio_key *k = dg_malloc(sizeof *k * (size_t)DG_MAX(n, 1));
    for (int i = 0; i < n; i++) k[i] = (prio_key){g->nodes[i].priority, feeds[i], bottom[i], i};
    qsort(k, (size_t)n, sizeof *k, key_cmp);
    for (int i = 0; i < n; i++) rank[k[i].id] = i;
    dg_free(k);
}
