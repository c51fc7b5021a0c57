/* dg_order.c — ordering edges, the topological order over data and ordering
 * edges, and naming a node on a cycle (see dg_graph.h). */
#include <string.h>

#include "dg_graph.h"
#include "dg_op.h"

int dg_graph_add_order(dg_graph *g, int before, int after) {
    if (g->status != DG_OK) return -1;
    if (before < 0 || before >= g->n_nodes || after < 0 || after >= g->n_nodes)
        return dg_graph_fail(g, "ordering edge %d -> %d: the graph has nodes 0..%d", before, after,
                             g->n_nodes - 1);
    if (g->n_order == g->cap_order) {
        g->cap_order = g->cap_order ? 2 * g->cap_order : 16;
        g->order = dg_realloc(g->order, sizeof(dg_order_edge) * (size_t)g->cap_order);
    }
    g->order[g->n_order] = (dg_order_edge){before, after};
    return g->n_order++;
}

static int edge_cmp(const void *pa, const void *pb) {
    const dg_order_edge *a = pa, *b = pb;
    if (a->before != b->before) return (a->before > b->before) - (a->before < b->before);
    return (a->after > b->after) - (a->after < b->after);
}

int dg_graph_order_sorted(const dg_graph *g, dg_order_edge *out) {
    if (g->n_order <= 0) return 0;
    memcpy(out, g->order, sizeof *out * (size_t)g->n_order);
    qsort(out, (size_t)g->n_order, sizeof *out, edge_cmp);
    int k = 1;
    for (int i = 1; i < g->n_order; i++)
        if (edge_cmp(&out[i], &out[k - 1]) != 0) out[k++] = out[i];
    return k;
}

static bool edge_ok(const dg_graph *g, const dg_order_edge *e) {
    return e->before >= 0 && e->before < g->n_nodes && e->after >= 0 && e->after < g->n_nodes;
}

void dg_order_adj_build(const dg_graph *g, int by_after, dg_order_adj *a) {
    int nn = g->n_nodes;
    a->offsets = dg_calloc((size_t)nn + 1, sizeof(int));
    a->nodes = dg_malloc(sizeof(int) * (size_t)DG_MAX(g->n_order, 1));
    dg_order_edge *e = dg_malloc(sizeof *e * (size_t)DG_MAX(g->n_order, 1));
    int ne = 0;
    for (int i = 0; i < g->n_order; i++)
        if (edge_ok(g, &g->order[i]))
            e[ne++] = by_after ? (dg_order_edge){g->order[i].after, g->order[i].before} : g->order[i];
    qsort(e, (size_t)ne, sizeof *e, edge_cmp); /* by key node, then the other end */
    for (int i = 0; i < ne; i++) {
        a->offsets[e[i].before + 1]++;
        a->nodes[i] = e[i].after;
    }
    for (int v = 0; v < nn; v++) a->offsets[v + 1] += a->offsets[v];
    dg_free(e);
}

void dg_order_adj_free(dg_order_adj *a) {
    dg_free(a->offsets);
    dg_free(a->nodes);
    a->offsets = a->nodes = NULL;
}

/* ---- a node on a cycle --------------------------------------------------------- */

/* Kahn's algorithm leaves exactly the nodes on a cycle, and those downstream
 * of one, with indeg > 0; each of them has a predecessor that is also left.
 * Walking from a left node to a left predecessor (the first one: data inputs
 * in order, then ordering predecessors) must revisit a node within n steps,
 * and the first node revisited is on a cycle. The same deterministic walk from
 * it goes once around that cycle, which gives its length and whether an
 * ordering edge closes it. */
typedef struct step {
    int node;  /* the predecessor chosen */
    int order; /* 1: reached through an ordering edge */
} step;

static step left_pred(const dg_graph *g, const dg_order_adj *pred, const int *indeg, int v) {
    const dg_node *n = &g->nodes[v];
    for (int k = 0; k < n->n_in; k++) {
        int t = n->in[k];
        int p = t >= 0 && t < g->n_tensors ? g->tensors[t].producer : -1;
        if (p >= 0 && p < g->n_nodes && indeg[p] > 0) return (step){p, 0};
    }
    for (int k = pred->offsets[v]; k < pred->offsets[v + 1]; k++)
        if (indeg[pred->nodes[k]] > 0) return (step){pred->nodes[k], 1};
    return (step){-1, 0};
}

static int cycle_fail(const dg_graph *g, const int *indeg, dg_err *err) {
    dg_order_adj pred;
    dg_order_adj_build(g, 1, &pred);
    char *seen = dg_calloc((size_t)g->n_nodes, 1);
    int v = 0;
    while (indeg[v] == 0) v++; /* the smallest id left */
    int stranded = 0;
    while (!seen[v] && !stranded) {
        seen[v] = 1;
        step s = left_pred(g, &pred, indeg, v);
        /* none: a tensor names a producer that does not write it (a graph
         * the verifier's 'producer' rule rejects first) */
        if (s.node < 0) stranded = 1;
        else v = s.node;
    }
    const dg_node *n = &g->nodes[v];
    if (stranded) {
        dg_free(seen);
        dg_order_adj_free(&pred);
        return dg_err_set(err, DG_EINPUT,
                          "node %d '%s' (op %s): rule 'acyclic' broken: it waits on a node that never runs",
                          v, n->name, n->op ? n->op->name : "?");
    }
    /* v is on the cycle: go around it once, from v back to v */
    int len = 0, ob = -1, oa = -1;
    for (int u = v;;) {
        step s = left_pred(g, &pred, indeg, u);
        len++;
        if (s.order && ob < 0) ob = s.node, oa = u;
        u = s.node;
        if (u == v) break;
    }
    dg_free(seen);
    dg_order_adj_free(&pred);
    char via[96] = "data edges only";
    if (ob >= 0) snprintf(via, sizeof via, "through ordering edge %d -> %d", ob, oa);
    return dg_err_set(err, DG_EINPUT,
                      "node %d '%s' (op %s): rule 'acyclic' broken: it is on a cycle of %d node%s (%s)",
                      v, n->name, n->op ? n->op->name : "?", len, len == 1 ? "" : "s", via);
}

/* ---- topological order ------------------------------------------------------------ */

/* A binary min-heap of node ids: the smallest ready id comes out first, which
 * keeps the order deterministic and close to construction order. */
static void heap_push(int *h, int *n, int v) {
    int c = (*n)++;
    h[c] = v;
    while (c > 0 && h[(c - 1) / 2] > h[c]) {
        int p = (c - 1) / 2, t = h[p];
        h[p] = h[c];
        h[c] = t;
        c = p;
    }
}

static int heap_pop(int *h, int *n) {
    int top = h[0];
    h[0] = h[--*n];
    for (int c = 0;;) {
        int l = 2 * c + 1, r = l + 1, m = c;
        if (l < *n && h[l] < h[m]) m = l;
        if (r < *n && h[r] < h[m]) m = r;
        if (m == c) break;
        int t = h[m];
        h[m] = h[c];
        h[c] = t;
        c = m;
    }
    return top;
}

int dg_graph_topo_order(const dg_graph *g, int *order, dg_err *err) {
    int nn = g->n_nodes;
    dg_uses u;
    dg_uses_build(g, &u);
    dg_order_adj succ;
    dg_order_adj_build(g, 0, &succ);
    /* indegree = inputs whose producer is a node, plus ordering predecessors */
    int *indeg = dg_calloc((size_t)DG_MAX(nn, 1), sizeof(int));
    for (int i = 0; i < nn; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++) {
            int t = g->nodes[i].in[k];
            if (t >= 0 && t < g->n_tensors && g->tensors[t].producer >= 0) indeg[i]++;
        }
    for (int k = 0; k < succ.offsets[nn]; k++) indeg[succ.nodes[k]]++;
    int *heap = dg_malloc(sizeof(int) * (size_t)DG_MAX(nn, 1));
    int hn = 0, count = 0;
    for (int i = 0; i < nn; i++)
        if (indeg[i] == 0) heap_push(heap, &hn, i);
    while (hn > 0) {
        int v = heap_pop(heap, &hn);
        order[count++] = v;
        const dg_node *n = &g->nodes[v];
        for (int j = 0; j < n->n_out; j++) {
            int t = n->out[j];
            if (t < 0 || t >= g->n_tensors || g->tensors[t].producer != v) continue;
            for (int k = u.offsets[t]; k < u.offsets[t + 1]; k++)
                if (--indeg[u.nodes[k]] == 0) heap_push(heap, &hn, u.nodes[k]);
        }
        for (int k = succ.offsets[v]; k < succ.offsets[v + 1]; k++)
            if (--indeg[succ.nodes[k]] == 0) heap_push(heap, &hn, succ.nodes[k]);
    }
    int st = count == nn ? DG_OK : cycle_fail(g, indeg, err);
    dg_free(heap);
    dg_free(indeg);
    dg_order_adj_free(&succ);
    dg_uses_free(&u);
    return st;
}
