/* dg_pass_pp_interleave.c — see dg_pass_pp_interleave.h. */
#include "dg_pass_pp_interleave.h"

#include "dg_pass_mb_order.h"
#include "dg_pass_pp_sched.h"

int dg_pp_interleave_check(const dg_pp_opts *o, int n_mb, const char *what, dg_err *err) {
    if (dg_pp_chunks(o) <= 1 || n_mb % o->size == 0) return DG_OK;
    return dg_err_set(err, DG_EINPUT,
                      "%s: %d micro-batches is not a multiple of --pipeline-model-parallel-size %d, which the "
                      "interleaved schedule (virtual pipeline stages) needs",
                      what, n_mb, o->size);
}

/* Virtual micro-batch k of the rank: its micro-batch and its chunk. */
static int mb_of(int k, int p, int v) { return k / (p * v) * p + k % p; }
static int chunk_of_k(int k, int p, int v, int forward) {
    int c = k % (p * v) / p;
    return forward ? c : v - 1 - c;
}

int dg_pp_interleave_blocks(const dg_pp_opts *o, int n_mb, int *seq) {
    int p = o->size, v = dg_pp_chunks(o), total = n_mb * v, n = 0;
    int warm = o->schedule == DG_PP_FWD_BWD || n_mb == p ? total : DG_MIN((p - o->rank - 1) * 2 + (v - 1) * p, total);
#define F(k) (2 * (mb_of(k, p, v) * v + chunk_of_k(k, p, v, 1)))
#define B(k) (2 * (mb_of(k, p, v) * v + chunk_of_k(k, p, v, 0)) + 1)
    for (int k = 0; k < warm; k++) seq[n++] = F(k);
    for (int i = 0; i < total - warm; i++) {
        seq[n++] = F(warm + i);
        seq[n++] = B(i);
    }
    for (int k = total - warm; k < total; k++) seq[n++] = B(k);
#undef F
#undef B
    return n;
}

/* chunk[u] for g's nodes, in id order (producers first): a decoder layer's
 * node is its layer's chunk; a node outside the layers goes with the
 * latest chunk it reads from in its micro-batch (a forward reads the
 * chunks upwards, a backward downwards: the gradient accumulation of a
 * chunk's parameter stays in that chunk), and without one to the
 * embedding's chunk 0 on rank 0, the loss's chunk v - 1 on the last rank. */
static void stamp_chunks(const dg_graph *g, const dg_pp_opts *o, int *chunk) {
    int v = dg_pp_chunks(o), dflt = o->rank == o->size - 1 ? v - 1 : 0;
    for (int u = 0; u < g->n_nodes; u++) {
        const dg_node *n = &g->nodes[u];
        if (n->layer >= 0) {
            chunk[u] = dg_pp_vstage_of_layer(o, n->layer) / o->size;
            continue;
        }
        int fwd = n->phase == DG_PHASE_FORWARD, c = -1;
        for (int k = 0; k < n->n_in; k++) {
            int pr = g->tensors[n->in[k]].producer;
            if (pr < 0 || g->nodes[pr].microbatch != n->microbatch) continue;
            c = c < 0 ? chunk[pr] : fwd ? DG_MAX(c, chunk[pr]) : DG_MIN(c, chunk[pr]);
        }
        chunk[u] = c >= 0 ? c : dflt;
    }
}

int dg_pass_pp_interleave(dg_graph *g, const dg_pp_opts *o, int n_mb, int *n_edges, dg_err *err) {
    int nn = g->n_nodes, v = dg_pp_chunks(o), n_blk = 2 * n_mb * v;
    int *blk = dg_malloc(sizeof(int) * (size_t)DG_MAX(nn, 1)), *chunk = dg_malloc(sizeof(int) * (size_t)DG_MAX(nn, 1));
    int *seq = dg_malloc(sizeof(int) * (size_t)DG_MAX(n_blk, 1));
    stamp_chunks(g, o, chunk);
    for (int u = 0; u < nn; u++) {
        dg_node *n = &g->nodes[u];
        /* one micro-batch: the step's nodes carry no stamp (dg_pipeline.h) */
        int mb = n_mb == 1 && n->microbatch < 0 && n->phase != DG_PHASE_OPTIMIZER ? 0 : n->microbatch;
        blk[u] = mb < 0 ? -1 : 2 * (mb * v + chunk[u]) + (n->phase == DG_PHASE_FORWARD ? 0 : 1);
        if (mb >= 0) n->stage = chunk[u] * o->size + o->rank;
    }
    int added = dg_pp_order_blocks(g, blk, seq, dg_pp_interleave_blocks(o, n_mb, seq), n_blk);
    dg_free(seq);
    dg_free(blk);
    dg_free(chunk);
    if (n_edges) *n_edges = added;
    if (g->status != DG_OK) return dg_err_set(err, DG_EINTERNAL, "interleaved pipeline schedule: %s", g->err.msg);
    return DG_OK;
}
