/* dg_pass_tp.c — see dg_pass_tp.h. */
#include "dg_pass_tp.h"

#include <string.h>

#include "dg_collective.h"
#include "dg_layout.h"
#include "dg_reemit.h"
#include "dg_tp_seq.h"

typedef struct tp_pass {
    int tp;
    const dg_graph *src;
    int *copy_of, *reduced_of;  /* [cap] per dst tensor: its copy_to_group / all_reduce, or -1 */
    int cap;
    bool sp;        /* --sequence-parallel (dg_tp_seq.h) */
    dg_tp_seq seq;
    bool overlap;   /* --tp-comm-overlap: chunked linears (dg_tp_seq.h) */
    dg_tp_overlap ov;
    bool lower_next; /* fit_inputs chose to lower the node it fitted */
} tp_pass;

static int is_op(const dg_node *n, const char *name) { return !strcmp(n->op->name, name); }

/* The vocabulary's ops: their `lower` (ops/dg_op_vocab.h) makes a table or
 * logits split on the vocabulary vocab-parallel, and copies them otherwise. */
static int is_vocab_op(const dg_node *n) { return is_op(n, "embedding") || is_op(n, "softmax_xent"); }

/* Parameters placed over tp: this rank's shard. */
static int tp_leaf(dg_graph *dst, const dg_graph *src, int t, void *ctx) {
    const tp_pass *s = ctx;
    const dg_tensor *x = &src->tensors[t];
    if (x->role != DG_ROLE_PARAMETER || s->tp <= 1)
        return dg_reemit_leaf_default(dst, src, t, ctx);
    int64_t shape[DG_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    dg_sharding lay = x->sharding;
    for (int d = 0; d < x->ndim; d++) {
        if (x->place.split[d] != DG_AXIS_TP) continue;
        int k = DG_MAX(x->place.stride[d], 1);
        if (shape[d] % ((int64_t)s->tp * k) != 0)
            return dg_graph_fail(dst, "--tensor-model-parallel-size %d does not divide dim %d (%lld, %d block(s)) of '%s'",
                                 s->tp, d, (long long)shape[d], k, x->name);
        shape[d] /= s->tp;
        lay.split[d] = DG_AXIS_TP;
        lay.stride[d] = x->place.stride[d];
    }
    dg_param_spec spec = {(dg_init)x->init, x->place};
    int id = dg_param(dst, x->name, x->ndim, shape, &spec);
    if (id >= 0) dst->tensors[id].sharding = lay;
    return id;
}

/* Whether n's rule, in the form the pass emits n (dg_tp_rule_on: a dropout
 * with the tp coordinate), takes inputs `in` (tensors of dst). */
static int rule_takes(const dg_graph *dst, const dg_node *n, const int *in) {
    dg_sharding lay[DG_MAX_INPUTS], out[DG_MAX_OUTPUTS];
    for (int k = 0; k < n->n_in; k++) lay[k] = dst->tensors[in[k]].sharding;
    return dg_tp_rule_on(dst, n, in, lay, out) == DG_OK;
}

static void grow(tp_pass *s, int n) {
    if (n <= s->cap) return;
    int cap = DG_MAX(2 * s->cap, n + 64);
    s->copy_of = dg_realloc(s->copy_of, sizeof(int) * (size_t)cap);
    s->reduced_of = dg_realloc(s->reduced_of, sizeof(int) * (size_t)cap);
    for (int i = s->cap; i < cap; i++) s->copy_of[i] = s->reduced_of[i] = -1;
    s->cap = cap;
}

/* A column-parallel linear: x [.., K] times w [N, K] (or [K, N]) split on N
 * over tp, x whole on K and no partial sum. */
static int column_parallel(const dg_graph *dst, const dg_node *n, const int *in) {
    if (!is_op(n, "matmul") || n->attrs.i[0] || dst->tensors[in[1]].ndim != 2) return 0;
    const dg_sharding *x = &dst->tensors[in[0]].sharding, *w = &dst->tensors[in[1]].sharding;
    int nd = n->attrs.i[1] ? 0 : 1, xn = dst->tensors[in[0]].ndim;
    return w->split[nd] == DG_AXIS_TP && x->partial == DG_AXIS_NONE && !dg_layout_dim_split(x, xn - 1);
}

/* x is an all-gather over tp: its adjoint reduce-scatters the gradient, so a
 * column-parallel linear behind it needs no copy_to_group (SP). */
static int gathered_over_tp(const dg_graph *dst, int x) {
    int p = dst->tensors[x].producer;
    return p >= 0 && dst->nodes[p].op == &dg_op_all_gather && dst->nodes[p].group == DG_AXIS_TP;
}

/* Under SP, a linear that needs the whole sequence: its weight split over
 * tp (column parallel, the output layer's vocabulary included). */
static bool whole_linear(const dg_graph *dst, const dg_node *n, const int *in) {
    if (!is_op(n, "matmul") || n->n_in < 2) return false;
    const dg_tensor *w = &dst->tensors[in[1]];
    return dg_layout_split_over(&w->sharding, w->ndim, DG_AXIS_TP);
}

/* Under --tp-comm-overlap, a linear the pass lowers in chunks: column
 * parallel with its input split on the sequence (instead of gathering it),
 * or row parallel (the reduce-scatter behind it moves into the chunks);
 * the local sequence must split into the chunks. Marks it for tp_lower. */
static bool chunked_linear(tp_pass *s, const dg_graph *dst, const dg_node *n, const int *in) {
    if (!is_op(n, "matmul") || n->attrs.i[0] || dst->tensors[in[0]].ndim != 3) return false;
    const dg_tensor *x = &dst->tensors[in[0]], *w = &dst->tensors[in[1]];
    int64_t L = x->shape[1], C = s->ov.chunks;
    bool col = x->sharding.split[1] == DG_AXIS_TP && x->sharding.split2[1] == DG_AXIS_NONE && L % C == 0 &&
               w->ndim == 2 && w->sharding.split[n->attrs.i[1] ? 0 : 1] == DG_AXIS_TP;
    bool row = x->sharding.split[2] == DG_AXIS_TP && x->sharding.partial == DG_AXIS_NONE &&
               L % ((int64_t)s->tp * C) == 0 && rule_takes(dst, n, in);
    if (!col && !row) return false;
    if (dst->n_tensors > s->ov.cap) {
        int cap = DG_MAX(2 * s->ov.cap, dst->n_tensors + 64);
        s->ov.gathered = dg_realloc(s->ov.gathered, sizeof *s->ov.gathered * (size_t)cap);
        for (int i = s->ov.cap; i < cap; i++)
            for (int j = 0; j < DG_TP_OVERLAP_CHUNKS; j++) s->ov.gathered[i][j] = -1;
        s->ov.cap = cap;
    }
    return s->lower_next = true;
}

/* Make each input's layout one n's rule takes (dg_pass_tp.h, 2). */
static int fit_inputs(dg_graph *dst, const dg_node *n, int *in, tp_pass *s) {
    /* vocab-parallel cross entropy: its lowering takes the split logits */
    if (is_op(n, "softmax_xent") && dg_layout_dim_split(&dst->tensors[in[0]].sharding, dst->tensors[in[0]].ndim - 1))
        return DG_OK;
    if (s->overlap && chunked_linear(s, dst, n, in)) return DG_OK; /* its lowering gathers or scatters */
    if (s->sp) DG_TRY(dg_tp_seq_inputs(&s->seq, dst, n, in, whole_linear(dst, n, in)));
    /* A partial sum is all-reduced at its first reader, as Megatron does,
     * even where the rule would carry it (partial + partial is partial):
     * the residual stream stays whole, so what crosses a pipeline stage or
     * meets a column-parallel linear is never a partial sum. */
    for (int k = 0; k < n->n_in; k++) {
        const dg_tensor *x = &dst->tensors[in[k]];
        if (x->sharding.partial != DG_AXIS_TP) continue;
        grow(s, dst->n_tensors);
        if (s->reduced_of[in[k]] < 0) {
            int p = x->producer; /* read before the add may move the tensor array */
            int y = s->reduced_of[in[k]] = dg_all_reduce(dst, in[k], DG_AXIS_TP, s->tp);
            /* the reduction belongs to its input's layer (the embedding's
             * outside the layers), not the first reader's */
            if (y >= 0 && p >= 0) dst->nodes[dst->tensors[y].producer].layer = dst->nodes[p].layer;
        }
        if ((in[k] = s->reduced_of[in[k]]) < 0) return dst->status;
    }
    if (column_parallel(dst, n, in) && !gathered_over_tp(dst, in[0])) {
        grow(s, dst->n_tensors);
        if (s->copy_of[in[0]] < 0) s->copy_of[in[0]] = dg_copy_to_group(dst, in[0], DG_AXIS_TP, s->tp);
        if ((in[0] = s->copy_of[in[0]]) < 0) return dst->status;
    }
    if (rule_takes(dst, n, in)) return DG_OK;
    for (int k = 0; k < n->n_in && !rule_takes(dst, n, in); k++) {
        const dg_tensor *x = &dst->tensors[in[k]];
        for (int d = 0; d < x->ndim; d++)
            if (x->sharding.split[d] == DG_AXIS_TP && x->sharding.split2[d] == DG_AXIS_NONE && !x->sharding.stride[d]) {
                /* the reader runs replicated (a column-parallel linear got
                 * its copy_to_group above or SP's gather): each rank's
                 * gradient is the whole one, so the adjoint keeps the slice */
                if ((in[k] = dg_all_gather_whole_grad(dst, in[k], DG_AXIS_TP, s->tp, d)) < 0) return dst->status;
                break;
            }
    }
    if (rule_takes(dst, n, in)) return DG_OK;
    return dg_graph_fail(dst, "tp: no collective makes the inputs' layouts fit the rule of %s", n->op->name);
}

/* The nodes the pass lowers: the vocabulary's ops (vocab parallel),
 * dropout (its form with the tp coordinate, dg_tp_lowers: SP's sequence
 * slice, or without SP the heads of unfused attention's probabilities, so
 * the chain from the scores to the context stays on this rank's heads
 * instead of being gathered and run whole on every rank), and under
 * --tp-comm-overlap the chunked linears fit_inputs chose. */
static int tp_lower(const dg_graph *src, const dg_node *n, void *ctx) {
    (void)src;
    tp_pass *s = ctx;
    bool chunked = s->lower_next;
    s->lower_next = false;
    return chunked || (s->tp > 1 && is_vocab_op(n)) || (s->tp > 1 && dg_tp_lowers(n));
}

static int tp_inputs(dg_graph *dst, const dg_node *n, int *in, void *ctx) {
    tp_pass *s = ctx;
    if (s->tp <= 1 || n->group != DG_AXIS_NONE) return DG_OK;
    DG_TRY(fit_inputs(dst, n, in, s));
    return s->sp ? dg_tp_seq_params(&s->seq, dst, n, in) : DG_OK;
}

int dg_pass_tp(const dg_graph *src, int tp_size, dg_graph **out, int *tmap, dg_err *err) {
    return dg_pass_tp_sp(src, tp_size, false, false, out, tmap, err);
}

int dg_pass_tp_sp(const dg_graph *src, int tp_size, bool sequence_parallel, bool tp_comm_overlap, dg_graph **out,
                  int *tmap, dg_err *err) {
    *out = NULL;
    if (tp_size < 1)
        return dg_err_set(err, DG_EINPUT, "--tensor-model-parallel-size: expected >= 1, got %d", tp_size);
    tp_pass s = {tp_size, src, NULL, NULL, 0,
                 sequence_parallel && tp_size > 1, {0}, sequence_parallel && tp_comm_overlap && tp_size > 1,
                 {tp_size, DG_TP_OVERLAP_CHUNKS, 0, NULL}, false};
    dg_tp_seq_init(&s.seq, tp_size);
    dg_graph *g = dg_graph_new(src->name);
    memcpy(g->mesh, src->mesh, sizeof g->mesh);
    g->mesh[DG_AXIS_TP] = tp_size;
    dg_reemit_opts ro = dg_reemit_plain();
    ro.leaf = tp_leaf;
    ro.inputs = tp_inputs;
    ro.lower = tp_lower;
    ro.lower_opts = &s.ov;
    ro.ctx = &s;
    int st = dg_reemit(g, src, &ro, tmap, err);
    dg_free(s.copy_of);
    dg_free(s.reduced_of);
    dg_tp_seq_free(&s.seq);
    dg_free(s.ov.gathered);
    if (st != DG_OK) {
        dg_graph_free(g);
        return st;
    }
    *out = g;
    return DG_OK;
}
