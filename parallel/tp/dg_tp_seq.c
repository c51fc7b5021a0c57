/* dg_tp_seq.c — sequence parallelism in the TP pass (see dg_tp_seq.h). */
#include "dg_tp_seq.h"

#include <string.h>

#include "dg_collective.h"
#include "dg_layout.h"

void dg_tp_seq_init(dg_tp_seq *s, int tp) {
    memset(s, 0, sizeof *s);
    s->tp = tp;
}

void dg_tp_seq_free(dg_tp_seq *s) {
    dg_free(s->gathered);
    dg_free(s->scattered);
    dg_free(s->param_copy);
    memset(s, 0, sizeof *s);
}

static void grow(dg_tp_seq *s, int n) {
    if (n <= s->cap) return;
    int cap = DG_MAX(2 * s->cap, n + 64);
    s->gathered = dg_realloc(s->gathered, sizeof(int) * (size_t)cap);
    s->scattered = dg_realloc(s->scattered, sizeof(int) * (size_t)cap);
    s->param_copy = dg_realloc(s->param_copy, sizeof(int) * (size_t)cap);
    for (int i = s->cap; i < cap; i++) s->gathered[i] = s->scattered[i] = s->param_copy[i] = -1;
    s->cap = cap;
}

bool dg_tp_coord_form(const dg_node *n) { return (n->op->traits & DG_TRAIT_RANDOM) != 0; }

int dg_tp_rule_on(const dg_graph *dst, const dg_node *n, const int *in, dg_sharding *lay, dg_sharding *out) {
    dg_node tmp = *n;
    for (int k = 0; k < n->n_in; k++) tmp.in[k] = in[k];
    for (int j = 0; j < DG_MAX_OUTPUTS; j++) tmp.out[j] = -1;
    memset(out, 0, sizeof(dg_sharding) * DG_MAX_OUTPUTS);
    dg_attrs a = n->attrs;
    if (dg_tp_coord_form(n) && n->n_in == 2) {
        tmp.n_in = 3;
        tmp.in[2] = in[1];
        memset(&lay[2], 0, sizeof lay[2]);
        a.i[1] = DG_AXIS_TP;
    }
    if (n->op->shard) return n->op->shard(dst, &tmp, lay, out, &a);
    return dg_shard_replicated(dst, &tmp, lay, out, &a);
}

int dg_tp_rule_takes(const dg_graph *dst, const dg_node *n, const int *in) {
    dg_sharding lay[DG_MAX_INPUTS], out[DG_MAX_OUTPUTS];
    for (int k = 0; k < n->n_in; k++) lay[k] = dst->tensors[in[k]].sharding;
    return dg_tp_rule_on(dst, n, in, lay, out) == DG_OK;
}

/* A [B, S, H] activation: what SP splits on the sequence. */
static bool is_stream(const dg_tensor *t) {
    return t->role == DG_ROLE_ACTIVATION && dg_dtype_is_float(t->dtype) && t->ndim == 3;
}

static bool seq_split(const dg_tensor *t) {
    return is_stream(t) && t->sharding.split[DG_TP_SEQ_DIM] == DG_AXIS_TP && t->sharding.split2[DG_TP_SEQ_DIM] == DG_AXIS_NONE;
}

/* The collective that splits x on the sequence (memoised per tensor). */
static int memo(dg_graph *dst, int *slot, int x, const dg_op_def *op, int tp) {
    if (*slot >= 0) return *slot;
    if (op == &dg_op_reduce_scatter) *slot = dg_reduce_scatter(dst, x, DG_AXIS_TP, tp, DG_TP_SEQ_DIM);
    else *slot = dg_scatter_to_group(dst, x, DG_AXIS_TP, tp, DG_TP_SEQ_DIM);
    /* the collective belongs to its input's layer, not the first reader's:
     * behind the embedding (a scatter, or the vocab-parallel lookup's
     * reduce-scatter) it opens the SP region outside the layers */
    int p = *slot >= 0 ? dst->tensors[*slot].producer : -1, q = dst->tensors[x].producer;
    if (p >= 0 && q >= 0) dst->nodes[p].layer = dst->nodes[q].layer;
    return *slot;
}

int dg_tp_seq_inputs(dg_tp_seq *s, dg_graph *dst, const dg_node *n, int *in, bool whole_linear) {
    grow(s, dst->n_tensors);
    if (n->op->traits & DG_TRAIT_LINEAR) { /* linears never scatter: they gather or run on the slice */
        int x = in[0], *slot = &s->gathered[x];
        if (!whole_linear || !seq_split(&dst->tensors[x])) return DG_OK;
        /* the weight is split over tp, so the input's gradient is partial:
         * the gather's adjoint reduce-scatters it (no copy_to_group) */
        if (*slot < 0) *slot = dg_all_gather(dst, x, DG_AXIS_TP, s->tp, DG_TP_SEQ_DIM);
        return (in[0] = *slot) < 0 ? dst->status : DG_OK;
    }
    /* which inputs would take the sequence split, and does the rule take it? */
    const dg_op_def *fix[DG_MAX_INPUTS] = {0};
    dg_sharding lay[DG_MAX_INPUTS], out[DG_MAX_OUTPUTS];
    int n_fix = 0;
    for (int k = 0; k < n->n_in; k++) {
        const dg_tensor *x = &dst->tensors[in[k]];
        lay[k] = x->sharding;
        if (!is_stream(x) || dg_layout_dim_split(&x->sharding, DG_TP_SEQ_DIM)) continue;
        if (x->sharding.partial == DG_AXIS_TP) fix[k] = &dg_op_reduce_scatter;
        else if (dg_layout_is_replicated(&x->sharding)) fix[k] = &dg_op_scatter_to_group;
        else continue;
        lay[k].partial = DG_AXIS_NONE;
        lay[k].split[DG_TP_SEQ_DIM] = DG_AXIS_TP;
        n_fix++;
    }
    if (!n_fix || dg_tp_rule_on(dst, n, in, lay, out) != DG_OK) return DG_OK; /* the TP rules decide */
    for (int k = 0; k < n->n_in; k++) {
        if (!fix[k]) continue;
        /* a tensor is either partial or replicated: one memo for both */
        if ((in[k] = memo(dst, &s->scattered[in[k]], in[k], fix[k], s->tp)) < 0) return dst->status;
        grow(s, dst->n_tensors);
    }
    return DG_OK;
}

int dg_tp_seq_params(dg_tp_seq *s, dg_graph *dst, const dg_node *n, int *in) {
    dg_sharding lay[DG_MAX_INPUTS], out[DG_MAX_OUTPUTS];
    for (int k = 0; k < n->n_in; k++) lay[k] = dst->tensors[in[k]].sharding;
    if (n->n_out < 1 || dg_tp_rule_on(dst, n, in, lay, out) != DG_OK) return DG_OK;
    for (int k = 0; k < n->n_in; k++) {
        if (!dg_param_grad_partial(&dst->tensors[in[k]], &out[0], DG_MAX_DIMS, DG_AXIS_TP)) continue;
        grow(s, dst->n_tensors);
        int *slot = &s->param_copy[in[k]];
        if (*slot < 0) *slot = dg_copy_to_group(dst, in[k], DG_AXIS_TP, s->tp);
        if ((in[k] = *slot) < 0) return dst->status;
    }
    return DG_OK;
}
