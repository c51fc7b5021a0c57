/* dg_pass_dp.c — see dg_pass_dp.h. */
#include "dg_pass_dp.h"

#include <stdio.h>
#include <string.h>

#include "dg_collective.h"
#include "dg_layout.h"

typedef struct ready_param {
    int param;
    int depth; /* its gradient producer's depth (node_depths) */
    int pos;   /* position of its gradient's producer in the topological order */
} ready_param;

/* depth[v]: 1 + the largest depth among v's data predecessors, 1 at a
 * source; `order` is a topological order. Data edges only: ordering edges
 * differ between schedules (PP's 1F1B, zero-bubble), and buckets must not,
 * or the gradient norm would sum in a different order under each. */
static int *node_depths(const dg_graph *g, const int *order) {
    int nn = g->n_nodes;
    int *depth = dg_calloc((size_t)DG_MAX(nn, 1), sizeof(int));
    for (int k = 0; k < nn; k++) {
        int v = order[k], d = 0;
        const dg_node *n = &g->nodes[v];
        for (int j = 0; j < n->n_in; j++) {
            int p = g->tensors[n->in[j]].producer;
            if (p >= 0) d = DG_MAX(d, depth[p]);
        }
        depth[v] = d + 1;
    }
    return depth;
}

static int by_pos(const void *a, const void *b) {
    const ready_param *x = a, *y = b;
    if (x->depth != y->depth) return x->depth < y->depth ? -1 : 1;
    if (x->pos != y->pos) return x->pos < y->pos ? -1 : 1;
    return (x->param > y->param) - (x->param < y->param);
}

/* The options, and what step 5 (no overlap) needs. */
typedef struct dp_pass {
    const dg_dp_opts *o;
    int n_before; /* nodes in the graph before the pass */
} dp_pass;

/* The node that produced t belongs to the step's backward, outside any
 * micro-batch. */
static void in_backward(dg_graph *g, int t) {
    dg_node *n = dg_N(g, g->tensors[t].producer);
    n->phase = DG_PHASE_BACKWARD;
    n->microbatch = -1;
}

static int emit(dg_graph *g, const dp_pass *pp, dg_dp_bucket *b, int index, dg_err *err) {
    const dg_dp_opts *o = pp->o;
    int gs = b->group_size;
    b->padded = o->reduce_scatter ? (b->numel + gs - 1) / gs * gs : b->numel;
    b->shard = o->reduce_scatter ? b->padded / gs : b->padded;
    b->packed = b->reduced = b->pack_node = b->comm_node = -1;
    b->master = b->gathered = b->gather_node = -1;
    if (o->layout_only) return DG_OK;
    /* A pack node reads at most DG_MAX_INPUTS tensors: a bucket with more
     * parameters is packed in two levels (segments of DG_MAX_INPUTS
     * gradients, then the segments), one extra copy of its bytes. */
    int in[DG_MAX_INPUTS], n_in = 0;
    char name[DG_NAME_LEN];
    dg_attrs a;
    memset(&a, 0, sizeof a);
    int nseg = (b->n_params + DG_MAX_INPUTS - 1) / DG_MAX_INPUTS;
    for (int sgi = 0; sgi < nseg; sgi++) {
        int k0 = sgi * DG_MAX_INPUTS, k1 = DG_MIN(b->n_params, k0 + DG_MAX_INPUTS);
        int seg[DG_MAX_INPUTS];
        for (int k = k0; k < k1; k++) seg[k - k0] = g->tensors[b->params[k]].grad;
        if (nseg == 1) {
            memcpy(in, seg, sizeof(int) * (size_t)(k1 - k0));
            n_in = k1 - k0;
            break;
        }
        a.i[0] = (k1 < b->n_params ? b->offset[k1] : b->numel) - b->offset[k0];
        snprintf(name, sizeof name, "dp_bucket%d/pack_segment%d", index, sgi);
        in[n_in] = dg_graph_add(g, o->pack, &a, seg, k1 - k0, NULL, name);
        if (in[n_in] < 0) return dg_err_set(err, DG_EINTERNAL, "dp pass: %s", g->err.msg);
        dg_node *sn = dg_N(g, g->tensors[in[n_in++]].producer);
        sn->phase = DG_PHASE_BACKWARD;
        sn->microbatch = -1;
    }
    a.i[0] = b->padded;
    snprintf(name, sizeof name, "dp_bucket%d/pack", index);
    b->packed = dg_graph_add(g, o->pack, &a, in, n_in, NULL, name);
    if (b->packed < 0) return dg_err_set(err, DG_EINTERNAL, "dp pass: %s", g->err.msg);
    b->pack_node = g->tensors[b->packed].producer;
    /* A bucket whose shape splits over the group carries the group's axis in
     * its sharding descriptor once reduce-scattered (dg_reduce_scatter). */
    int send = b->packed;
    if (o->cast) { /* --grad-reduce-in-bf16 */
        snprintf(name, sizeof name, "dp_bucket%d/to_bf16", index);
        send = dg_graph_add(g, o->cast, &(dg_attrs){.i = {DG_BF16}}, &b->packed, 1, NULL, name);
        if (send < 0) return dg_err_set(err, DG_EINTERNAL, "dp pass: %s", g->err.msg);
        in_backward(g, send);
    }
    b->reduced = o->reduce_scatter ? dg_reduce_scatter(g, send, b->axis, gs, 0) : dg_all_reduce(g, send, b->axis, gs);
    if (b->reduced < 0) return dg_err_set(err, DG_EINTERNAL, "dp pass: %s", g->err.msg);
    b->comm_node = g->tensors[b->reduced].producer;
    dg_node *cn = dg_N(g, b->comm_node);
    snprintf(cn->name, sizeof cn->name, "dp_bucket%d/%s", index,
             o->reduce_scatter ? "reduce_scatter" : "all_reduce");
    /* They belong to backward: they finish the step's gradients. */
    in_backward(g, b->packed);
    in_backward(g, b->reduced);
    if (o->cast) {
        snprintf(name, sizeof name, "dp_bucket%d/to_f32", index);
        int back = dg_graph_add(g, o->cast, &(dg_attrs){.i = {DG_F32}}, &b->reduced, 1, NULL, name);
        if (back < 0) return dg_err_set(err, DG_EINTERNAL, "dp pass: %s", g->err.msg);
        g->tensors[back].sharding = g->tensors[b->reduced].sharding;
        in_backward(g, back);
        b->reduced = back;
    }
    return DG_OK;
}

/* Bucket b's parameter gather: master shard -> all_gather -> unpack into
 * each parameter, which the unpack node then produces. */
static int emit_gather(dg_graph *g, const dg_dp_opts *o, dg_dp_bucket *b, int index, dg_err *err) {
    char name[DG_NAME_LEN];
    snprintf(name, sizeof name, "dp_bucket%d/master_shard", index);
    b->master = dg_tensor_new(g, name, DG_F32, 1, (int64_t[]){b->shard}, DG_ROLE_OPTIMIZER);
    dg_graph_set_phase(g, DG_PHASE_FORWARD);
    b->gathered = b->master >= 0 ? dg_all_gather(g, b->master, b->axis, b->group_size, 0) : -1;
    if (b->gathered < 0) return dg_err_set(err, DG_EINTERNAL, "dp pass: %s", g->err.msg);
    b->gather_node = g->tensors[b->gathered].producer;
    dg_node *gn = dg_N(g, b->gather_node);
    snprintf(gn->name, sizeof gn->name, "dp_bucket%d/param_all_gather", index);
    gn->microbatch = gn->layer = -1;
    for (int k = 0; k < b->n_params; k++) {
        dg_tensor *p = dg_T(g, b->params[k]);
        dg_attrs a;
        memset(&a, 0, sizeof a);
        a.i[0] = b->offset[k];
        a.i[1] = p->ndim;
        for (int d = 0; d < p->ndim; d++) a.i[2 + d] = p->shape[d];
        snprintf(name, sizeof name, "dp_bucket%d/unpack%d", index, k);
        int nid = dg_graph_add_raw(g, o->unpack, &a, &b->gathered, 1, &b->params[k], 1, name);
        dg_node *un = dg_N(g, nid);
        un->phase = DG_PHASE_FORWARD;
        un->microbatch = -1;
        un->layer = p->layer;
    }
    return DG_OK;
}

/* The nodes that start bucket b: its segment packs, or its pack. */
static int entry_nodes(const dg_graph *g, const dg_dp_bucket *b, int *ids) {
    const dg_node *pn = &g->nodes[b->pack_node];
    int n = 0;
    for (int k = 0; k < pn->n_in; k++) {
        int p = g->tensors[pn->in[k]].producer;
        if (p >= 0 && g->nodes[p].op == pn->op) ids[n++] = p; /* a segment pack */
    }
    if (n == 0) ids[n++] = b->pack_node;
    return n;
}

/* Step 5: ordering edges from every node that ends the graph as it was
 * before the pass (its sinks: nothing read their outputs or waited for them)
 * to the first bucket's entry nodes, and from each bucket's pack to the next
 * bucket's entry nodes. So every pack, hence every collective, starts after
 * all of forward and backward, in bucket order, as Megatron reduces after
 * backward without --overlap-grad-reduce. A sink whose output the entry node
 * reads already precedes it and gets no edge. */
static int order_after_backward(dg_graph *g, const dp_pass *pp, const dg_dp_buckets *out, dg_err *err) {
    int n0 = pp->n_before;
    char *has_succ = dg_calloc((size_t)DG_MAX(n0, 1), 1);
    for (int v = 0; v < n0; v++)
        for (int k = 0; k < g->nodes[v].n_in; k++) {
            int p = g->tensors[g->nodes[v].in[k]].producer;
            if (p >= 0 && p < n0) has_succ[p] = 1;
        }
    for (int i = 0; i < g->n_order; i++)
        if (g->order[i].before < n0 && g->order[i].after < n0) has_succ[g->order[i].before] = 1;
    int ids[DG_MAX_INPUTS];
    for (int i = 0; i < out->n; i++) {
        int ne = entry_nodes(g, &out->b[i], ids);
        for (int j = 0; j < ne; j++) {
            if (i > 0) {
                dg_graph_add_order(g, out->b[i - 1].pack_node, ids[j]);
                continue;
            }
            const dg_node *en = &g->nodes[ids[j]];
            for (int v = 0; v < n0; v++) {
                if (has_succ[v]) continue;
                int reads = 0;
                for (int k = 0; k < en->n_in; k++) reads |= g->tensors[en->in[k]].producer == v;
                if (!reads) dg_graph_add_order(g, v, ids[j]);
            }
        }
    }
    dg_free(has_succ);
    if (g->status != DG_OK) return dg_err_set(err, DG_EINTERNAL, "dp pass: %s", g->err.msg);
    return DG_OK;
}

int dg_pass_dp(dg_graph *g, const dg_dp_opts *opts, dg_dp_buckets *out, dg_err *err) {
    return dg_pass_dp_skip(g, opts, NULL, 0, out, err);
}

int dg_pass_dp_skip(dg_graph *g, const dg_dp_opts *opts, const int *norm_skip, int n_norm_skip, dg_dp_buckets *out,
                    dg_err *err) {
    memset(out, 0, sizeof *out);
    const dg_dp_opts *o = opts;
    dp_pass pp = {opts, g->n_nodes};
    out->reduce_scatter = o->reduce_scatter;
    if (o->bucket_elems < 1 || o->dp_size < 1 || o->edp_size < 1 || (!o->pack && !o->layout_only))
        return dg_err_set(err, DG_EINTERNAL, "dp pass: bad options");
    int nt = g->n_tensors, nn = g->n_nodes;
    int *order = dg_malloc(sizeof(int) * (size_t)DG_MAX(nn, 1));
    int *pos = dg_malloc(sizeof(int) * (size_t)DG_MAX(nn, 1));
    ready_param *rp = dg_malloc(sizeof *rp * (size_t)DG_MAX(nt, 1));
    int st = dg_graph_topo_order(g, order, err), np = 0;

    /* 1. The parameters, in the order their gradients become final: by the
     * depth of the gradient's producer (the most nodes on a data path to it
     * from the graph's sources), then by its place
     * in the topological order. Depth, not the topological place alone: a
     * weight gradient can run anywhere after its inputs, and the
     * topological order may list layer 0's before layer 3's although
     * backward reaches layer 3 first. */
    for (int k = 0; st == DG_OK && k < nn; k++) pos[order[k]] = k;
    /* (Depth only where there is a group to reduce over, with overlap or
     * without: the same buckets either way, so the gradient norm sums in
     * the same order and the overlap changes when, never what. A single
     * rank's layout-only buckets keep the place alone.) */
    int *depth = st == DG_OK ? node_depths(g, order) : NULL;
    for (int v = 0; depth && o->layout_only && v < nn; v++) depth[v] = 0;
    for (int t = 0; st == DG_OK && t < nt; t++) {
        const dg_tensor *p = &g->tensors[t];
        if (p->role != DG_ROLE_PARAMETER) continue;
        if (p->grad < 0 || g->tensors[p->grad].producer < 0)
            st = dg_err_set(err, DG_EINTERNAL, "dp pass: parameter '%s' has no gradient", p->name);
        else if (p->dtype != DG_F32 || g->tensors[p->grad].dtype != DG_F32)
            st = dg_err_set(err, DG_EINTERNAL, "dp pass: parameter '%s' is not f32", p->name);
        else
            rp[np++] = (ready_param){t, depth[g->tensors[p->grad].producer], pos[g->tensors[p->grad].producer]};
    }
    qsort(rp, (size_t)np, sizeof *rp, by_pos);
    dg_free(depth);

    /* 2. Buckets: one open bucket per class (dense, dense split over tp,
     * expert, expert split over tp), closed at the size limit or the input limit; then the open
     * ones, in the same order of readiness (by their last parameter). Dense
     * weights split over tp and those replicated over it go to different
     * buckets because the gradient norm sums a bucket's squares over the
     * group its pieces differ on (graph/passes/dg_pass_optim.h): tp for the
     * split ones, no group for the replicated ones; so do expert parameters
     * split over tp (ETP = TP) and those whole over it (fc2's bias). */
    out->b = dg_calloc((size_t)DG_MAX(np, 1), sizeof *out->b);
    dg_dp_bucket open[4];
    memset(open, 0, sizeof open);
    int last_pos[4] = {-1, -1, -1, -1};
    for (int i = 0; st == DG_OK && i < np; i++) {
        const dg_tensor *p = &g->tensors[rp[i].param];
        int skip = 0;
        for (int k = 0; k < n_norm_skip; k++) skip |= norm_skip[k] == rp[i].param;
        if (skip) { /* a bucket of its own, which the norm leaves out */
            dg_dp_bucket *b = &out->b[out->n++];
            memset(b, 0, sizeof *b);
            *b = (dg_dp_bucket){.axis = DG_AXIS_DP, .group_size = o->dp_size, .n_params = 1, .norm_skip = 1};
            b->params[0] = rp[i].param;
            b->numel = dg_tensor_numel(p);
            continue;
        }
        int e = dg_param_is_expert(p);
        int c = e ? 2 + dg_layout_split_over(&p->sharding, p->ndim, DG_AXIS_TP)
                  : dg_layout_has_model_axis(&p->sharding, p->ndim);
        dg_dp_bucket *b = &open[c];
        b->axis = e ? DG_AXIS_EDP : DG_AXIS_DP;
        b->group_size = e ? o->edp_size : o->dp_size;
        b->params[b->n_params] = rp[i].param;
        b->offset[b->n_params++] = b->numel;
        b->numel += dg_tensor_numel(p);
        last_pos[c] = i; /* rp is in order of readiness */
        if (b->numel >= o->bucket_elems || b->n_params == DG_DP_MAX_PARAMS) {
            out->b[out->n++] = *b;
            memset(b, 0, sizeof *b);
        }
    }
    for (int k = 0; k < 4; k++) { /* the open ones by readiness; ties: dense, split, expert, expert split */
        int best = -1;
        for (int c = 0; c < 4; c++)
            if (open[c].n_params > 0 && (best < 0 || last_pos[c] < last_pos[best])) best = c;
        if (best < 0) break;
        out->b[out->n++] = open[best];
        open[best].n_params = 0;
    }

    /* 3. Each bucket's pack and collective nodes (unless layout only). */
    for (int i = 0; st == DG_OK && i < out->n; i++) st = emit(g, &pp, &out->b[i], i, err);

    /* 4. The parameter gathers (distributed optimizer, overlapped). */
    if (st == DG_OK && o->param_gather && o->reduce_scatter && !o->layout_only) {
        if (!o->unpack) st = dg_err_set(err, DG_EINTERNAL, "dp pass: param_gather needs an unpack op");
        dg_phase saved = g->cur_phase;
        for (int i = 0; st == DG_OK && i < out->n; i++) st = emit_gather(g, o, &out->b[i], i, err);
        dg_graph_set_phase(g, saved);
    }

    /* 5. Without overlap, the reductions wait for the end of backward. With
     * it, they still go in bucket order, the order their gradients become
     * final (see dg_pass_dp.h). */
    if (st == DG_OK && !o->overlap && !o->layout_only) st = order_after_backward(g, &pp, out, err);
    for (int i = 1; st == DG_OK && o->overlap && !o->layout_only && i < out->n; i++)
        if (dg_graph_add_order(g, out->b[i - 1].comm_node, out->b[i].comm_node) < 0)
            st = dg_err_set(err, DG_EINTERNAL, "dp pass: %s", g->err.msg);
    dg_free(order);
    dg_free(pos);
    dg_free(rp);
    if (st != DG_OK) dg_dp_buckets_free(out);
    return st;
}

void dg_dp_buckets_free(dg_dp_buckets *b) {
    dg_free(b->b);
    memset(b, 0, sizeof *b);
}
