/* dg_reemit.c — see dg_reemit.h. */
#include "dg_reemit.h"

#include <stdio.h>
#include <string.h>

#include "dg_layout.h"

dg_reemit_opts dg_reemit_plain(void) {
    dg_reemit_opts o;
    memset(&o, 0, sizeof o);
    o.microbatch = DG_REEMIT_KEEP_MICROBATCH;
    return o;
}

int dg_reemit_leaf_shard(dg_graph *dst, const dg_graph *src, int t, dg_axis a, int size, const char *flag) {
    const dg_tensor *x = &src->tensors[t];
    if (x->role != DG_ROLE_PARAMETER || size <= 1) return dg_reemit_leaf_default(dst, src, t, NULL);
    int64_t shape[DG_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    dg_sharding lay = x->sharding;
    for (int d = 0; d < x->ndim; d++) {
        if (x->place.split[d] != a) continue;
        int k = DG_MAX(x->place.stride[d], 1);
        if (shape[d] % ((int64_t)size * k) != 0)
            return dg_graph_fail(dst, "%s %d does not divide dim %d (%lld, %d block(s)) of '%s'", flag, size, d,
                                 (long long)shape[d], k, x->name);
        shape[d] /= size;
        lay.split[d] = (uint8_t)a;
        lay.stride[d] = x->place.stride[d];
    }
    dg_param_spec spec = {(dg_init)x->init, x->place};
    int id = dg_param(dst, x->name, x->ndim, shape, &spec);
    if (id >= 0) dst->tensors[id].sharding = lay;
    return id;
}

int dg_reemit_leaf_default(dg_graph *dst, const dg_graph *src, int t, void *ctx) {
    (void)ctx;
    const dg_tensor *x = &src->tensors[t];
    int id;
    if (x->role == DG_ROLE_PARAMETER) {
        dg_param_spec spec = {(dg_init)x->init, x->place};
        id = dg_param(dst, x->name, x->ndim, x->shape, &spec);
    } else {
        id = dg_tensor_new(dst, x->name, x->dtype, x->ndim, x->shape, x->role);
    }
    if (id >= 0) {
        dst->tensors[id].sharding = x->sharding;
        dst->tensors[id].requires_grad = x->requires_grad;
    }
    return id;
}

/* Map src tensor t into dst, making a leaf on first use. */
static int map_leaf(dg_graph *dst, const dg_graph *src, const dg_reemit_opts *o, int *tmap, int t) {
    if (tmap[t] >= 0) return tmap[t];
    int saved = dst->cur_layer;
    dg_graph_set_layer(dst, src->tensors[t].layer);
    tmap[t] = o->leaf ? o->leaf(dst, src, t, o->ctx) : dg_reemit_leaf_default(dst, src, t, o->ctx);
    dg_graph_set_layer(dst, saved);
    return tmap[t];
}

/* n's attrs for dst's local shapes, and its outputs' layouts: the sharding
 * rule rewrites shape-bearing attrs (reshape dims) from the inputs' layouts
 * and the mesh, with the logical shapes still in the attrs, which is also
 * when the layouts are unambiguous. The rule sees n with its inputs in dst
 * and no outputs yet (rules never read outputs they are not given).
 * Returns 1 when the rule gave layouts. */
static int local_attrs(const dg_graph *dst, const dg_node *n, const int *in, dg_attrs *a,
                       dg_sharding *out) {
    *a = n->attrs;
    if (!n->op->shard) return 0;
    dg_node tmp = *n;
    for (int k = 0; k < n->n_in; k++) tmp.in[k] = in[k];
    for (int j = 0; j < DG_MAX_OUTPUTS; j++) tmp.out[j] = -1;
    dg_sharding lay[DG_MAX_INPUTS];
    for (int k = 0; k < n->n_in; k++) lay[k] = dst->tensors[in[k]].sharding;
    memset(out, 0, sizeof(dg_sharding) * DG_MAX_OUTPUTS);
    dg_attrs b = *a;
    if (n->op->shard(dst, &tmp, lay, out, &b) != DG_OK) return 0;
    *a = b;
    return 1;
}

/* Every split of a (dim and axis) is one of b's, and their partial sums
 * agree: b is a plus the splits a later pass added. */
static int layout_within(const dg_sharding *a, const dg_sharding *b) {
    if (a->partial != b->partial) return 0;
    for (int d = 0; d < DG_MAX_DIMS; d++) {
        int s[2] = {a->split[d], a->split2[d]};
        for (int k = 0; k < 2; k++)
            if (s[k] != DG_AXIS_NONE && b->split[d] != s[k] && b->split2[d] != s[k]) return 0;
    }
    return 1;
}

/* Local shapes can be ambiguous where a split dim is 1 locally (one head
 * per rank: [.., 16] -> [.., 1, 16]): when src is already sharded (a later
 * pass re-emitting it), its recorded layouts say which, so they stay where
 * the rule, told them, agrees (keeping the splits this pass adds: the CP
 * pass splits the sequence of heads the TP pass placed). */
static void keep_recorded(dg_graph *dst, const dg_graph *src, const dg_node *n, dg_node *m, dg_sharding *lay) {
    int differs = 0;
    for (int j = 0; j < n->n_out; j++) differs |= !dg_layout_equal(&lay[j], &src->tensors[n->out[j]].sharding);
    if (!differs) return;
    for (int j = 0; j < m->n_out; j++) dst->tensors[m->out[j]].sharding = src->tensors[n->out[j]].sharding;
    dg_sharding chk[DG_MAX_OUTPUTS];
    if (dg_layout_infer(dst, m, chk, NULL) != DG_OK) return;
    for (int j = 0; j < n->n_out; j++) {
        const dg_sharding *rec = &src->tensors[n->out[j]].sharding;
        if (!layout_within(rec, &chk[j]) || (dg_layout_is_replicated(rec) && !dg_layout_equal(rec, &chk[j]))) return;
    }
    for (int j = 0; j < n->n_out; j++) lay[j] = chk[j];
}

static int copy_node(dg_graph *dst, const dg_graph *src, const dg_node *n, const int *in, int *tmap,
                     dg_err *err) {
    int out[DG_MAX_OUTPUTS];
    dg_attrs attrs = n->attrs;
    dg_sharding lay[DG_MAX_OUTPUTS];
    int have_lay = n->group == DG_AXIS_NONE && local_attrs(dst, n, in, &attrs, lay);
    int first = dg_graph_add(dst, n->op, &attrs, in, n->n_in, out, n->name);
    if (first < 0 && n->n_out > 0)
        return dg_err_set(err, DG_EINTERNAL, "re-emitting node %d '%s': %s", n->id, n->name, dst->err.msg);
    dg_node *m = &dst->nodes[dst->n_nodes - 1];
    m->stream = n->stream;
    m->group = n->group;
    m->priority = n->priority;
    if (n->n_in == 0 && n->n_out > 0) /* a recv: its declared layout (dg_recv_laid_out) */
        dst->tensors[out[0]].sharding = src->tensors[n->out[0]].sharding;
    if (n->group != DG_AXIS_NONE) { /* collectives: the rule needs the axis */
        dg_sharding lay[DG_MAX_OUTPUTS];
        if (dg_layout_infer(dst, m, lay, NULL) == DG_OK)
            for (int j = 0; j < m->n_out; j++) dst->tensors[m->out[j]].sharding = lay[j];
    }
    if (have_lay) keep_recorded(dst, src, n, m, lay);
    for (int j = 0; j < n->n_out; j++) {
        if (have_lay) dst->tensors[out[j]].sharding = lay[j];
        tmap[n->out[j]] = out[j];
        memcpy(dst->tensors[out[j]].name, src->tensors[n->out[j]].name, DG_NAME_LEN);
    }
    return DG_OK;
}

/* src's ordering edges in dst: an edge a -> b becomes (last node emitted
 * for a) -> (first node emitted for b), so a lowered or prefixed node keeps
 * its place in the schedule; one that emitted nothing (shared) drops it. */
static void carry_order(dg_graph *dst, const dg_graph *src, const int *first, const int *last) {
    for (int i = 0; i < src->n_order; i++) {
        int a = src->order[i].before, b = src->order[i].after;
        if (a < 0 || a >= src->n_nodes || b < 0 || b >= src->n_nodes) continue;
        if (last[a] > first[a] && last[b] > first[b]) dg_graph_add_order(dst, last[a] - 1, first[b]);
    }
}

int dg_reemit(dg_graph *dst, const dg_graph *src, const dg_reemit_opts *o, int *tmap, dg_err *err) {
    for (int t = 0; t < src->n_tensors; t++) tmap[t] = o->shared ? o->shared[t] : -1;
    int st = DG_OK;
    /* dst nodes [first[i], last[i]) were emitted for src node i */
    int *first = dg_calloc((size_t)DG_MAX(src->n_nodes, 1), sizeof(int));
    int *last = dg_calloc((size_t)DG_MAX(src->n_nodes, 1), sizeof(int));
    /* Leaves first, in src's order: parameters keep the builder's order
     * (which seeds their init streams), wherever their first reader is. */
    for (int t = 0; t < src->n_tensors && st == DG_OK; t++)
        if (src->tensors[t].producer < 0 && map_leaf(dst, src, o, tmap, t) < 0)
            st = dg_err_set(err, DG_EINPUT, "re-emitting leaf '%s': %s", src->tensors[t].name, dst->err.msg);
    for (int i = 0; i < src->n_nodes && st == DG_OK; i++) {
        const dg_node *n = &src->nodes[i];
        int emitted = !o->shared || n->n_out == 0;
        for (int j = 0; j < n->n_out && !emitted; j++) emitted = o->shared[n->out[j]] < 0;
        if (!emitted) { /* dst has its outputs: nothing emitted, no ordering edge carried */
            first[i] = last[i] = dst->n_nodes;
            continue;
        }
        int in[DG_MAX_INPUTS];
        for (int k = 0; k < n->n_in; k++) {
            int t = n->in[k];
            in[k] = src->tensors[t].producer < 0 ? map_leaf(dst, src, o, tmap, t) : tmap[t];
            if (in[k] < 0) {
                dg_free(first);
                dg_free(last);
                return dg_err_set(err, dst->status != DG_OK ? dst->status : DG_EINTERNAL,
                                  "re-emitting node %d '%s': input %d: %s", n->id, n->name, k,
                                  dst->status != DG_OK ? dst->err.msg : "not emitted before its consumer");
            }
        }
        dg_graph_set_phase(dst, n->phase);
        dg_graph_set_layer(dst, n->layer);
        dg_graph_set_stage(dst, n->stage);
        dg_graph_set_microbatch(dst, o->microbatch == DG_REEMIT_KEEP_MICROBATCH ? n->microbatch : o->microbatch);
        dg_graph_set_module(dst, n->module);
        first[i] = dst->n_nodes;
        int out[DG_MAX_OUTPUTS];
        dg_err e = {{0}};
        st = o->node ? o->node(dst, src, n, in, out, o->ctx, &e) : DG_REEMIT_COPY;
        if (st == DG_OK) {
            for (int j = 0; j < n->n_out; j++) tmap[n->out[j]] = out[j];
        } else if (st == DG_REEMIT_COPY) {
            st = copy_node(dst, src, n, in, tmap, err);
            /* a backward or recompute node keeps naming its forward node */
            if (st == DG_OK && n->fwd_node >= 0 && n->fwd_node < i && last[n->fwd_node] > first[n->fwd_node])
                dst->nodes[dst->n_nodes - 1].fwd_node = last[n->fwd_node] - 1;
        } else if (e.msg[0]) {
            *err = e;
        } else {
            dg_err_set(err, st, "re-emitting node %d '%s': %s", n->id, n->name, dst->err.msg);
        }
        if (st != DG_OK) break;
        last[i] = dst->n_nodes;
    }
    if (st == DG_OK) carry_order(dst, src, first, last);
    dg_free(first);
    dg_free(last);
    dg_graph_set_module(dst, 0);
    dg_graph_set_microbatch(dst, -1);
    dg_graph_set_layer(dst, -1);
    dg_graph_set_phase(dst, DG_PHASE_FORWARD);
    if (st == DG_OK && dst->status != DG_OK) st = dg_err_set(err, dst->status, "%s", dst->err.msg);
    return st;
}

int dg_reemit_pass(const dg_graph *src, dg_axis axis, int size, const dg_reemit_opts *o, dg_graph **out, int *tmap,
                   dg_err *err) {
    dg_graph *g = dg_graph_new(src->name);
    memcpy(g->mesh, src->mesh, sizeof g->mesh);
    g->mesh[axis] = size;
    int st = dg_reemit(g, src, o, tmap, err);
    if (st != DG_OK) {
        dg_graph_free(g);
        g = NULL;
    }
    *out = g;
    return st;
}
