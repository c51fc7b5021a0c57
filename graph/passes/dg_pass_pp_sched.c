/* dg_pass_pp_sched.c — see dg_pass_pp_sched.h. */
#include "dg_pass_pp_sched.h"

void dg_pp_schedule_blocks(const dg_pp_opts *o, int n_mb, int *seq) {
    int k = 0;
    if (o->schedule == DG_PP_FWD_BWD) {
        for (int mb = 0; mb < n_mb; mb++) seq[k++] = 2 * mb;
        for (int mb = 0; mb < n_mb; mb++) seq[k++] = 2 * mb + 1;
        return;
    }
    int warm = DG_MIN(o->size - o->rank - 1, n_mb);
    for (int mb = 0; mb < warm; mb++) seq[k++] = 2 * mb;
    for (int i = 0; i < n_mb - warm; i++) {
        seq[k++] = 2 * (warm + i);
        seq[k++] = 2 * i + 1;
    }
    for (int mb = n_mb - warm; mb < n_mb; mb++) seq[k++] = 2 * mb + 1;
}

/* Node v's block: 2 mb (forward) or 2 mb + 1 (backward); -1 outside any
 * micro-batch. With one micro-batch the step's nodes carry no micro-batch
 * stamp (dg_pipeline.h), and all of them, before DP, are its. */
static int block_of(const dg_node *n, int n_mb) {
    int mb = n_mb == 1 && n->microbatch < 0 ? 0 : n->microbatch;
    if (mb < 0) return -1;
    return 2 * mb + (n->phase == DG_PHASE_FORWARD ? 0 : 1);
}

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

int dg_pass_pp_schedule(dg_graph *g, const dg_pp_opts *o, int n_mb, int *n_edges, dg_err *err) {
    int nn = g->n_nodes, added = 0;
    int *blk = dg_malloc(sizeof(int) * (size_t)DG_MAX(nn, 1));
    for (int v = 0; v < nn; v++) blk[v] = block_of(&g->nodes[v], n_mb);
    char *has_pred = dg_calloc((size_t)DG_MAX(nn, 1), 1), *has_succ = dg_calloc((size_t)DG_MAX(nn, 1), 1);
    same_block_links(g, blk, has_pred, has_succ);
    int *seq = dg_malloc(sizeof(int) * (size_t)DG_MAX(2 * n_mb, 1));
    dg_pp_schedule_blocks(o, n_mb, seq);
    int *ends = dg_malloc(sizeof(int) * (size_t)DG_MAX(nn, 1)), *starts = dg_malloc(sizeof(int) * (size_t)DG_MAX(nn, 1));
    for (int k = 1; k < 2 * n_mb; k++) {
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
    dg_free(seq);
    dg_free(has_pred);
    dg_free(has_succ);
    dg_free(blk);
    if (n_edges) *n_edges = added;
    if (g->status != DG_OK) return dg_err_set(err, DG_EINTERNAL, "pipeline schedule: %s", g->err.msg);
    return DG_OK;
}

int dg_pass_pp_fence(dg_graph *g, dg_err *err) {
    int prev = -1;
    for (int u = 0; u < g->n_nodes; u++) {
        if (g->nodes[u].group != DG_AXIS_PP || g->nodes[u].phase != DG_PHASE_OPTIMIZER) continue;
        for (int v = 0; v < g->n_nodes; v++)
            if (g->nodes[v].group == DG_AXIS_PP && g->nodes[v].phase != DG_PHASE_OPTIMIZER) dg_graph_add_order(g, v, u);
        if (prev >= 0) dg_graph_add_order(g, prev, u); /* the same order on every stage: the passes' */
        prev = u;
    }
    if (g->status != DG_OK) return dg_err_set(err, DG_EINTERNAL, "pipeline fence: %s", g->err.msg);
    return DG_OK;
}
