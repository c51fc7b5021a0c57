/* dg_pass_tp.c — see dg_pass_tp.h. */
#include "dg_pass_tp.h"

#include <string.h>

#include "dg_collective.h"
#include "dg_layout.h"
#include "dg_reemit.h"
#include "dg_tp_rewrites.h"
#include "dg_tp_seq.h"

typedef struct tp_pass {
    int tp;
    int *copy_of, *reduced_of;  /* [cap] per dst tensor: its copy_to_group / all_reduce, or -1 */
    int cap;
    bool sp;        /* --sequence-parallel (dg_tp_seq.h) */
    dg_tp_seq seq;
    bool overlap;   /* --tp-comm-overlap: chunked linears (dg_tp_seq.h) */
    dg_tp_overlap ov;
} tp_pass;

/* Parameters placed over tp: this rank's shard. */
static int tp_leaf(dg_graph *dst, const dg_graph *src, int t, void *ctx) {
    const tp_pass *s = ctx;
    return dg_reemit_leaf_shard(dst, src, t, DG_AXIS_TP, s->tp, "--tensor-model-parallel-size");
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
    if (!(n->op->traits & DG_TRAIT_LINEAR) || n->attrs.i[0] || dst->tensors[in[1]].ndim != 2) return 0;
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
    if (!(n->op->traits & DG_TRAIT_LINEAR) || n->n_in < 2) return false;
    const dg_tensor *w = &dst->tensors[in[1]];
    return dg_layout_split_over(&w->sharding, w->ndim, DG_AXIS_TP);
}

/* Make each input's layout one n's rule takes (dg_pass_tp.h, 2). */
static int fit_inputs(dg_graph *dst, const dg_node *n, int *in, tp_pass *s) {
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
    if (dg_tp_rule_takes(dst, n, in)) return DG_OK;
    for (int k = 0; k < n->n_in && !dg_tp_rule_takes(dst, n, in); k++) {
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
    if (dg_tp_rule_takes(dst, n, in)) return DG_OK;
    return dg_graph_fail(dst, "tp: no collective makes the inputs' layouts fit the rule of %s", n->op->name);
}

/* The pass's node hook: fit the inputs (dg_pass_tp.h, 2), then the node's
 * table entry when its op has a trait TP handles (3), else a copy. */
static int tp_node(dg_graph *dst, const dg_graph *src, const dg_node *n, int *in, int *out, void *ctx, dg_err *err) {
    tp_pass *s = ctx;
    if (n->group != DG_AXIS_NONE) return DG_REEMIT_COPY; /* a collective: its layouts are set */
    const dg_tp_rewrite *r = NULL;
    if (n->op->traits & DG_TP_TRAITS) {
        for (r = dg_tp_rewrites; r->op && r->op != n->op; r++) {}
        if (!r->op)
            return dg_err_set(err, DG_EINPUT, "--tensor-model-parallel-size: op '%s' (node '%s') has a trait TP "
                              "rewrites and no entry in its table (parallel/tp/dg_tp_rewrites.c)", n->op->name, n->name);
    }
    dg_tp_node tn = {false, s->overlap ? &s->ov : NULL};
    tn.as_is = r && r->takes_as_is && r->takes_as_is(dst, n, in, &tn);
    if (!tn.as_is && fit_inputs(dst, n, in, s) != DG_OK) return dst->status;
    /* a replicated parameter read on a tp slice (SP's sequence, the heads of a q/k norm) */
    if (dg_tp_seq_params(&s->seq, dst, n, in) != DG_OK) return dst->status;
    return r ? r->fn(dst, src, n, in, out, &tn, err) : DG_REEMIT_COPY;
}

int dg_pass_tp(const dg_graph *src, int tp_size, dg_graph **out, int *tmap, dg_err *err) {
    dg_pass_tp_opts o = {tp_size, false, false};
    return dg_pass_tp_run(src, &o, out, tmap, err);
}

int dg_pass_tp_sp(const dg_graph *src, int tp_size, bool sequence_parallel, bool tp_comm_overlap, dg_graph **out,
                  int *tmap, dg_err *err) {
    dg_pass_tp_opts o = {tp_size, sequence_parallel, tp_comm_overlap};
    return dg_pass_tp_run(src, &o, out, tmap, err);
}

int dg_pass_tp_run(const dg_graph *src, const dg_pass_tp_opts *o, dg_graph **out, int *tmap, dg_err *err) {
    *out = NULL;
    int tp_size = o->tp_size;
    if (tp_size < 1)
        return dg_err_set(err, DG_EINPUT, "--tensor-model-parallel-size: expected >= 1, got %d", tp_size);
    tp_pass s = {tp_size, NULL, NULL, 0,
                 o->sequence_parallel && tp_size > 1, {0}, o->sequence_parallel && o->comm_overlap && tp_size > 1,
                 {tp_size, DG_TP_OVERLAP_CHUNKS, 0, NULL}};
    dg_tp_seq_init(&s.seq, tp_size);
    dg_reemit_opts ro = dg_reemit_plain();
    if (tp_size > 1) {
        ro.leaf = tp_leaf;
        ro.node = tp_node;
        ro.ctx = &s;
    }
    int st = dg_reemit_pass(src, DG_AXIS_TP, tp_size, &ro, out, tmap, err);
    dg_free(s.copy_of);
    dg_free(s.reduced_of);
    dg_tp_seq_free(&s.seq);
    dg_free(s.ov.gathered);
    return st;
}
