/* dg_pass_optim.c — see dg_pass_optim.h. */
#include "dg_pass_optim.h"

#include <stdio.h>
#include <string.h>

#include "dg_collective.h"

int dg_optim_decays(const dg_tensor *p) { return !(p->ndim == 1 || strstr(p->name, ".bias")); }

/* Where the pass is. */
typedef struct optim_pass {
    dg_graph *g;
    const dg_optim_opts *o;
    dg_optim *out;
    int first_node;         /* the pass's nodes are first_node .. */
    int n_partial;
    int *partial;           /* sum-of-squares tensors [1] */
    unsigned *partial_mask; /* the axes (bits) each is summed over */
    int n_updated;
    int *updated;           /* leaves written in place */
    dg_err *err;
} optim_pass;

static int builder_failed(optim_pass *s) {
    return dg_err_set(s->err, DG_EINTERNAL, "optim pass: %s", s->g->err.msg);
}

/* Add a node and return its first output (or -1; the builder error stays in g). */
static int add(optim_pass *s, const dg_op_def *op, const dg_attrs *a, const int *in, int n_in,
               const char *name) {
    return dg_graph_add(s->g, op, a, in, n_in, NULL, name);
}

static int group_size(const dg_optim_opts *o, dg_axis a) {
    return a == DG_AXIS_NONE ? 1 : o->group_size[a];
}

/* The axes over which bucket b's gradient pieces differ (dg_pass_optim.h,
 * 1), as a bit set; {EDP, EP} is DP's group. */
static unsigned norm_mask(const optim_pass *s, const dg_dp_bucket *b) {
    unsigned set = 0;
    if (s->o->buckets->reduce_scatter && b->group_size > 1) set |= 1u << b->axis;
    for (int k = 0; k < b->n_params; k++) {
        const dg_tensor *p = dg_Tc(s->g, b->params[k]);
        for (int d = 0; d < p->ndim; d++)
            if (p->sharding.split[d] != DG_AXIS_NONE && group_size(s->o, p->sharding.split[d]) > 1)
                set |= 1u << p->sharding.split[d];
    }
    const unsigned edp_ep = (1u << DG_AXIS_EDP) | (1u << DG_AXIS_EP);
    /* EDP x EP is DP's group unless EDP spans tp too (ETP 1, dg_grid.h) */
    if ((set & edp_ep) == edp_ep &&
        group_size(s->o, DG_AXIS_EDP) * group_size(s->o, DG_AXIS_EP) == group_size(s->o, DG_AXIS_DP))
        set = (set & ~edp_ep) | (1u << DG_AXIS_DP);
    return set;
}

/* 1a. Bucket i's partial sums of squares. */
static int bucket_partials(optim_pass *s, const dg_dp_bucket *b, int i) {
    if (b->norm_skip) return DG_OK; /* counted on another pipeline stage */
    unsigned mask = norm_mask(s, b);
    dg_attrs a;
    memset(&a, 0, sizeof a);
    a.f[0] = s->o->grad_scale;
    char name[DG_NAME_LEN];
    int in[DG_MAX_INPUTS];
    /* The reduced bucket, or (a world of one) the gradients, 8 at a time. */
    for (int k0 = 0; k0 < (b->reduced >= 0 ? 1 : b->n_params); k0 += DG_MAX_INPUTS) {
        int n_in = 0;
        if (b->reduced >= 0) in[n_in++] = b->reduced;
        for (int k = k0; b->reduced < 0 && k < b->n_params && n_in < DG_MAX_INPUTS; k++)
            in[n_in++] = dg_Tc(s->g, b->params[k])->grad;
        snprintf(name, sizeof name, "optim/bucket%d/sumsq%d", i, k0 / DG_MAX_INPUTS);
        int t = add(s, s->o->ops.sumsq, &a, in, n_in, name);
        if (t < 0) return builder_failed(s);
        s->partial[s->n_partial] = t;
        s->partial_mask[s->n_partial++] = mask;
    }
    return DG_OK;
}

/* Sum of tensors xs[0..n) (f64) with optim_sum nodes of at most
 * DG_MAX_INPUTS inputs, chained in order. */
static int sum_all(optim_pass *s, const int *xs, int n, const char *name) {
    int acc = -1, in[DG_MAX_INPUTS];
    for (int k = 0; k < n;) {
        int n_in = 0;
        if (acc >= 0) in[n_in++] = acc;
        while (k < n && n_in < DG_MAX_INPUTS) in[n_in++] = xs[k++];
        acc = add(s, s->o->ops.sum, &(dg_attrs){{0}, {0}}, in, n_in, name);
        if (acc < 0) return -1;
    }
    return acc;
}

/* 1b. The total: per set of axes, local sum -> for each axis in order,
 * all-gather -> sum in rank order; then the sets' totals in the order of
 * their bits. Returns the tensor, or -1. */
static int norm_total(optim_pass *s) {
    int *xs = dg_malloc(sizeof(int) * (size_t)DG_MAX(s->n_partial, 1));
    int *totals = dg_malloc(sizeof(int) * (size_t)DG_MAX(s->n_partial, 1)), nt = 0;
    char name[DG_NAME_LEN];
    for (unsigned m = 0, next = 0; nt >= 0; m = next) {
        int n = 0;
        next = ~0u;
        for (int k = 0; k < s->n_partial; k++) {
            if (s->partial_mask[k] == m) xs[n++] = s->partial[k];
            if (s->partial_mask[k] > m && s->partial_mask[k] < next) next = s->partial_mask[k];
        }
        if (n > 0) {
            int one = m && !(m & (m - 1)) ? __builtin_ctz(m) : (m ? -1 : DG_AXIS_NONE);
            if (one >= 0) snprintf(name, sizeof name, "optim/norm/%s/sum", dg_axis_name((dg_axis)one));
            else snprintf(name, sizeof name, "optim/norm/0x%x/sum", m);
            int t = sum_all(s, xs, n, name);
            for (int a = 1; a < DG_AXIS_COUNT && t >= 0; a++) {
                int gs = group_size(s->o, (dg_axis)a);
                if (!(m & (1u << a)) || gs <= 1) continue;
                int all = dg_all_gather(s->g, t, (dg_axis)a, gs, 0);
                if (all >= 0)
                    snprintf(dg_N(s->g, dg_Tc(s->g, all)->producer)->name, DG_NAME_LEN, "optim/norm/%s/all_gather",
                             dg_axis_name((dg_axis)a));
                snprintf(name, sizeof name, "optim/norm/%s/ranks_sum", dg_axis_name((dg_axis)a));
                t = all >= 0 ? sum_all(s, &all, 1, name) : -1;
            }
            totals[nt++] = t;
            if (t < 0) nt = -1;
        }
        if (next == ~0u) break;
    }
    int total = nt <= 0 ? -1 : nt == 1 ? totals[0] : sum_all(s, totals, nt, "optim/norm/total");
    dg_free(xs);
    dg_free(totals);
    return total;
}

/* 3-4. Bucket i's AdamW nodes, and the gather of its updated master shard
 * back into the parameters when the DP pass does not do it next step. */
static int bucket_update(optim_pass *s, const dg_dp_bucket *b, int i) {
    const dg_optim_opts *o = s->o;
    dg_graph *g = s->g;
    dg_optim_bucket *ob = &s->out->b[i];
    int dist = o->buckets->reduce_scatter;
    char name[DG_NAME_LEN];
    ob->shard_axis = dist && b->group_size > 1 ? b->axis : DG_AXIS_NONE;
    snprintf(name, sizeof name, "optim/bucket%d/exp_avg", i);
    ob->exp_avg = dg_tensor_new(g, name, DG_F32, 1, DG_SHAPE(b->shard), DG_ROLE_OPTIMIZER);
    snprintf(name, sizeof name, "optim/bucket%d/exp_avg_sq", i);
    ob->exp_avg_sq = dg_tensor_new(g, name, DG_F32, 1, DG_SHAPE(b->shard), DG_ROLE_OPTIMIZER);
    ob->master = b->master;
    if (dist && ob->master < 0) {
        snprintf(name, sizeof name, "optim/bucket%d/master", i);
        ob->master = dg_tensor_new(g, name, DG_F32, 1, DG_SHAPE(b->shard), DG_ROLE_OPTIMIZER);
    }
    if (ob->exp_avg < 0 || ob->exp_avg_sq < 0 || (dist && ob->master < 0)) return builder_failed(s);
    s->updated[s->n_updated++] = ob->exp_avg;
    s->updated[s->n_updated++] = ob->exp_avg_sq;
    if (dist) s->updated[s->n_updated++] = ob->master;
    int prev = -1;
    for (int k = 0; k < b->n_params; k++) {
        const dg_tensor *p = dg_Tc(g, b->params[k]);
        dg_attrs a;
        memset(&a, 0, sizeof a);
        a.i[0] = b->offset[k];
        a.i[1] = dg_tensor_numel(p);
        a.i[2] = b->shard;
        a.i[3] = ob->shard_axis;
        a.i[4] = b->reduced >= 0;
        a.i[5] = dist;
        a.f[0] = o->grad_scale;
        a.f[1] = o->beta1;
        a.f[2] = o->beta2;
        a.f[3] = o->eps;
        a.f[4] = dg_optim_decays(p) ? o->weight_decay : 0.0;
        int in[DG_MAX_INPUTS] = {b->reduced >= 0 ? b->reduced : p->grad, dist ? ob->master : p->id,
                                 ob->exp_avg, ob->exp_avg_sq, s->out->status, s->out->hparams,
                                 s->out->group_rank, prev};
        if (!dist) s->updated[s->n_updated++] = p->id;
        snprintf(name, sizeof name, "optim/adamw/%.51s", p->name); /* DG_NAME_LEN */
        int layer = p->layer; /* p points into g->tensors, which add() may move */
        prev = add(s, o->ops.adamw, &a, in, prev >= 0 ? 8 : 7, name);
        if (prev < 0) return builder_failed(s);
        dg_N(g, dg_Tc(g, prev)->producer)->layer = layer;
    }
    if (!dist || b->gathered >= 0) return DG_OK; /* whole already, or gathered next step */
    snprintf(name, sizeof name, "optim/bucket%d/commit", i);
    int src = add(s, o->ops.commit, &(dg_attrs){{0}, {0}}, (int[]){ob->master, prev}, 2, name);
    if (src >= 0 && b->group_size > 1) {
        src = dg_all_gather(g, src, b->axis, b->group_size, 0);
        if (src >= 0)
            snprintf(dg_N(g, dg_Tc(g, src)->producer)->name, DG_NAME_LEN, "optim/bucket%d/param_all_gather", i);
    }
    for (int k = 0; src >= 0 && k < b->n_params; k++) {
        dg_attrs a;
        memset(&a, 0, sizeof a);
        a.i[0] = b->offset[k];
        snprintf(name, sizeof name, "optim/bucket%d/store%d", i, k);
        if (add(s, o->ops.param_store, &a, (int[]){src, b->params[k]}, 2, name) < 0) return builder_failed(s);
        s->updated[s->n_updated++] = b->params[k];
    }
    return src < 0 ? builder_failed(s) : DG_OK;
}

/* Every reader of an updated leaf, other than the pass's own nodes, must
 * be an ancestor of the clip node (dg_pass_optim.h). */
static int check_in_place(optim_pass *s, int clip_node) {
    const dg_graph *g = s->g;
    unsigned char *anc = dg_calloc((size_t)g->n_nodes, 1);
    int *stack = dg_malloc(sizeof(int) * (size_t)g->n_nodes), top = 0;
    anc[clip_node] = 1;
    stack[top++] = clip_node;
    /* before: data edges and ordering edges (a pipeline stage's forward
     * reaches the loss on another rank; its schedule orders it first) */
    dg_order_adj pred;
    dg_order_adj_build(g, 1, &pred);
    while (top > 0) {
        int v = stack[--top];
        const dg_node *n = &g->nodes[v];
        for (int i = 0; i < n->n_in; i++) {
            int p = g->tensors[n->in[i]].producer;
            if (p >= 0 && !anc[p]) {
                anc[p] = 1;
                stack[top++] = p;
            }
        }
        for (int k = pred.offsets[v]; k < pred.offsets[v + 1]; k++)
            if (!anc[pred.nodes[k]]) {
                anc[pred.nodes[k]] = 1;
                stack[top++] = pred.nodes[k];
            }
    }
    dg_order_adj_free(&pred);
    dg_uses u;
    dg_uses_build(g, &u);
    int st = DG_OK;
    for (int k = 0; st == DG_OK && k < s->n_updated; k++) {
        int t = s->updated[k];
        for (int e = u.offsets[t]; st == DG_OK && e < u.offsets[t + 1]; e++) {
            int r = u.nodes[e];
            if (r < s->first_node && !anc[r])
                st = dg_err_set(s->err, DG_EINTERNAL, "optim pass: node %d '%s' reads '%s', which the optimizer "
                                "updates in place, but does not run before the update (no path to '%s')",
                                r, g->nodes[r].name, g->tensors[t].name, g->nodes[clip_node].name);
        }
    }
    dg_uses_free(&u);
    dg_free(anc);
    dg_free(stack);
    return st;
}

static int run(optim_pass *s) {
    const dg_dp_buckets *bk = s->o->buckets;
    dg_graph *g = s->g;
    for (int i = 0; i < bk->n; i++) DG_TRY(bucket_partials(s, &bk->b[i], i));
    int total = norm_total(s);
    /* Pipeline stages hold different parameters: the stages' totals add up
     * (every stage gathers once, whatever its buckets, so the collectives
     * match across the PP group). */
    int pp = group_size(s->o, DG_AXIS_PP);
    if (total >= 0 && pp > 1) {
        int all = dg_all_gather(g, total, DG_AXIS_PP, pp, 0);
        if (all >= 0) snprintf(dg_N(g, dg_Tc(g, all)->producer)->name, DG_NAME_LEN, "optim/norm/pp/all_gather");
        total = all >= 0 ? sum_all(s, &all, 1, "optim/norm/pp/ranks_sum") : -1;
    }
    if (total < 0) return builder_failed(s);
    s->out->hparams = dg_input_new(g, "optim/hparams", DG_F64, 1, DG_SHAPE(DG_OPTIM_NHPARAMS));
    s->out->group_rank = dg_input_new(g, "optim/group_rank", DG_I32, 1, DG_SHAPE(DG_AXIS_COUNT));
    dg_attrs a;
    memset(&a, 0, sizeof a);
    a.f[0] = s->o->clip_grad;
    s->out->status = add(s, s->o->ops.clip, &a, (int[]){total, s->out->hparams}, 2, "optim/clip");
    if (s->out->status < 0) return builder_failed(s);
    for (int i = 0; i < bk->n; i++) DG_TRY(bucket_update(s, &bk->b[i], i));
    return check_in_place(s, dg_Tc(g, s->out->status)->producer);
}

int dg_pass_optim(dg_graph *g, const dg_optim_opts *o, dg_optim *out, dg_err *err) {
    memset(out, 0, sizeof *out);
    out->hparams = out->group_rank = out->status = -1;
    const dg_dp_buckets *bk = o->buckets;
    if (!bk || bk->n < 1 || !o->ops.sumsq || !o->ops.sum || !o->ops.clip || !o->ops.adamw || !o->ops.commit ||
        !o->ops.param_store)
        return dg_err_set(err, DG_EINTERNAL, "optim pass: bad options (no bucket or an op missing)");
    int np = 0;
    for (int i = 0; i < bk->n; i++) np += bk->b[i].n_params;
    optim_pass s = {g, o, out, g->n_nodes, 0, NULL, NULL, 0, NULL, err};
    s.partial = dg_malloc(sizeof(int) * (size_t)np);
    s.partial_mask = dg_malloc(sizeof(unsigned) * (size_t)np);
    s.updated = dg_malloc(sizeof(int) * (size_t)(3 * bk->n + 2 * np));
    out->n = bk->n;
    out->b = dg_calloc((size_t)bk->n, sizeof *out->b);
    dg_phase phase = g->cur_phase;
    int layer = g->cur_layer, mb = g->cur_microbatch;
    dg_graph_set_phase(g, DG_PHASE_OPTIMIZER);
    dg_graph_set_layer(g, -1);
    dg_graph_set_microbatch(g, -1);
    int st = run(&s);
    dg_graph_set_phase(g, phase);
    dg_graph_set_layer(g, layer);
    dg_graph_set_microbatch(g, mb);
    dg_free(s.partial);
    dg_free(s.partial_mask);
    dg_free(s.updated);
    if (st != DG_OK) dg_optim_free(out);
    return st;
}

void dg_optim_free(dg_optim *o) {
    dg_free(o->b);
    o->b = NULL;
    o->n = 0;
}
