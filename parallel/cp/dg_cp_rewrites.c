/* dg_cp_rewrites.c — the CP pass's rewrites and its table (see
 * dg_cp_rewrites.h; what each computes: dg_pass_cp.h). Every rewrite is
 * static: the table is the only way to reach one. */
#include "dg_cp_rewrites.h"

#include "dg_collective.h"
#include "dg_layout.h"
#include "dg_moe_loss.h"
#include "dg_op_attention.h"
#include "dg_op_attn_sink.h"
#include "dg_op_bias.h"
#include "dg_op_cp.h"
#include "dg_op_cp_a2a.h"
#include "dg_op_dropout.h"
#include "dg_op_ring_attn.h"
#include "dg_op_rope.h"
#include "dg_op_shape.h"
#include "dg_op_vocab.h"
#include "dg_op_xent.h"
#include "dg_ops_util.h"
#include "dg_router.h"

/* Whether the tokens of tensor t (dim 1) are split over cp: a node reading
 * whole sequences (under --cp-comm-type a2a, attention between the
 * all-to-alls) is copied. */
static int split_over_cp(const dg_graph *g, int t) {
    return g->mesh[DG_AXIS_CP] > 1 && g->tensors[t].ndim > 1 && g->tensors[t].sharding.split[1] == DG_AXIS_CP;
}

static int cp_rope(dg_graph *g, const dg_node *n, const int *in, int *out, const dg_pass_cp_opts *o,
                        dg_err *err) {
    if (!split_over_cp(g, in[0])) return DG_REEMIT_COPY;
    int pos = dg_cp_positions(g, o->cp_size, g->tensors[in[0]].shape[1], n->attrs.i[0]);
    out[0] = pos < 0 ? -1 : dg_add1(g, &dg_op_rope_pos, &n->attrs, (int[]){in[0], pos}, 2, n->name);
    if (out[0] < 0) return dg_err_set(err, g->status ? g->status : DG_EINTERNAL, "cp rope: %s", g->err.msg);
    return DG_OK;
}

static int cp_pos_embed(dg_graph *g, const dg_node *n, const int *in, int *out, const dg_pass_cp_opts *o,
                             dg_err *err) {
    if (!split_over_cp(g, in[0])) return DG_REEMIT_COPY;
    int pos = dg_cp_positions(g, o->cp_size, g->tensors[in[0]].shape[1], 0);
    out[0] = pos < 0 ? -1 : dg_add1(g, &dg_op_pos_embed_pos, NULL, (int[]){in[0], in[1], pos}, 3, n->name);
    if (out[0] < 0) return dg_err_set(err, g->status ? g->status : DG_EINTERNAL, "cp positions: %s", g->err.msg);
    return DG_OK;
}

/* all_reduce(sum) / all_reduce(count) over cp: the loss. */
static int cp_mean(dg_graph *g, int sum, int count, int cp, const char *name, int *loss, dg_err *err) {
    int num = sum < 0 ? -1 : dg_all_reduce(g, sum, DG_AXIS_CP, cp);
    int den = count < 0 ? -1 : dg_all_reduce(g, count, DG_AXIS_CP, cp);
    *loss = num < 0 || den < 0 ? -1 : dg_add1(g, &dg_op_cp_div, NULL, (int[]){num, den}, 2, name);
    if (*loss < 0) return dg_err_set(err, g->status ? g->status : DG_EINTERNAL, "cp loss: %s", g->err.msg);
    return DG_OK;
}

static int cp_xent(dg_graph *g, const dg_node *n, const int *in, int *out, const dg_pass_cp_opts *o,
                        dg_err *err) {
    if (!split_over_cp(g, in[1])) return DG_REEMIT_COPY;
    int outs[3] = {-1, -1, -1};
    dg_graph_add(g, &dg_op_cp_xent_sum, NULL, in, n->n_in, outs, "loss/cp_sum");
    out[1] = outs[1];
    return cp_mean(g, outs[0], outs[2], o->cp_size, n->name, &out[0], err);
}

static int cp_vocab_xent(dg_graph *g, const dg_node *n, const int *in, int *out, const dg_pass_cp_opts *o,
                              dg_err *err) {
    if (!split_over_cp(g, in[1])) return DG_REEMIT_COPY;
    int outs[2] = {-1, -1};
    dg_graph_add(g, &dg_op_cp_vocab_xent_sum, &n->attrs, in, n->n_in, outs, "loss/cp_sum");
    return cp_mean(g, outs[0], outs[1], o->cp_size, n->name, &out[0], err);
}

static int cp_attention(dg_graph *g, const dg_node *n, const int *in, int *out, const dg_pass_cp_opts *o,
                             dg_err *err) {
    if (!split_over_cp(g, in[0])) return DG_REEMIT_COPY;
    if (!n->attrs.i[0])
        return dg_err_set(err, DG_EINPUT, "--context-parallel-size %d: ring attention needs causal attention", o->cp_size);
    /* the variants (issue 29): a window carries over (all-to-all attends
     * over the whole sequence; the ring's blocks place each chunk pair);
     * a sink joins the merged result once (dg_op_attn_sink.h), for either */
    int softmax = (int)n->attrs.i[2];
    int lse = -1;
    /* dropout (attrs f[1] > 0, the key the last input) draws each
     * probability's global place: the ring's blocks by their chunks, the
     * all-to-all by its share of the heads */
    dg_attn_opts ao = {.causal = 1, .scale = n->attrs.f[0], .window = n->attrs.i[1], .sink = -1,
                       .dropout = n->attrs.f[1], .key = n->attrs.f[1] > 0 ? in[n->n_in - 1] : -1,
                       .site = (int)n->attrs.i[3]};
    out[0] = o->comm_type == DG_CP_COMM_A2A ? dg_ulysses_attention(g, in[0], in[1], in[2], o->cp_size, &ao, &lse)
                                            : dg_ring_attention(g, in[0], in[1], in[2], o->cp_size, &ao, &lse);
    if (out[0] >= 0 && softmax != DG_ATTN_SOFTMAX_VANILLA)
        out[0] = dg_attn_sink(g, out[0], lse, softmax, softmax == DG_ATTN_SOFTMAX_LEARNABLE ? in[3] : -1, &lse);
    out[1] = lse;
    if (out[0] < 0) return dg_err_set(err, g->status ? g->status : DG_EINTERNAL, "ring attention: %s", g->err.msg);
    return DG_OK;
}

/* ---- the MoE layer under CP (dg_op_cp.h) ------------------------------------------------ */

/* Whether the dims of x past `from` equal attrs dims past `afrom`. */
static int same_tail(const dg_tensor *x, int from, const dg_attrs *a, int afrom) {
    for (int d = from; d < x->ndim; d++)
        if (a->i[1 + afrom + d - from] != x->shape[d]) return 0;
    return 1;
}

static int cp_reshape(dg_graph *g, const dg_node *n, const int *in, int *out, const dg_pass_cp_opts *o,
                           dg_err *err) {
    int cp = o->cp_size, yn = (int)n->attrs.i[0];
    const dg_tensor *x = &g->tensors[in[0]];
    dg_attrs a = n->attrs;
    if (cp > 1 && x->ndim >= 3 && yn == x->ndim - 1 && split_over_cp(g, in[0]) &&
        a.i[1] == x->shape[0] * x->shape[1] * cp && same_tail(x, 2, &a, 1)) { /* [B, S, ..] -> [B * S, ..] */
        a.i[1] /= cp;
        int y = dg_add1(g, n->op, &a, in, 1, n->name);
        out[0] = y < 0 ? -1 : dg_cp_relabel(g, y, DG_CP_TOKENS_TO_DATA);
    } else if (cp > 1 && x->ndim >= 2 && yn == x->ndim + 1 && dg_layout_is_replicated(&x->sharding) &&
               a.i[1] * a.i[2] == x->shape[0] * cp && a.i[2] % cp == 0 && same_tail(x, 1, &a, 2)) {
        a.i[2] /= cp; /* this rank's tokens [B * S/cp, ..] -> [B, S/cp, ..] */
        int t = dg_cp_relabel(g, in[0], DG_CP_DATA_TO_TOKENS);
        out[0] = t < 0 ? -1 : dg_add1(g, n->op, &a, &t, 1, n->name);
    } else {
        return DG_REEMIT_COPY;
    }
    if (out[0] < 0) return dg_err_set(err, g->status ? g->status : DG_EINTERNAL, "cp tokens: %s", g->err.msg);
    return DG_OK;
}

/* all_reduce over cp of this rank's term x. */
static int cp_sum(dg_graph *g, int x, int cp) {
    int p = x < 0 ? -1 : dg_cp_relabel(g, x, DG_CP_SUMMAND);
    return p < 0 ? -1 : dg_all_reduce(g, p, DG_AXIS_CP, cp);
}

static int cp_moe_aux(dg_graph *g, const dg_node *n, const int *in, int *out, const dg_pass_cp_opts *o,
                           dg_err *err) {
    int cp = o->cp_size;
    if (cp <= 1) return DG_REEMIT_COPY;
    int seqs = n->attrs.i[2] > 1;
    if ((n->n_in > 1 && g->tensors[in[1]].ndim != 1) || (seqs && n->n_in > 1))
        return dg_err_set(err, DG_EINPUT,
                          "--context-parallel-size %d: the MoE aux loss under CP is built from the loss's own "
                          "counts or tokens per expert only (not from routing indices)",
                          cp);
    dg_router_opts ro = dg_router_opts_default((int)n->attrs.i[0]);
    ro.score = (dg_moe_score_fn)n->attrs.i[1];
    int counts = n->n_in > 1 ? in[1] : -1;
    if (seqs) {
        /* per sequence (seq_aux_loss): this rank's part of every sequence's
         * own counts [B, E], summed over cp */
        counts = dg_moe_seq_counts(g, in[0], (int)n->attrs.i[0], ro.score, n->attrs.i[2], (int)n->attrs.i[3]);
    } else if (counts < 0) {
        /* the loss's own plain top-k (routing absent: group limits or an
         * expert bias steer the router's choice): a plain router's counts,
         * which pick the same k experts (dg_moe_loss.h), before the sum */
        dg_router_out r;
        counts = dg_moe_router(g, in[0], &ro, &r) < 0 ? -1 : r.tokens_per_expert;
    }
    dg_attrs a = n->attrs;
    a.f[0] /= (double)cp * cp; /* this rank's probabilities against all ranks' counts and tokens */
    a.i[4] = seqs;             /* counts [B, E] in place of routing */
    counts = counts < 0 ? -1 : cp_sum(g, counts, cp);
    int local = counts < 0 ? -1 : dg_add1(g, n->op, &a, (int[]){in[0], counts}, 2, n->name);
    out[0] = cp_sum(g, local, cp);
    if (out[0] < 0) return dg_err_set(err, g->status ? g->status : DG_EINTERNAL, "cp aux loss: %s", g->err.msg);
    return DG_OK;
}

static int cp_moe_z(dg_graph *g, const dg_node *n, const int *in, int *out, const dg_pass_cp_opts *o,
                         dg_err *err) {
    int cp = o->cp_size;
    if (cp <= 1) return DG_REEMIT_COPY;
    dg_attrs a = n->attrs;
    a.f[0] /= cp; /* the mean over cp ranks' equal token counts */
    out[0] = cp_sum(g, dg_add1(g, n->op, &a, in, 1, n->name), cp);
    if (out[0] < 0) return dg_err_set(err, g->status ? g->status : DG_EINTERNAL, "cp z loss: %s", g->err.msg);
    return DG_OK;
}

static int cp_dropout(dg_graph *g, const dg_node *n, const int *in, int *out, const dg_pass_cp_opts *o,
                           dg_err *err) {
    if (!split_over_cp(g, in[0])) return DG_REEMIT_COPY; /* TP's form, or whole */
    dg_axis inner = (dg_axis)g->tensors[in[0]].sharding.split2[1]; /* SP's split of this rank's chunks */
    dg_attrs a = dg_attrs_zero();
    a.f[0] = n->attrs.f[0];
    a.i[0] = n->attrs.i[0];
    a.i[1] = DG_AXIS_CP;
    a.i[2] = o->cp_size; /* the mask of chunks r and 2cp-1-r */
    a.i[3] = inner;
    a.i[4] = inner != DG_AXIS_NONE ? g->mesh[inner] : 0;
    a.i[5] = n->attrs.i[5]; /* the kind of draw */
    int ins[4] = {in[0], in[1], dg_mesh_coord_input(g, DG_AXIS_CP),
                  inner != DG_AXIS_NONE ? dg_mesh_coord_input(g, inner) : 0};
    int nin = inner != DG_AXIS_NONE ? 4 : 3;
    out[0] = ins[2] < 0 || ins[3] < 0 ? -1 : dg_add1(g, &dg_op_dropout, &a, ins, nin, NULL);
    if (out[0] < 0) return dg_err_set(err, g->status ? g->status : DG_EINTERNAL, "cp dropout: %s", g->err.msg);
    return DG_OK;
}

/* ---- the table ---------------------------------------------------------------------------- */

const dg_cp_rewrite dg_cp_rewrites[] = {
    {&dg_op_attention, cp_attention},     /* DG_TRAIT_SEQUENCE: the ring, or all-to-all */
    {&dg_op_rope, cp_rope},               /* DG_TRAIT_POSITIONS */
    {&dg_op_pos_embed_add, cp_pos_embed}, /* DG_TRAIT_POSITIONS */
    {&dg_op_softmax_xent, cp_xent},       /* DG_TRAIT_TOKEN_STAT: a sum and a count */
    {&dg_op_vocab_xent, cp_vocab_xent},   /* DG_TRAIT_TOKEN_STAT (TP's loss) */
    {&dg_op_moe_aux_loss, cp_moe_aux},    /* DG_TRAIT_TOKEN_STAT */
    {&dg_op_moe_z_loss, cp_moe_z},        /* DG_TRAIT_TOKEN_STAT */
    {&dg_op_dropout, cp_dropout},         /* DG_TRAIT_RANDOM: the two chunks' masks */
    {&dg_op_reshape, cp_reshape},         /* DG_TRAIT_REGROUP: the MoE layer's tokens */
    {NULL, NULL},
};
