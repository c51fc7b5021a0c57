/* dg_prio.c — bottom levels and the priority rank (see dg_prio.h). */
#include "dg_prio.h"

#include "dg_op.h"

double dg_prio_node_cost(const dg_graph *g, const dg_node *n) {
    if (!n->op || !n->op->cost) return 1.0;
    dg_cost c = {0, 0};
    n->op->cost(g, n, &c);
    double v = c.flops + c.bytes;
    return v > 0 ? v : 1.0;
}

void dg_prio_bottom_levels(const dg_graph *g, const int *order, const int *succ_off,
                           const int *succ, double *bottom) {
    for (int k = g->n_nodes - 1; k >= 0; k--) {
        int v = order[k];
        double tail = 0;
        for (int e = succ_off[v]; e < succ_off[v + 1]; e++) tail = DG_MAX(tail, bottom[succ[e]]);
        bottom[v] = dg_prio_node_cost(g, &g->nodes[v]) + tail;
    }
}

/* qsort has no context argument in C11: sort (key, id) records instead. */
typedef struct prio_key {
    int prio;
    double bottom;
    int id;
} prio_key;

static int key_cmp(const void *a, const void *b) {
    const prio_key *x = a, *y = b;
    if (x->prio != y->prio) return x->prio > y->prio ? -1 : 1;
    if (x->bottom != y->bottom) return x->bottom > y->bottom ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

void dg_prio_rank(const dg_graph *g, const double *bottom, int *rank) {
    int n = g->n_nodes;
    prio_key *k = dg_malloc(sizeof *k * (size_t)DG_MAX(n, 1));
    for (int i = 0; i < n; i++) k[i] = (prio_key){g->nodes[i].priority, bottom[i], i};
    qsort(k, (size_t)n, sizeof *k, key_cmp);
    for (int i = 0; i < n; i++) rank[k[i].id] = i;
    dg_free(k);
}
