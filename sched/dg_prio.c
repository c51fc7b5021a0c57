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
        int a = n->group > DG_AXIS_NONE && n->group < DG_AXIS_COUNT ? (int)n->group : -1;
        double bw = a >= 0 && m->axis_bytes_per_s[a] > 0 ? m->axis_bytes_per_s[a] : m->comm_bytes_per_s;
        double lat = a >= 0 && m->axis_bytes_per_s[a] > 0 ? m->axis_latency_s[a] : m->comm_latency_s;
        return m->task_s + lat + bytes / bw;
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

/* The producer of node n's k-th input, or -1. */
static int producer_of(const dg_graph *g, const dg_node *n, int k) {
    int t = n->in[k];
    int p = t >= 0 && t < g->n_tensors ? g->tensors[t].producer : -1;
    return p >= 0 && p < g->n_nodes ? p : -1;
}

/* A comm task that moves data between ranks: a send/recv, or a collective
 * over two or more (over one it is a local copy, nothing to hide). */
static int moves_data(const dg_graph *g, int v) {
    const dg_node *n = &g->nodes[v];
    if (!n->op || n->op->comm == DG_COMM_NONE) return 0;
    if (n->op->comm == DG_COMM_SEND || n->op->comm == DG_COMM_RECV) return 1;
    return n->attrs.i[DG_COLL_GROUP_SIZE] > 1;
}

void dg_prio_feeds_comm(const dg_graph *g, const int *is_comm, int *feeds) {
    int nn = g->n_nodes;
    /* consumers in CSR form: coff[p]..coff[p+1] index cons[] */
    int *coff = dg_calloc((size_t)nn + 1, sizeof(int));
    for (int v = 0; v < nn; v++)
        for (int k = 0; k < g->nodes[v].n_in; k++) {
            int p = producer_of(g, &g->nodes[v], k);
            if (p >= 0 && p != v) coff[p + 1]++;
        }
    for (int v = 0; v < nn; v++) coff[v + 1] += coff[v];
    int *fill = dg_malloc(sizeof(int) * (size_t)DG_MAX(nn, 1));
    int *cons = dg_malloc(sizeof(int) * (size_t)DG_MAX(coff[nn], 1));
    for (int v = 0; v < nn; v++) fill[v] = coff[v];
    for (int v = 0; v < nn; v++)
        for (int k = 0; k < g->nodes[v].n_in; k++) {
            int p = producer_of(g, &g->nodes[v], k);
            if (p >= 0 && p != v) cons[fill[p]++] = v;
        }
    /* Hops to communication: 1 when a collective that moves data reads the
     * task's output,
     * else 1 + the most hops among its readers once every reader has them
     * (a fixpoint from the collectives backwards: node ids need not be
     * topological); FAR past DG_PRIO_FEED_HOPS, 0 never (a reader leads
     * elsewhere: the loss, the next layer's forward). The whole of backward
     * leads only to gradient reductions, so only the last few hops count:
     * the gradients' own producers, their accumulation over micro-batches
     * and the bucket's pack segments. */
    enum { FAR = DG_PRIO_FEED_HOPS + 1 };
    int *hops = dg_calloc((size_t)DG_MAX(nn, 1), sizeof(int));
    int *direct = dg_calloc((size_t)DG_MAX(nn, 1), sizeof(int)); /* a collective reads v's output */
    for (int v = 0; v < nn; v++)
        for (int e = coff[v]; !is_comm[v] && e < coff[v + 1]; e++) {
            direct[v] |= is_comm[cons[e]];
            if (moves_data(g, cons[e])) hops[v] = 1;
        }
    for (int changed = 1; changed;) {
        changed = 0;
        for (int v = nn - 1; v >= 0; v--) { /* readers are mostly created after */
            if (is_comm[v] || hops[v] || coff[v] == coff[v + 1]) continue;
            int most = 0;
            for (int e = coff[v]; most >= 0 && e < coff[v + 1]; e++) {
                int c = cons[e], hc = is_comm[c] ? 0 : hops[c];
                most = (is_comm[c] && !moves_data(g, c)) || (!is_comm[c] && !hc) ? -1 : DG_MAX(most, hc);
            }
            if (most >= 0) hops[v] = DG_MIN(most + 1, (int)FAR), changed = 1;
        }
    }
    for (int v = 0; v < nn; v++) feeds[v] = direct[v] ? 2 : hops[v] > 1 && hops[v] < FAR ? 1 : 0;
    dg_free(direct);
    dg_free(hops);
    dg_free(coff);
    dg_free(fill);
    dg_free(cons);
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
