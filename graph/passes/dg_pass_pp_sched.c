/* dg_pass_pp_sched.c — see dg_pass_pp_sched.h. */
#include "dg_pass_pp_sched.h"

#include <string.h>

#include "dg_op.h"
#include "dg_pass_mb_order.h"
#include "dg_pass_pp_interleave.h"

int dg_pp_schedule_blocks(const dg_pp_opts *o, int n_mb, int *seq) {
    int k = 0;
    if (o->schedule == DG_PP_FWD_BWD) {
        for (int mb = 0; mb < n_mb; mb++) seq[k++] = 2 * mb;
        for (int mb = 0; mb < n_mb; mb++) seq[k++] = 2 * mb + 1;
        return k;
    }
    /* 1F1B: blocks 2 mb, 2 mb + 1; ZB-H1: 3 mb (F), 3 mb + 1 (B), 3 mb + 2 (W),
     * each W right after its B */
    int zb = o->schedule == DG_PP_ZB_H1, per = zb ? 3 : 2;
    int warm = DG_MIN(o->size - o->rank - 1, n_mb);
    for (int mb = 0; mb < warm; mb++) seq[k++] = per * mb;
    for (int i = 0; i < n_mb; i++) {
        if (warm + i < n_mb) seq[k++] = per * (warm + i);
        seq[k++] = per * i + 1;
        if (zb) seq[k++] = per * i + 2;
    }
    return k;
}

/* Node v's block: 2 mb (forward) or 2 mb + 1 (backward), per = 3 for
 * ZB-H1 (its W blocks come from split_weight_grads); -1 outside any
 * micro-batch. With one micro-batch the step's nodes carry no micro-batch
 * stamp (dg_pipeline.h), and all of them, before DP, are its. */
static int block_of(const dg_node *n, int n_mb, int per) {
    int mb = n_mb == 1 && n->microbatch < 0 ? 0 : n->microbatch;
    if (mb < 0) return -1;
    return per * mb + (n->phase == DG_PHASE_FORWARD ? 0 : 1);
}

/* ZB-H1's split of a micro-batch's backward: B is what computes input
 * gradients — the nodes reachable from the block's starts (the received
 * gradient, the loss seed) without passing through a node that makes only
 * parameters' gradients ("grad/..."), and everything they need; W is the
 * rest: the weight-gradient nodes and the accumulation after them. No B
 * node needs a W node, so W may run after B. blk[v] is 3 mb + 1 for the
 * backward nodes on entry; W nodes get 3 mb + 2. */
static void split_weight_grads(const dg_graph *g, int *blk) {
    int nn = g->n_nodes;
    char *in_b = dg_calloc((size_t)DG_MAX(nn, 1), 1), *param_grad = dg_calloc((size_t)DG_MAX(nn, 1), 1);
    for (int v = 0; v < nn; v++) { /* every output a parameter's gradient (a norm's backward makes dx too: B) */
        param_grad[v] = (char)(g->nodes[v].n_out > 0);
        for (int j = 0; j < g->nodes[v].n_out; j++)
            param_grad[v] &= (char)!strncmp(g->tensors[g->nodes[v].out[j]].name, "grad/", 5);
    }
    /* forward from the starts, in id order (producers come first) */
    for (int v = 0; v < nn; v++) {
        if (blk[v] < 0 || blk[v] % 3 != 1 || param_grad[v]) continue;
        int start = 1, reached = 0;
        for (int k = 0; k < g->nodes[v].n_in; k++) {
            int p = g->tensors[g->nodes[v].in[k]].producer;
            if (p < 0 || blk[p] != blk[v]) continue;
            start = 0;
            reached |= in_b[p];
        }
        in_b[v] = (char)(start || reached);
    }
    /* and what B needs: data and ordering predecessors in the block */
    dg_order_adj pred;
    dg_order_adj_build(g, 1, &pred);
    for (int v = nn - 1; v >= 0; v--) {
        if (!in_b[v]) continue;
        for (int k = 0; k < g->nodes[v].n_in; k++) {
            int p = g->tensors[g->nodes[v].in[k]].producer;
            if (p >= 0 && blk[p] == blk[v]) in_b[p] = 1;
        }
        for (int k = pred.offsets[v]; k < pred.offsets[v + 1]; k++)
            if (blk[pred.nodes[k]] == blk[v]) in_b[pred.nodes[k]] = 1;
    }
    dg_order_adj_free(&pred);
    for (int v = 0; v < nn; v++)
        if (blk[v] >= 0 && blk[v] % 3 == 1 && !in_b[v]) blk[v]++;
    dg_free(in_b);
    dg_free(param_grad);
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

int dg_pp_order_blocks(dg_graph *g, const int *blk, int *seq, int n_seq, int n_ids) {
    int *size = dg_calloc((size_t)DG_MAX(n_ids, 1), sizeof(int)), n = 0;
    for (int v = 0; v < g->n_nodes; v++)
        if (blk[v] >= 0) size[blk[v]]++;
    /* an empty block would break the chain of edges: leave it out */
    for (int k = 0; k < n_seq; k++)
        if (size[seq[k]] > 0) seq[n++] = seq[k];
    dg_free(size);
    return dg_order_blocks(g, blk, seq, n) + chain_p2p(g, blk);
}

int dg_pass_pp_schedule(dg_graph *g, const dg_pp_opts *o, int n_mb, int *n_edges, dg_err *err) {
    if (dg_pp_chunks(o) > 1) return dg_pass_pp_interleave(g, o, n_mb, n_edges, err);
    int nn = g->n_nodes, per = o->schedule == DG_PP_ZB_H1 ? 3 : 2;
    int *blk = dg_malloc(sizeof(int) * (size_t)DG_MAX(nn, 1));
    int *seq = dg_malloc(sizeof(int) * (size_t)DG_MAX(per * n_mb, 1));
    for (int v = 0; v < nn; v++) blk[v] = block_of(&g->nodes[v], n_mb, per);
    if (per == 3) split_weight_grads(g, blk);
    int added = dg_pp_order_blocks(g, blk, seq, dg_pp_schedule_blocks(o, n_mb, seq), per * n_mb);
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
