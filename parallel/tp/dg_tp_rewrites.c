/* dg_tp_rewrites.c — the TP pass's rewrites and its table (see
 * dg_tp_rewrites.h). Every rewrite is static: the table is the only way to
 * reach one. */
#include "dg_tp_rewrites.h"

#include <string.h>

#include "dg_collective.h"
#include "dg_layout.h"
#include "dg_op_chunk.h"
#include "dg_op_attention.h"
#include "dg_op_attn_key.h"
#include "dg_op_dropout.h"
#include "dg_op_embedding.h"
#include "dg_op_matmul.h"
#include "dg_op_mla.h"
#include "dg_op_shape.h"
#include "dg_op_vocab.h"
#include "dg_op_xent.h"
#include "dg_ops_util.h"

/* ---- --tp-comm-overlap: the chunked linears (dg_tp_seq.h) ---------------------------------
 * Shapes are local: the sequence S is split over P = tp ranks (L = S / P
 * rows each) and each chunk holds m = L / C rows of every rank. */

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

/* Under --tp-comm-overlap (tn->overlap), a linear the pass chunks: column
 * parallel with its input split on the sequence (instead of gathering it),
 * or row parallel (the reduce-scatter behind it moves into the chunks);
 * the local sequence must split into the chunks. */
static bool tp_takes_matmul(const dg_graph *dst, const dg_node *n, const int *in, dg_tp_node *tn) {
    dg_tp_overlap *o = tn->overlap;
    if (!o || n->attrs.i[0] || dst->tensors[in[0]].ndim != 3) return false;
    const dg_tensor *x = &dst->tensors[in[0]], *w = &dst->tensors[in[1]];
    int64_t L = x->shape[1], C = o->chunks;
    bool col = x->sharding.split[1] == DG_AXIS_TP && x->sharding.split2[1] == DG_AXIS_NONE && L % C == 0 &&
               w->ndim == 2 && w->sharding.split[n->attrs.i[1] ? 0 : 1] == DG_AXIS_TP;
    bool row = x->sharding.split[2] == DG_AXIS_TP && x->sharding.partial == DG_AXIS_NONE &&
               L % ((int64_t)o->tp * C) == 0 && dg_tp_rule_takes(dst, n, in);
    if (!col && !row) return false;
    if (dst->n_tensors > o->cap) {
        int cap = DG_MAX(2 * o->cap, dst->n_tensors + 64);
        o->gathered = dg_realloc(o->gathered, sizeof *o->gathered * (size_t)cap);
        for (int i = o->cap; i < cap; i++)
            for (int j = 0; j < DG_TP_OVERLAP_CHUNKS; j++) o->gathered[i][j] = -1;
        o->cap = cap;
    }
    return true;
}

/* A linear the pass chose to chunk (tp_takes_matmul): a column-parallel one
 * whose x is split on the sequence, or a row-parallel one. Any other is
 * copied. */
static int tp_matmul(dg_graph *g, const dg_graph *src, const dg_node *n, const int *in, int *out,
                          dg_tp_node *tn, dg_err *err) {
    (void)src;
    if (!tn->as_is) return DG_REEMIT_COPY;
    const dg_tp_overlap *o = tn->overlap;
    const dg_tensor *x = &g->tensors[in[0]];
    if (!o || o->chunks > DG_TP_OVERLAP_CHUNKS || x->ndim != 3 || in[0] >= o->cap)
        return dg_err_set(err, DG_EINTERNAL, "tp overlap: node '%s' is not a linear the pass chunks", n->name);
    bool seq = x->sharding.split[DG_TP_SEQ_DIM] == DG_AXIS_TP;
    out[0] = seq ? column(g, n, in[0], in[1], o) : row(g, n, in[0], in[1], o);
    if (out[0] < 0) return dg_err_set(err, g->status ? g->status : DG_EINTERNAL, "%s", g->err.msg);
    return DG_OK;
}

/* ---- the vocabulary (dg_op_vocab.h) ----------------------------------------------------- */

/* The vocab-parallel loss takes the logits split on the vocabulary. */
static bool tp_takes_xent(const dg_graph *dst, const dg_node *n, const int *in, dg_tp_node *tn) {
    (void)n;
    (void)tn;
    const dg_tensor *x = &dst->tensors[in[0]];
    return dg_layout_dim_split(&x->sharding, x->ndim - 1);
}

/* The outputs keep src's names (dumps read alike with and without tp). */
static int lowered(dg_graph *g, const dg_graph *src, const dg_node *n, const int *out, dg_err *err) {
    if (g->status != DG_OK) return dg_err_set(err, g->status, "%s", g->err.msg);
    for (int j = 0; j < n->n_out; j++)
        memcpy(g->tensors[out[j]].name, src->tensors[n->out[j]].name, DG_NAME_LEN);
    return DG_OK;
}

static int tp_embedding(dg_graph *g, const dg_graph *src, const dg_node *n, const int *in, int *out,
                             dg_tp_node *tn, dg_err *err) {
    (void)tn;
    const dg_sharding *tab = &g->tensors[in[0]].sharding;
    dg_axis a = (dg_axis)tab->split[0];
    if (a == DG_AXIS_NONE || tab->split2[0] != DG_AXIS_NONE || tab->stride[0] > 1) return DG_REEMIT_COPY;
    dg_attrs at = dg_attrs_zero();
    at.i[0] = g->tensors[in[0]].shape[0] * dg_mesh_size(g, a);
    int rank = dg_mesh_coord_input(g, a);
    out[0] = dg_graph_add(g, &dg_op_vocab_embedding, &at, (int[]){in[0], in[1], rank}, 3, NULL, n->name);
    return lowered(g, src, n, out, err);
}

static int tp_xent(dg_graph *g, const dg_graph *src, const dg_node *n, const int *in, int *out,
                        dg_tp_node *tn, dg_err *err) {
    (void)tn;
    int mask = n->n_in > 2 ? in[2] : -1;
    dg_axis a = dg_vocab_split_axis(g, in[0]);
    if (a == DG_AXIS_NONE) return DG_REEMIT_COPY;
    int P = dg_mesh_size(g, a), rank = dg_mesh_coord_input(g, a);
    int stats = dg_add1(g, &dg_op_vocab_xent_stats, NULL, (int[]){in[0], in[1], rank}, 3, "vocab_xent_stats");
    int all = dg_all_gather(g, stats, a, P, 0), st[2] = {-1, -1};
    if (all >= 0) dg_graph_add(g, &dg_op_vocab_xent_combine, NULL, (int[]){all, in[1]}, 2, st, "vocab_xent_combine");
    dg_attrs at = dg_attrs_zero();
    at.i[0] = g->tensors[in[0]].shape[g->tensors[in[0]].ndim - 1] * P;
    int xin[6] = {in[0], in[1], rank, st[0], st[1], mask};
    out[0] = st[0] < 0 ? -1 : dg_graph_add(g, &dg_op_vocab_xent, &at, xin, mask >= 0 ? 6 : 5, NULL, n->name);
    out[1] = st[0];
    return lowered(g, src, n, out, err);
}

/* ---- dropout ------------------------------------------------------------------------------- */

/* x split on dim 1 over tp (SP's sequence, or the heads of unfused
 * attention's probabilities): the form with the tp coordinate
 * (dg_op_dropout.h), whose mask is the whole tensor's at the slice's
 * place; otherwise a copy. */
static int tp_dropout(dg_graph *g, const dg_graph *src, const dg_node *n, const int *in, int *out,
                           dg_tp_node *tn, dg_err *err) {
    (void)src;
    (void)tn;
    const dg_tensor *x = &g->tensors[in[0]];
    dg_axis a = x->ndim > 1 ? (dg_axis)x->sharding.split[1] : DG_AXIS_NONE;
    if (a == DG_AXIS_NONE) return DG_REEMIT_COPY;
    if (a != DG_AXIS_TP || x->sharding.split2[1] != DG_AXIS_NONE)
        return dg_err_set(err, DG_EINTERNAL, "dropout '%s': the TP pass found its dim 1 split over %s", n->name,
                          dg_axis_name(a));
    dg_attrs at = n->attrs; /* p, site and kind */
    at.i[1] = a;
    int coord = dg_mesh_coord_input(g, a);
    out[0] = coord < 0 ? -1 : dg_add1(g, &dg_op_dropout, &at, (int[]){in[0], in[1], coord}, 3, NULL);
    if (out[0] < 0) return dg_err_set(err, g->status ? g->status : DG_EINTERNAL, "tp dropout: %s", g->err.msg);
    return DG_OK;
}

/* ---- attention ---------------------------------------------------------------------------- */

/* Attention with dropout on heads split over tp: its key gets the rank's
 * first global head (dg_op_attn_key.h), so each rank draws its heads' part
 * of the whole mask; otherwise a copy. */
static int tp_attention(dg_graph *g, const dg_graph *src, const dg_node *n, const int *in, int *out, dg_tp_node *tn,
                        dg_err *err) {
    (void)tn;
    const dg_tensor *q = &g->tensors[in[0]];
    if (!(n->attrs.f[1] > 0) || q->sharding.split[2] == DG_AXIS_NONE) return DG_REEMIT_COPY;
    if (q->sharding.split[2] != DG_AXIS_TP || q->sharding.split2[2] != DG_AXIS_NONE || q->sharding.stride[2] > 1)
        return dg_err_set(err, DG_EINTERNAL, "attention '%s': the TP pass found its heads split as %s", n->name,
                          dg_axis_name((dg_axis)q->sharding.split[2]));
    int ins[DG_MAX_INPUTS], kidx = n->n_in - 1; /* the key is the last input */
    for (int k = 0; k < n->n_in; k++) ins[k] = in[k];
    int coord = dg_mesh_coord_input(g, DG_AXIS_TP);
    ins[kidx] = coord < 0 ? -1 : dg_attn_key(g, in[kidx], coord, q->shape[2]);
    if (ins[kidx] >= 0) dg_graph_add(g, n->op, &n->attrs, ins, n->n_in, out, n->name);
    if (g->status != DG_OK || out[0] < 0)
        return dg_err_set(err, g->status ? g->status : DG_EINTERNAL, "tp attention: %s", g->err.msg);
    return lowered(g, src, n, out, err);
}

/* ---- expand_heads ----------------------------------------------------------------------- */

/* x's one head onto heads split over tp (MLA's shared RoPE key): each rank's
 * gradient of x sums its own heads only, so x is read through a
 * copy_to_group, whose adjoint all-reduces that gradient over tp. */
static int tp_expand(dg_graph *g, const dg_graph *src, const dg_node *n, const int *in, int *out, dg_tp_node *tn,
                     dg_err *err) {
    (void)src;
    (void)tn;
    const dg_tensor *like = &g->tensors[in[1]];
    if (like->sharding.split[2] != DG_AXIS_TP) return DG_REEMIT_COPY;
    int x = dg_copy_to_group(g, in[0], DG_AXIS_TP, dg_mesh_size(g, DG_AXIS_TP));
    out[0] = x < 0 ? -1 : dg_add1(g, n->op, &n->attrs, (int[]){x, in[1]}, 2, n->name);
    if (out[0] < 0) return dg_err_set(err, g->status ? g->status : DG_EINTERNAL, "tp expand_heads: %s", g->err.msg);
    return DG_OK;
}

/* ---- the table ---------------------------------------------------------------------------- */

const dg_tp_rewrite dg_tp_rewrites[] = {
    {&dg_op_embedding, tp_embedding, NULL},     /* DG_TRAIT_VOCAB: vocab_embedding on the table's slice */
    {&dg_op_softmax_xent, tp_xent, tp_takes_xent}, /* DG_TRAIT_VOCAB: the vocab-parallel loss */
    {&dg_op_dropout, tp_dropout, NULL},         /* DG_TRAIT_RANDOM: the slice's mask */
    {&dg_op_attention, tp_attention, NULL},     /* DG_TRAIT_RANDOM: dropout's heads */
    {&dg_op_matmul, tp_matmul, tp_takes_matmul},   /* DG_TRAIT_LINEAR: --tp-comm-overlap's chunks */
    {&dg_op_expand_heads, tp_expand, NULL},     /* DG_TRAIT_BROADCAST: x through a copy_to_group */
    {NULL, NULL, NULL},
};
