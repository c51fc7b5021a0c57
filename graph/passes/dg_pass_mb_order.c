/* dg_pass_mb_order.c — see dg_pass_mb_order.h. */
#include "dg_pass_mb_order.h"

/* has_pred[v] / has_succ[v]: a data or ordering edge links v to a node of
 * its own block. */
static void same_block_links(const dg_graph *g, const int *blk, char *has_pred, char *has_succ) {
    for (int v = 0; v < g->n_nodes; v++) {
        const dg_node *n = &g->nodes[v];
        for (int k = 0; k < n->n_in; k++) {
            int p = g->tensors[n->in[k]].producer;
            if (p < 0 || p == v || blk[p] != blk[v]) continue;
            has_pred[v] = has_succ[p] = 1;
        }
    }
    for (int i = 0; i < g->n_order; i++) {
        int a = g->order[i].before, b = g->order[i].after;
        if (a == b || blk[a] != blk[b]) continue;
        has_succ[a] = has_pred[b] = 1;
    }
}

int dg_order_blocks(dg_graph *g, const int *blk, const int *seq, int n_seq) {
    int nn = g->n_nodes, added = 0;
    char *has_pred = dg_calloc((size_t)DG_MAX(nn, 1), 1), *has_succ = dg_calloc((size_t)DG_MAX(nn, 1), 1);
    same_block_links(g, blk, has_pred, has_succ);
    int *ends = dg_malloc(sizeof(int) * (size_t)DG_MAX(nn, 1));
    int *starts = dg_malloc(sizeof(int) * (size_t)DG_MAX(nn, 1));
    for (int k = 1; k < n_seq; k++) {
        int ne = 0, ns = 0;
        for (int v = 0; v < nn; v++) {
            if (blk[v] == seq[k - 1] && !has_succ[v]) ends[ne++] = v;
            if (blk[v] == seq[k] && !has_pred[v]) starts[ns++] = v;
        }
        for (int i = 0; i < ne; i++)
            for (int j = 0; j < ns; j++, added++) dg_graph_add_order(g, ends[i], starts[j]);
    }
    dg_free(ends);
    dg_free(starts);
    dg_free(has_pred);
    dg_free(has_succ);
    return added;
}

int dg_pass_mb_order_overlap(dg_graph *g, int *n_edges, dg_err *err) {
    int nn = g->n_nodes, n_mb = 0, added = 0;
    for (int v = 0; v < nn; v++) n_mb = DG_MAX(n_mb, g->nodes[v].microbatch + 1);
    int *blk = dg_malloc(sizeof(int) * (size_t)DG_MAX(nn, 1));
    for (int v = 0; v < nn; v++) { /* F(m) = 2m, B(m) = 2m + 1 */
        int m = g->nodes[v].microbatch;
        blk[v] = m < 0 ? -1 : 2 * m + (g->nodes[v].phase != DG_PHASE_FORWARD);
    }
    for (int m = 1; m < n_mb; m++) {
        int fwd[2] = {2 * (m - 1), 2 * m}, bwd[2] = {2 * (m - 1) + 1, 2 * m + 1};
        added += dg_order_blocks(g, blk, fwd, 2) + dg_order_blocks(g, blk, bwd, 2);
        if (m >= 2) {
            int bound[2] = {2 * (m - 2) + 1, 2 * m};
            added += dg_order_blocks(g, blk, bound, 2);
        }
    }
    dg_free(blk);
    if (n_edges) *n_edges = added;
    if (g->status != DG_OK) return dg_err_set(err, DG_EINTERNAL, "micro-batch order: %s", g->err.msg);
    return DG_OK;
}

int dg_pass_mb_order(dg_graph *g, int *n_edges, dg_err *err) {
    int nn = g->n_nodes, n_mb = 0;
    for (int v = 0; v < nn; v++) n_mb = DG_MAX(n_mb, g->nodes[v].microbatch + 1);
    int *blk = dg_malloc(sizeof(int) * (size_t)DG_MAX(nn, 1));
    int *seq = dg_malloc(sizeof(int) * (size_t)DG_MAX(n_mb, 1));
    for (int v = 0; v < nn; v++) blk[v] = g->nodes[v].microbatch;
    for (int m = 0; m < n_mb; m++) seq[m] = m;
    int added = dg_order_blocks(g, blk, seq, n_mb);
    dg_free(blk);
    dg_free(seq);
    if (n_edges) *n_edges = added;
    if (g->status != DG_OK) return dg_err_set(err, DG_EINTERNAL, "micro-batch order: %s", g->err.msg);
    return DG_OK;
}
