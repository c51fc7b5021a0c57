/* dg_tp_overlap.c — the chunked linears of --tp-comm-overlap (see
 * dg_tp_overlap.h and graph/passes/dg_tp_seq.h). Shapes are local: the
 * sequence S is split over P = tp ranks (L = S / P rows each) and each
 * chunk holds m = L / C rows of every rank. */
#include "dg_tp_overlap.h"

#include "dg_collective.h"
#include "dg_layout.h"
#include "dg_op_chunk.h"
#include "dg_op_matmul.h"
#include "dg_op_shape.h"
#include "dg_tp_seq.h"

/* x [B, L, K] split on the sequence; w column parallel. Chunk j of each
 * rank's slice, gathered: rows (rank p, i) are sequence rows p*L + j*m + i,
 * so each product is viewed [B*P, 1, m, N] and the C of them concatenate
 * to [B*P, C, m, N] = [B, S, N] in sequence order. */
static int column(dg_graph *g, const dg_node *n, int x, int w, const dg_tp_overlap *o) {
    const dg_tensor *X = &g->tensors[x];
    int64_t B = X->shape[0], L = X->shape[1], P = o->tp, C = o->chunks, m = L / C;
    int pieces[DG_TP_OVERLAP_CHUNKS];
    int *ag = o->gathered[x];
    for (int j = 0; j < C; j++) {
        if (ag[j] < 0) ag[j] = dg_all_gather(g, dg_slice_dim(g, x, 1, j, (int)C), DG_AXIS_TP, (int)P, 1);
        int y = dg_matmul(g, ag[j], w, (int)n->attrs.i[0], (int)n->attrs.i[1]);
        if (y < 0) return -1;
        int64_t N = g->tensors[y].shape[2];
        pieces[j] = dg_reshape(g, y, 4, DG_SHAPE(B * P, 1, m, N));
    }
    int y = dg_concat_dim(g, pieces, (int)C, 1);
    if (y < 0) return -1;
    return dg_reshape(g, y, 3, DG_SHAPE(B, P * L, g->tensors[y].shape[3]));
}

/* x [B, S, K] split on K; w row parallel. Chunk j: rows p*L + j*m + i of
 * every block p, i.e. x viewed [B*P, C, m, K] at j, multiplied and
 * reduce-scattered: this rank gets its rows j*m .. j*m + m - 1. */
static int row(dg_graph *g, const dg_node *n, int x, int w, const dg_tp_overlap *o) {
    const dg_tensor *X = &g->tensors[x];
    int64_t B = X->shape[0], S = X->shape[1], K = X->shape[2], P = o->tp, C = o->chunks, m = S / (P * C);
    int pieces[DG_TP_OVERLAP_CHUNKS];
    int xr = dg_reshape(g, x, 4, DG_SHAPE(B * P, C, m, K));
    for (int j = 0; j < C; j++) {
        int xj = dg_reshape(g, dg_slice_dim(g, xr, 1, j, (int)C), 3, DG_SHAPE(B, P * m, K));
        int y = dg_matmul(g, xj, w, (int)n->attrs.i[0], (int)n->attrs.i[1]);
        if ((pieces[j] = dg_reduce_scatter(g, y, DG_AXIS_TP, (int)P, 1)) < 0) return -1;
    }
    return dg_concat_dim(g, pieces, (int)C, 1);
}

int dg_matmul_lower_tp_overlap(dg_graph *g, const dg_graph *src, const dg_node *n, const int *in, int *out,
                               const void *opts, dg_err *err) {
    (void)src;
    const dg_tp_overlap *o = opts;
    const dg_tensor *x = &g->tensors[in[0]];
    if (!o || o->chunks > DG_TP_OVERLAP_CHUNKS || x->ndim != 3 || in[0] >= o->cap)
        return dg_err_set(err, DG_EINTERNAL, "tp overlap: node '%s' is not a linear the pass chunks", n->name);
    bool seq = x->sharding.split[DG_TP_SEQ_DIM] == DG_AXIS_TP;
    out[0] = seq ? column(g, n, in[0], in[1], o) : row(g, n, in[0], in[1], o);
    if (out[0] < 0) return dg_err_set(err, g->status ? g->status : DG_EINTERNAL, "%s", g->err.msg);
    return DG_OK;
}
