/* dg_pass_pp_sched.c — see dg_pass_pp_sched.h. */
#include "dg_pass_pp_sched.h"

#include "dg_op.h"
#include "dg_pass_mb_order.h"

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

/* ids[0..n) sorted by their tag slot (insertion sort: a block has a few). */
static void sort_by_slot(const dg_graph *g, int *ids, int n) {
    for (int i = 1; i < n; i++)
        for (int k = i; k > 0 && g->nodes[ids[k - 1]].attrs.i[DG_COLL_TAG] > g->nodes[ids[k]].attrs.i[DG_COLL_TAG];
             k--) {
            int t = ids[k];
            ids[k] = ids[k - 1];
            ids[k - 1] = t;
        }
}

/* Within each block, its PP sends in slot order and its recvs in slot
 * order: the two sides of a boundary then issue them in the same order,
 * which a backend without tags (NCCL matches p2p by order) needs. Sends
 * have no successors and recvs no predecessors, so the chains add no
 * cycle. */
static int chain_p2p(dg_graph *g, const int *blk) {
    int nn = g->n_nodes, added = 0;
    int *ids = dg_malloc(sizeof(int) * (size_t)DG_MAX(nn, 1));
    int n_blk = 0;
    for (int v = 0; v < nn; v++) n_blk = DG_MAX(n_blk, blk[v] + 1);
    for (int b = 0; b < n_blk; b++)
        for (int kind = 0; kind < 2; kind++) {
            int n = 0;
            for (int v = 0; v < nn; v++)
                if (blk[v] == b && g->nodes[v].group == DG_AXIS_PP &&
                    g->nodes[v].op->comm == (kind ? DG_COMM_RECV : DG_COMM_SEND))
                    ids[n++] = v;
            sort_by_slot(g, ids, n);
            for (int k = 1; k < n; k++, added++) dg_graph_add_order(g, ids[k - 1], ids[k]);
        }
    dg_free(ids);
    return added;
}

int dg_pass_pp_schedule(dg_graph *g, const dg_pp_opts *o, int n_mb, int *n_edges, dg_err *err) {
    int nn = g->n_nodes;
    int *blk = dg_malloc(sizeof(int) * (size_t)DG_MAX(nn, 1));
    int *seq = dg_malloc(sizeof(int) * (size_t)DG_MAX(2 * n_mb, 1));
    for (int v = 0; v < nn; v++) blk[v] = block_of(&g->nodes[v], n_mb);
    dg_pp_schedule_blocks(o, n_mb, seq);
    int added = dg_order_blocks(g, blk, seq, 2 * n_mb) + chain_p2p(g, blk);
    dg_free(seq);
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
