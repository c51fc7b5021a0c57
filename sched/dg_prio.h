/* dg_prio.h — task priorities and the ready queue.
 *
 * Default priority is the bottom level: a node's cost plus the largest bottom
 * level among its successors, i.e. the longest remaining path to the end of
 * the step. Running the node with the longest tail first is the classic
 * list-scheduling heuristic (HEFT, Graham): it keeps the critical path moving
 * and starts communication early so there is compute left to hide it.
 * Cost is op->cost's flops + bytes (1 when the op gives none), so a
 * collective's bytes and a matmul's flops both lengthen their paths.
 *
 * A pass may set node->priority (a pipeline schedule will): it is the first
 * key and the bottom level only breaks its ties. The full order is
 *   (node->priority desc, bottom level desc, node id asc)
 * precomputed into a rank (0 = most urgent), so the heap compares two ints.
 */
#ifndef DG_PRIO_H
#define DG_PRIO_H

#include "dg_graph.h"

/* A node's cost: op->cost's flops + bytes, at least 1. */
double dg_prio_node_cost(const dg_graph *g, const dg_node *n);

/* Bottom levels over a successor list in CSR form (succ_off has n_nodes+1
 * entries), visiting nodes in reverse `order` (a topological order). */
void dg_prio_bottom_levels(const dg_graph *g, const int *order, const int *succ_off,
                           const int *succ, double *bottom);

/* rank[node] = position of node in the priority order above. */
void dg_prio_rank(const dg_graph *g, const double *bottom, int *rank);

/* A binary min-heap of node ids keyed by rank[]. */
typedef struct dg_heap {
    int *a;
    int n;
    const int *rank;
} dg_heap;

static inline void dg_heap_push(dg_heap *h, int v) {
    int c = h->n++;
    h->a[c] = v;
    while (c > 0) {
        int p = (c - 1) / 2;
        if (h->rank[h->a[p]] <= h->rank[h->a[c]]) break;
        int t = h->a[p];
        h->a[p] = h->a[c];
        h->a[c] = t;
        c = p;
    }
}

static inline int dg_heap_pop(dg_heap *h) {
    int top = h->a[0];
    h->a[0] = h->a[--h->n];
    for (int c = 0;;) {
        int l = 2 * c + 1, r = l + 1, m = c;
        if (l < h->n && h->rank[h->a[l]] < h->rank[h->a[m]]) m = l;
        if (r < h->n && h->rank[h->a[r]] < h->rank[h->a[m]]) m = r;
        if (m == c) break;
        int t = h->a[m];
        h->a[m] = h->a[c];
        h->a[c] = t;
        c = m;
    }
    return top;
}

#endif /* DG_PRIO_H */
