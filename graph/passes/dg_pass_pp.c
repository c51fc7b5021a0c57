/* dg_pass_pp.c — see dg_pass_pp.h. */
#include "dg_pass_pp.h"

#include <string.h>

#include "dg_collective.h"
#include "dg_module.h"
#include "dg_reemit.h"

static const char *schedule_names[DG_PP_SCHEDULE_COUNT] = {"1f1b", "all-forward-all-backward", "zero-bubble-h1"};

const char *dg_pp_schedule_name(dg_pp_schedule s) {
    return (unsigned)s < DG_PP_SCHEDULE_COUNT ? schedule_names[s] : "?";
}

int dg_pp_schedule_parse(const char *name, dg_pp_schedule *out, dg_err *err) {
    for (int s = 0; s < DG_PP_SCHEDULE_COUNT; s++)
        if (!strcmp(name, schedule_names[s])) {
            *out = (dg_pp_schedule)s;
            return DG_OK;
        }
    return dg_err_set(err, DG_EINPUT,
                      "--pipeline-schedule: expected 1f1b, all-forward-all-backward or zero-bubble-h1, got '%s'", name);
}

/* ---- the split ------------------------------------------------------------------ */

int dg_pp_stage_layers(const dg_pp_opts *o, int s, int *first) {
    int p = o->size, L = o->num_layers;
    int f = o->first_layers >= 0 && p > 1 ? o->first_layers : -1;
    int l = o->last_layers >= 0 && p > 1 ? o->last_layers : -1;
    int middle = p - (f >= 0) - (l >= 0);
    int rest = L - (f >= 0 ? f : 0) - (l >= 0 ? l : 0);
    int each = middle > 0 ? rest / middle : 0;
    int start = 0;
    for (int k = 0; k < s; k++) start += k == 0 && f >= 0 ? f : k == p - 1 && l >= 0 ? l : each;
    if (first) *first = start;
    return s == 0 && f >= 0 ? f : s == p - 1 && l >= 0 ? l : each;
}

int dg_pp_chunks(const dg_pp_opts *o) { return o->size > 1 && o->virtual_stages > 1 ? o->virtual_stages : 1; }

int dg_pp_vstage_of_layer(const dg_pp_opts *o, int l) {
    int v = dg_pp_chunks(o);
    if (v == 1) return dg_pp_stage_of_layer(o, l);
    int per = o->num_layers / (o->size * v);
    return DG_MIN(l / DG_MAX(per, 1), o->size * v - 1);
}

int dg_pp_check(const dg_pp_opts *o, dg_err *err) {
    int p = o->size, L = o->num_layers;
    if (p <= 1) return DG_OK;
    int f = o->first_layers, l = o->last_layers, v = dg_pp_chunks(o);
    if (v > 1 && (f >= 0 || l >= 0))
        return dg_err_set(err, DG_EINPUT,
                          "--decoder-%s-pipeline-num-layers %d: uneven stages do not combine with virtual pipeline "
                          "stages (interleaved 1F1B) here",
                          f >= 0 ? "first" : "last", f >= 0 ? f : l);
    if (v > 1 && L % (p * v) != 0)
        return dg_err_set(err, DG_EINPUT,
                          "--num-layers %d is not divisible into --pipeline-model-parallel-size %d x %d virtual "
                          "stages",
                          L, p, v);
    if (f < 0 && l < 0) {
        if (L % p != 0)
            return dg_err_set(err, DG_EINPUT,
                              "--num-layers %d is not divisible by --pipeline-model-parallel-size %d (set "
                              "--decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers for an "
                              "uneven split)",
                              L, p);
        return DG_OK;
    }
    int middle = p - (f >= 0) - (l >= 0);
    int rest = L - (f >= 0 ? f : 0) - (l >= 0 ? l : 0);
    if (f == 0 || l == 0 || rest < 0 || (middle == 0 && rest != 0) || (middle > 0 && (rest == 0 || rest % middle))) {
        char given[96];
        if (f >= 0 && l >= 0)
            snprintf(given, sizeof given,
                     "--decoder-first-pipeline-num-layers %d and --decoder-last-pipeline-num-layers %d", f, l);
        else
            snprintf(given, sizeof given, "--decoder-%s-pipeline-num-layers %d", f >= 0 ? "first" : "last",
                     f >= 0 ? f : l);
        return dg_err_set(err, DG_EINPUT,
                          "%s: the other %d stage(s) must split the remaining %d of --num-layers %d evenly, at least "
                          "one layer each",
                          given, middle, rest, L);
    }
    return DG_OK;
}

int dg_pp_stage_of_layer(const dg_pp_opts *o, int l) {
    for (int s = 0; s < o->size; s++) {
        int first, n = dg_pp_stage_layers(o, s, &first);
        if (l >= first && l < first + n) return s;
    }
    return o->size - 1;
}

void dg_pp_bounds_free(dg_pp_bounds *b) {
    dg_free(b->in);
    dg_free(b->out);
    dg_free(b->shared);
    dg_free(b->skip);
    memset(b, 0, sizeof *b);
}

/* ---- 1. stages --------------------------------------------------------------------- */

/* stage[v] for src's nodes, the virtual stage (ids are a topological
 * order: the builder and re-emission make a node's producers first). A
 * node outside the layers goes to the last stage when it reads anything
 * computed in a layer or after one (post[t]), else to the first. */
static void stamp_stages(const dg_graph *src, const dg_pp_opts *o, int *stage) {
    char *post = dg_calloc((size_t)DG_MAX(src->n_tensors, 1), 1);
    for (int v = 0; v < src->n_nodes; v++) {
        const dg_node *n = &src->nodes[v];
        int after = 0;
        for (int k = 0; k < n->n_in; k++) after |= post[n->in[k]];
        stage[v] = n->layer >= 0 ? dg_pp_vstage_of_layer(o, n->layer) : after ? o->size * dg_pp_chunks(o) - 1 : 0;
        if (n->layer >= 0 || after)
            for (int j = 0; j < n->n_out; j++) post[n->out[j]] = 1;
    }
    dg_free(post);
}

/* ---- 2. the cut ----------------------------------------------------------------------- */

typedef struct cut {
    const dg_graph *src;
    const dg_pp_opts *o;
    dg_graph *g;
    int *stage; /* per src node: its virtual stage (the stage without virtual stages) */
    unsigned char *on; /* [src node][rank]: the node runs on that rank (place_param_fns) */
    int *tmap;
    dg_pp_bounds *b;
    int cap_in, cap_out;
} cut;

static void push(dg_pp_bound **v, int *n, int *cap, dg_pp_bound x) {
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 8;
        *v = dg_realloc(*v, sizeof **v * (size_t)*cap);
    }
    (*v)[(*n)++] = x;
}

static void tag(dg_graph *g, int node, int slot) { g->nodes[node].attrs.i[DG_COLL_TAG] = slot; }

/* The rank of a virtual stage, and how far ahead rank b is of rank a
 * (mod p: a later chunk on the last rank goes on on rank 0). */
static int rank_of(const cut *c, int vstage) { return vstage % c->o->size; }
static int ahead(const cut *c, int a, int b) { return ((b - a) % c->o->size + c->o->size) % c->o->size; }

static int runs_on(const cut *c, int v, int r) { return c->on[(size_t)v * (size_t)c->o->size + (size_t)r]; }

/* Which ranks run each node. A node of the layers, or after them, runs on
 * its stage's rank. A node outside the layers whose inputs are only leaves
 * or such nodes' outputs — the 16-bit rounding of a weight is one — is a
 * function of the parameters: it runs on every rank that reads its outputs
 * (at the earliest of their stages there), so a weight never crosses a
 * stage boundary, and the tied embedding's rounded copy is made on both of
 * the stages that read it. Ids are a topological order, so one backward
 * sweep sees every reader first. */
static void place_param_fns(cut *c) {
    const dg_graph *src = c->src;
    int p = c->o->size, nn = src->n_nodes;
    char *fn = dg_calloc((size_t)DG_MAX(nn, 1), 1);
    for (int v = 0; v < nn; v++) {
        const dg_node *n = &src->nodes[v];
        fn[v] = n->layer < 0 && c->stage[v] == 0;
        for (int k = 0; k < n->n_in && fn[v]; k++) {
            int pr = src->tensors[n->in[k]].producer;
            fn[v] = pr < 0 || fn[pr];
        }
        if (!fn[v]) c->on[(size_t)v * (size_t)p + (size_t)rank_of(c, c->stage[v])] = 1;
    }
    /* readers of each tensor, as lists: head[t] -> node, next[edge] */
    int n_edge = 0;
    for (int v = 0; v < nn; v++) n_edge += src->nodes[v].n_in;
    int *head = dg_malloc(sizeof(int) * (size_t)DG_MAX(src->n_tensors, 1));
    int *next = dg_malloc(sizeof(int) * (size_t)DG_MAX(n_edge, 1));
    int *who = dg_malloc(sizeof(int) * (size_t)DG_MAX(n_edge, 1));
    for (int t = 0; t < src->n_tensors; t++) head[t] = -1;
    for (int v = 0, e = 0; v < nn; v++)
        for (int k = 0; k < src->nodes[v].n_in; k++, e++) {
            int t = src->nodes[v].in[k];
            who[e] = v;
            next[e] = head[t];
            head[t] = e;
        }
    for (int v = nn - 1; v >= 0; v--) {
        if (!fn[v]) continue;
        int first = -1, any = 0;
        for (int j = 0; j < src->nodes[v].n_out; j++)
            for (int e = head[src->nodes[v].out[j]]; e >= 0; e = next[e])
                for (int r = 0; r < p; r++)
                    if (runs_on(c, who[e], r)) {
                        c->on[(size_t)v * (size_t)p + (size_t)r] = 1;
                        any = 1;
                        if (r == c->o->rank && (first < 0 || c->stage[who[e]] < first)) first = c->stage[who[e]];
                    }
        if (!any) c->on[(size_t)v * (size_t)p] = 1; /* read by no one: the first stage, as before */
        if (first >= 0) c->stage[v] = first;
    }
    dg_free(head);
    dg_free(next);
    dg_free(who);
    dg_free(fn);
}

/* src tensor t in the stage graph: a leaf on first use, or the recv of a
 * tensor another stage makes. */
static int map_input(cut *c, int t, int layer, int vstage) {
    if (c->tmap[t] >= 0) return c->tmap[t];
    const dg_tensor *x = &c->src->tensors[t];
    if (x->producer < 0) {
        c->tmap[t] = dg_reemit_leaf_default(c->g, c->src, t, NULL);
        return c->tmap[t];
    }
    int peer = ahead(c, rank_of(c, c->stage[x->producer]), c->o->rank);
    int saved = c->g->cur_layer, saved_stage = c->g->cur_stage;
    dg_graph_set_layer(c->g, layer);
    dg_graph_set_stage(c->g, vstage);
    int r = dg_recv_laid_out(c->g, DG_AXIS_PP, c->o->size, -peer, x->dtype, x->ndim, x->shape,
                             &x->sharding);
    dg_graph_set_layer(c->g, saved);
    dg_graph_set_stage(c->g, saved_stage);
    if (r < 0) return -1;
    dg_tensor *y = &c->g->tensors[r];
    y->requires_grad = x->requires_grad;
    snprintf(y->name, sizeof y->name, "%.*s", DG_NAME_LEN - 1, x->name);
    tag(c->g, y->producer, t + 1);
    snprintf(c->g->nodes[y->producer].name, DG_NAME_LEN, "pp/recv/%.*s", DG_NAME_LEN - 9, x->name);
    push(&c->b->in, &c->b->n_in, &c->cap_in, (dg_pp_bound){r, -peer, t + 1});
    c->tmap[t] = r;
    return r;
}

static int copy_node(cut *c, const dg_node *n, int vstage) {
    int in[DG_MAX_INPUTS], out[DG_MAX_OUTPUTS];
    for (int k = 0; k < n->n_in; k++)
        if ((in[k] = map_input(c, n->in[k], n->layer, vstage)) < 0) return -1;
    dg_graph *g = c->g;
    dg_graph_set_phase(g, n->phase);
    dg_graph_set_layer(g, n->layer);
    dg_graph_set_module(g, n->module); /* what activation recompute selects by */
    dg_graph_set_microbatch(g, n->microbatch);
    dg_graph_set_stage(g, vstage);
    int first = dg_graph_add(g, n->op, &n->attrs, in, n->n_in, out, n->name);
    if (first < 0 && n->n_out > 0) return -1;
    dg_node *m = &g->nodes[g->n_nodes - 1];
    m->stream = n->stream;
    m->group = n->group;
    m->priority = n->priority;
    for (int j = 0; j < n->n_out; j++) {
        dg_tensor *y = &g->tensors[out[j]];
        const dg_tensor *x = &c->src->tensors[n->out[j]];
        y->sharding = x->sharding;
        y->requires_grad = x->requires_grad;
        memcpy(y->name, x->name, DG_NAME_LEN);
        c->tmap[n->out[j]] = out[j];
    }
    return 0;
}

/* Sends at the end of the producer's (virtual) stage: each tensor made
 * here and read on another rank, once per reading rank, nearest first. */
static int add_sends(cut *c) {
    const dg_graph *src = c->src;
    int p = c->o->size, s = c->o->rank;
    char *to = dg_calloc((size_t)DG_MAX(src->n_tensors, 1) * (size_t)p, 1);
    for (int v = 0; v < src->n_nodes; v++)
        for (int k = 0; k < src->nodes[v].n_in; k++) {
            int t = src->nodes[v].in[k], pr = src->tensors[t].producer;
            if (pr >= 0 && runs_on(c, pr, s) && !runs_on(c, v, s))
                for (int r = 0; r < p; r++)
                    if (runs_on(c, v, r) && !runs_on(c, pr, r)) to[(size_t)t * (size_t)p + (size_t)r] = 1;
        }
    int st = 0;
    for (int t = 0; t < src->n_tensors && st == 0; t++)
        for (int d = 1; d < p && st == 0; d++) {
            if (!to[(size_t)t * (size_t)p + (size_t)((s + d) % p)]) continue;
            int pr = src->tensors[t].producer;
            dg_graph_set_layer(c->g, src->nodes[pr].layer);
            dg_graph_set_stage(c->g, c->stage[pr]);
            int node = dg_send(c->g, c->tmap[t], DG_AXIS_PP, p, d);
            if (node < 0) {
                st = -1;
                break;
            }
            tag(c->g, node, t + 1);
            snprintf(c->g->nodes[node].name, DG_NAME_LEN, "pp/send/%.*s", DG_NAME_LEN - 9, src->tensors[t].name);
            push(&c->b->out, &c->b->n_out, &c->cap_out, (dg_pp_bound){c->tmap[t], d, t + 1});
        }
    dg_graph_set_stage(c->g, s);
    dg_free(to);
    return st;
}

/* Parameters this stage reads that another stage reads too: at most one
 * other (the tied embedding: first and last stage). */
static int find_shared(cut *c, dg_err *err) {
    const dg_graph *src = c->src;
    int s = c->o->rank;
    for (int t = 0; t < src->n_tensors; t++) {
        if (src->tensors[t].role != DG_ROLE_PARAMETER || c->tmap[t] < 0) continue;
        int other = -1, n_other = 0;
        for (int v = 0; v < src->n_nodes; v++)
            for (int k = 0; k < src->nodes[v].n_in; k++)
                if (src->nodes[v].in[k] == t)
                    for (int r = 0; r < c->o->size; r++)
                        if (r != s && r != other && runs_on(c, v, r)) {
                            other = r;
                            n_other++;
                        }
        if (n_other == 0) continue;
        if (n_other > 1)
            return dg_err_set(err, DG_EINPUT, "pp: parameter '%s' is read on more than two pipeline stages",
                              src->tensors[t].name);
        dg_pp_shared sh;
        memset(&sh, 0, sizeof sh);
        snprintf(sh.name, sizeof sh.name, "%s", src->tensors[t].name);
        sh.peer = other - s;
        sh.slot = t + 1;
        c->b->shared = dg_realloc(c->b->shared, sizeof sh * (size_t)(c->b->n_shared + 1));
        c->b->shared[c->b->n_shared++] = sh;
    }
    return DG_OK;
}

int dg_pass_pp(const dg_graph *src, const dg_pp_opts *o, dg_graph **out, int *tmap, dg_pp_bounds *b,
               dg_err *err) {
    *out = NULL;
    memset(b, 0, sizeof *b);
    DG_TRY(dg_pp_check(o, err));
    if (o->rank < 0 || o->rank >= o->size)
        return dg_err_set(err, DG_EINTERNAL, "pp: stage %d of %d", o->rank, o->size);
    cut c = {src, o, dg_graph_new(src->name), dg_malloc(sizeof(int) * (size_t)DG_MAX(src->n_nodes, 1)),
             dg_calloc((size_t)DG_MAX(src->n_nodes, 1) * (size_t)o->size, 1), tmap, b, 0, 0};
    memcpy(c.g->mesh, src->mesh, sizeof c.g->mesh);
    c.g->mesh[DG_AXIS_PP] = o->size;
    dg_graph_set_stage(c.g, o->rank); /* every node made here and later (autodiff, DP, optimizer) */
    for (int t = 0; t < src->n_tensors; t++) tmap[t] = -1;
    stamp_stages(src, o, c.stage);
    place_param_fns(&c);
    /* Leaves first, in src's order, as dg_reemit does: parameters keep the
     * builder's order among themselves. */
    char *read = dg_calloc((size_t)DG_MAX(src->n_tensors, 1), 1);
    for (int v = 0; v < src->n_nodes; v++)
        if (runs_on(&c, v, o->rank))
            for (int k = 0; k < src->nodes[v].n_in; k++) read[src->nodes[v].in[k]] = 1;
    int st = 0;
    for (int t = 0; t < src->n_tensors && st == 0; t++)
        if (read[t] && src->tensors[t].producer < 0) st = map_input(&c, t, -1, o->rank) < 0 ? -1 : 0;
    dg_free(read);
    if (st == 0 && find_shared(&c, err) != DG_OK) {
        dg_free(c.stage);
        dg_free(c.on);
        dg_graph_free(c.g);
        dg_pp_bounds_free(b);
        return DG_EINPUT;
    }
    for (int v = 0; v < src->n_nodes && st == 0; v++)
        if (runs_on(&c, v, o->rank)) st = copy_node(&c, &src->nodes[v], c.stage[v]);
    if (st == 0) st = add_sends(&c);
    dg_graph_set_phase(c.g, DG_PHASE_FORWARD);
    dg_graph_set_layer(c.g, -1);
    dg_graph_set_module(c.g, DG_MODULE_NONE);
    dg_graph_set_microbatch(c.g, -1);
    dg_graph_set_stage(c.g, o->rank);
    dg_free(c.stage);
    dg_free(c.on);
    if (st != 0 || c.g->status != DG_OK) {
        dg_err_set(err, DG_EINTERNAL, "pp: stage %d: %s", o->rank, c.g->err.msg);
        dg_graph_free(c.g);
        dg_pp_bounds_free(b);
        return DG_EINTERNAL;
    }
    *out = c.g;
    return DG_OK;
}

/* ---- 3. backward ------------------------------------------------------------------------ */

static int zeros_like(dg_graph *g, const dg_autodiff_ops *ops, int t) {
    dg_attrs a;
    memset(&a, 0, sizeof a);
    const dg_tensor *x = &g->tensors[t];
    a.i[0] = x->ndim;
    for (int i = 0; i < x->ndim; i++) a.i[1 + i] = x->shape[i];
    return dg_graph_add(g, ops->fill, &a, NULL, 0, NULL, NULL);
}

int dg_pass_pp_autodiff(dg_graph *g, const dg_pp_bounds *b, int loss, const dg_autodiff_ops *ops,
                        dg_err *err) {
    int *seed_t = dg_malloc(sizeof(int) * (size_t)DG_MAX(b->n_out, 1));
    int *seed_g = dg_malloc(sizeof(int) * (size_t)DG_MAX(b->n_out, 1)), n = 0;
    dg_graph_set_phase(g, DG_PHASE_BACKWARD);
    /* the gradients of what this stage sent, from the stages that read it */
    for (int i = 0; i < b->n_out; i++) {
        const dg_tensor *y = &g->tensors[b->out[i].t];
        if (!y->requires_grad) continue;
        int64_t shape[DG_MAX_DIMS];
        memcpy(shape, y->shape, sizeof shape);
        dg_sharding lay = y->sharding;
        int t = b->out[i].t, layer = y->layer;
        dg_graph_set_layer(g, g->nodes[y->producer].layer);
        int r = dg_recv_laid_out(g, DG_AXIS_PP, g->mesh[DG_AXIS_PP], b->out[i].peer, y->dtype, y->ndim, shape,
                                 &lay);
        (void)layer;
        if (r < 0) break;
        tag(g, g->tensors[r].producer, b->out[i].slot);
        snprintf(g->nodes[g->tensors[r].producer].name, DG_NAME_LEN, "pp/recv_grad/%.*s", DG_NAME_LEN - 14,
                 g->tensors[t].name);
        seed_t[n] = t;
        seed_g[n++] = r;
    }
    dg_graph_set_phase(g, DG_PHASE_FORWARD);
    dg_graph_set_layer(g, -1);
    int st = g->status != DG_OK ? dg_err_set(err, g->status, "pp: %s", g->err.msg)
                                : dg_autodiff_seeded(g, loss, n, seed_t, seed_g, ops, NULL, err);
    dg_free(seed_t);
    dg_free(seed_g);
    DG_TRY(st);
    /* the gradients of what this stage received, back to its sender */
    dg_graph_set_phase(g, DG_PHASE_BACKWARD);
    for (int i = 0; i < b->n_in && g->status == DG_OK; i++) {
        const dg_tensor *x = &g->tensors[b->in[i].t];
        if (!x->requires_grad) continue;
        int gx = x->grad, t = b->in[i].t;
        dg_graph_set_layer(g, x->layer);
        if (gx < 0) gx = zeros_like(g, ops, t); /* nothing here reaches the loss */
        int node = gx < 0 ? -1 : dg_send(g, gx, DG_AXIS_PP, g->mesh[DG_AXIS_PP], b->in[i].peer);
        if (node < 0) break;
        tag(g, node, b->in[i].slot);
        snprintf(g->nodes[node].name, DG_NAME_LEN, "pp/send_grad/%.*s", DG_NAME_LEN - 14, g->tensors[t].name);
    }
    dg_graph_set_phase(g, DG_PHASE_FORWARD);
    dg_graph_set_layer(g, -1);
    if (g->status != DG_OK) return dg_err_set(err, g->status, "pp: %s", g->err.msg);
    return DG_OK;
}

/* ---- tied parameters ------------------------------------------------------------------- */

int dg_pass_pp_tied(dg_graph *g, dg_pp_bounds *b, const dg_autodiff_ops *ops, dg_err *err) {
    /* phase optimizer, as Megatron's embedding all-reduce runs when the
     * gradients are final (dg_pass_pp_fence orders it after the blocks) */
    dg_graph_set_phase(g, DG_PHASE_OPTIMIZER);
    dg_graph_set_microbatch(g, -1);
    for (int i = 0; i < b->n_shared && g->status == DG_OK; i++) {
        const dg_pp_shared *sh = &b->shared[i];
        int p = -1;
        for (int t = 0; t < g->n_tensors && p < 0; t++)
            if (g->tensors[t].role == DG_ROLE_PARAMETER && !strcmp(g->tensors[t].name, sh->name)) p = t;
        if (p < 0) return dg_err_set(err, DG_EINTERNAL, "pp: tied parameter '%s' is not on this stage", sh->name);
        dg_graph_set_layer(g, g->tensors[p].layer);
        int mine = g->tensors[p].grad >= 0 ? g->tensors[p].grad : zeros_like(g, ops, p);
        int send = mine < 0 ? -1 : dg_send(g, mine, DG_AXIS_PP, g->mesh[DG_AXIS_PP], sh->peer);
        const dg_tensor *x = &g->tensors[p];
        int theirs = send < 0 ? -1
                                  : dg_recv_laid_out(g, DG_AXIS_PP, g->mesh[DG_AXIS_PP], sh->peer, DG_F32, x->ndim,
                                                     x->shape, &x->sharding);
        if (theirs < 0) break;
        int recv = g->tensors[theirs].producer;
        tag(g, send, sh->slot);
        tag(g, recv, sh->slot);
        snprintf(g->nodes[send].name, DG_NAME_LEN, "pp/tied/send/%.*s", DG_NAME_LEN - 14, sh->name);
        snprintf(g->nodes[recv].name, DG_NAME_LEN, "pp/tied/recv/%.*s", DG_NAME_LEN - 14, sh->name);
        dg_graph_add_order(g, send, recv); /* a recv blocks the comm stream: ours goes out first */
        dg_graph_set_phase(g, DG_PHASE_BACKWARD);
        /* first stage's + last stage's, on both */
        int in[2] = {sh->peer > 0 ? mine : theirs, sh->peer > 0 ? theirs : mine};
        int sum = dg_graph_add(g, ops->add, NULL, in, 2, NULL, NULL);
        if (sum < 0) break;
        dg_tensor *old = &g->tensors[mine], *gt = &g->tensors[sum];
        gt->role = DG_ROLE_GRADIENT;
        gt->layer = g->tensors[p].layer;
        snprintf(gt->name, sizeof gt->name, "grad/%.*s", DG_NAME_LEN - 6, sh->name);
        if (old->role == DG_ROLE_GRADIENT) {
            old->role = DG_ROLE_ACTIVATION;
            snprintf(old->name, sizeof old->name, "grad/stage/%.*s", DG_NAME_LEN - 12, sh->name);
        }
        g->tensors[p].grad = sum;
        dg_graph_set_phase(g, DG_PHASE_OPTIMIZER);
        if (sh->peer < 0) { /* the later stage's copy: the norm counts the earlier one */
            b->skip = dg_realloc(b->skip, sizeof(int) * (size_t)(b->n_skip + 1));
            b->skip[b->n_skip++] = p;
        }
    }
    dg_graph_set_phase(g, DG_PHASE_FORWARD);
    dg_graph_set_layer(g, -1);
    if (g->status != DG_OK) return dg_err_set(err, g->status, "pp: tied parameters: %s", g->err.msg);
    return DG_OK;
}
