/* dg_pass_mb_order.c — see dg_pass_mb_order.h. */
#include "dg_pass_mb_order.h"

/* For each node: does a data or ordering edge link it to a node of its own
 * micro-batch, as the predecessor (has_succ) or as the successor (has_pred)? */
static void same_mb_links(const dg_graph *g, char *has_pred, char *has_succ) {
    for (int v = 0; v < g->n_nodes; v++) {
        const dg_node *n = &g->nodes[v];
        for (int k = 0; k < n->n_in; k++) {
            int p = g->tensors[n->in[k]].producer;
            if (p < 0 || p == v || g->nodes[p].microbatch != n->microbatch) continue;
            has_pred[v] = 1;
            has_succ[p] = 1;
        }
    }
    for (int i = 0; i < g->n_order; i++) {
        int a = g->order[i].before, b = g->order[i].after;
        if (a == b || g->nodes[a].microbatch != g->nodes[b].microbatch) continue;
        has_succ[a] = 1;
        has_pred[b] = 1;
    }
}

int dg_pass_mb_order(dg_graph *g, int *n_edges, dg_err *err) {
    int nn = g->n_nodes, n_mb = 0, added = 0;
    for (int v = 0; v < nn; v++) n_mb = DG_MAX(n_mb, g->nodes[v].microbatch + 1);
    char *has_pred = dg_calloc((size_t)DG_MAX(nn, 1), 1), *has_succ = dg_calloc((size_t)DG_MAX(nn, 1), 1);
    same_mb_links(g, has_pred, has_succ);
    /* ends[k], starts[k]: the nodes that end micro-batch m-1, start m */
    int *ends = dg_malloc(sizeof(int) * (size_t)DG_MAX(nn, 1));
    int *starts = dg_malloc(sizeof(int) * (size_t)DG_MAX(nn, 1));
    for (int m = 1; m < n_mb; m++) {
        int ne = 0, ns = 0;
        for (int v = 0; v < nn; v++) {
            if (g->nodes[v].microbatch == m - 1 && !has_succ[v]) ends[ne++] = v;
            if (g->nodes[v].microbatch == m && !has_pred[v]) starts[ns++] = v;
        }
        for (int i = 0; i < ne; i++)
            for (int j = 0; j < ns; j++, added++) dg_graph_add_order(g, ends[i], starts[j]);
    }
    dg_free(ends);
    dg_free(starts);
    dg_free(has_pred);
    dg_free(has_succ);
    if (n_edges) *n_edges = added;
    if (g->status != DG_OK) return dg_err_set(err, DG_EINTERNAL, "micro-batch order: %s", g->err.msg);
    return DG_OK;
}
