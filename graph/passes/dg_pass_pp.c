/* dg_pass_pp.c — see dg_pass_pp.h. */
#include "dg_pass_pp.h"

#include <limits.h>
#include <string.h>

#include "dg_collective.h"
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

int dg_pp_check(const dg_pp_opts *o, dg_err *err) {
    int p = o->size, L = o->num_layers;
    if (p <= 1) return DG_OK;
    int f = o->first_layers, l = o->last_layers;
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

/* stage[v] for src's nodes (ids are a topological order: the builder and
 * re-emission make a node's producers first). A node outside the layers
 * goes to the last stage when it reads anything computed in a layer or
 * after one (post[t]), else to the first. */
static void stamp_stages(const dg_graph *src, const dg_pp_opts *o, int *stage) {
    char *post = dg_calloc((size_t)DG_MAX(src->n_tensors, 1), 1);
    for (int v = 0; v < src->n_nodes; v++) {
        const dg_node *n = &src->nodes[v];
        int after = 0;
        for (int k = 0; k < n->n_in; k++) after |= post[n->in[k]];
        stage[v] = n->layer >= 0 ? dg_pp_stage_of_layer(o, n->layer) : after ? o->size - 1 : 0;
        if (n->layer >= 0 || after)
            for (int j = 0; j < n->n_out; j++) post[n->out[j]] = 1;
    }
    dg_free(post);
}

/* Nodes outside the layers that read only parameters (the 16-bit pass's
 * rounded copy of a weight) are made on the stages that read them instead
 * of on one stage and sent: the copy is cheap, a send of a whole weight per
 * step is not, and a weight split over tp cannot cross a stage as a
 * replicated recv. lo/hi: the first and last stage reading the node's
 * outputs (-1: not such a node). A tied weight's copy is read on two stages. */
static void stamp_copies(const dg_graph *src, const int *stage, int *lo, int *hi) {
    for (int v = 0; v < src->n_nodes; v++) {
        const dg_node *n = &src->nodes[v];
        int params = n->layer < 0 && n->n_in > 0;
        for (int k = 0; k < n->n_in && params; k++) {
            const dg_tensor *x = &src->tensors[n->in[k]];
            params = x->producer < 0 && x->role == DG_ROLE_PARAMETER;
        }
        lo[v] = hi[v] = params ? INT_MAX : -1;
    }
    for (int v = 0; v < src->n_nodes; v++)
        for (int k = 0; k < src->nodes[v].n_in; k++) {
            int p = src->tensors[src->nodes[v].in[k]].producer;
            if (p < 0 || lo[p] < 0) continue;
            lo[p] = DG_MIN(lo[p], stage[v]);
            hi[p] = hi[p] == INT_MAX ? stage[v] : DG_MAX(hi[p], stage[v]);
        }
    for (int v = 0; v < src->n_nodes; v++)
        if (lo[v] == INT_MAX) lo[v] = hi[v] = -1; /* read by no one: stays where stamped */
}

/* ---- 2. the cut ----------------------------------------------------------------------- */

typedef struct cut {
    const dg_graph *src;
    const dg_pp_opts *o;
    dg_graph *g;
    int *stage; /* per src node */
    int *copy_lo, *copy_hi; /* per src node: stamp_copies */
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

/* Whether src node v is made on this stage. */
static int on_stage(const cut *c, int v) {
    if (c->copy_lo[v] >= 0) return c->o->rank == c->copy_lo[v] || c->o->rank == c->copy_hi[v];
    return c->stage[v] == c->o->rank;
}

/* src tensor t in the stage graph: a leaf on first use, or the recv of a
 * tensor another stage makes. */
static int map_input(cut *c, int t, int layer) {
    if (c->tmap[t] >= 0) return c->tmap[t];
    const dg_tensor *x = &c->src->tensors[t];
    if (x->producer < 0) {
        c->tmap[t] = dg_reemit_leaf_default(c->g, c->src, t, NULL);
        return c->tmap[t];
    }
    int from = c->stage[x->producer], peer = c->o->rank - from;
    int saved = c->g->cur_layer;
    dg_graph_set_layer(c->g, layer);
    int r = dg_recv(c->g, DG_AXIS_PP, c->o->size, -peer, x->dtype, x->ndim, x->shape);
    dg_graph_set_layer(c->g, saved);
    if (r < 0) return -1;
    dg_tensor *y = &c->g->tensors[r];
    y->requires_grad = x->requires_grad;
    y->sharding = x->sharding;
    snprintf(y->name, sizeof y->name, "%.*s", DG_NAME_LEN - 1, x->name);
    tag(c->g, y->producer, t + 1);
    snprintf(c->g->nodes[y->producer].name, DG_NAME_LEN, "pp/recv/%.*s", DG_NAME_LEN - 9, x->name);
    push(&c->b->in, &c->b->n_in, &c->cap_in, (dg_pp_bound){r, -peer, t + 1});
    c->tmap[t] = r;
    return r;
}

static int copy_node(cut *c, const dg_node *n) {
    int in[DG_MAX_INPUTS], out[DG_MAX_OUTPUTS];
    for (int k = 0; k < n->n_in; k++)
        if ((in[k] = map_input(c, n->in[k], n->layer)) < 0) return -1;
    dg_graph *g = c->g;
    dg_graph_set_phase(g, n->phase);
    dg_graph_set_layer(g, n->layer);
    dg_graph_set_microbatch(g, n->microbatch);
    dg_graph_set_stage(g, c->o->rank);
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

/* Sends at the end of the stage: each tensor made here and read on a later
 * stage, once per reading stage. */
static int add_sends(cut *c) {
    const dg_graph *src = c->src;
    int p = c->o->size, s = c->o->rank;
    char *to = dg_calloc((size_t)DG_MAX(src->n_tensors, 1) * (size_t)p, 1);
    for (int v = 0; v < src->n_nodes; v++)
        for (int k = 0; k < src->nodes[v].n_in; k++) {
            int t = src->nodes[v].in[k], pr = src->tensors[t].producer;
            if (pr >= 0 && c->copy_lo[pr] < 0 && c->stage[pr] == s && c->stage[v] > s)
                to[(size_t)t * (size_t)p + (size_t)c->stage[v]] = 1;
        }
    int st = 0;
    for (int t = 0; t < src->n_tensors && st == 0; t++)
        for (int b = s + 1; b < p && st == 0; b++) {
            if (!to[(size_t)t * (size_t)p + (size_t)b]) continue;
            const dg_node *pn = &src->nodes[src->tensors[t].producer];
            dg_graph_set_layer(c->g, pn->layer);
            int node = dg_send(c->g, c->tmap[t], DG_AXIS_PP, p, b - s);
            if (node < 0) {
                st = -1;
                break;
            }
            tag(c->g, node, t + 1);
            snprintf(c->g->nodes[node].name, DG_NAME_LEN, "pp/send/%.*s", DG_NAME_LEN - 9, src->tensors[t].name);
            push(&c->b->out, &c->b->n_out, &c->cap_out, (dg_pp_bound){c->tmap[t], b - s, t + 1});
        }
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
            for (int k = 0; k < src->nodes[v].n_in; k++) {
                if (src->nodes[v].in[k] != t) continue;
                /* a copy (stamp_copies) reads t on every stage it is made on */
                int at[2] = {c->stage[v], c->stage[v]};
                if (c->copy_lo[v] >= 0) at[0] = c->copy_lo[v], at[1] = c->copy_hi[v];
                for (int i = 0; i < 2; i++)
                    if (at[i] != s && at[i] != other) {
                        other = at[i];
                        n_other++;
                    }
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
    cut c = {src, o, dg_graph_new(src->name), dg_malloc(sizeof(int) * (size_t)DG_MAX(src->n_nodes, 1)), NULL, NULL,
             tmap, b, 0, 0};
    memcpy(c.g->mesh, src->mesh, sizeof c.g->mesh);
    c.g->mesh[DG_AXIS_PP] = o->size;
    dg_graph_set_stage(c.g, o->rank); /* every node made here and later (autodiff, DP, optimizer) */
    for (int t = 0; t < src->n_tensors; t++) tmap[t] = -1;
    stamp_stages(src, o, c.stage);
    c.copy_lo = dg_malloc(sizeof(int) * (size_t)DG_MAX(src->n_nodes, 1));
    c.copy_hi = dg_malloc(sizeof(int) * (size_t)DG_MAX(src->n_nodes, 1));
    stamp_copies(src, c.stage, c.copy_lo, c.copy_hi);
    /* Leaves first, in src's order, as dg_reemit does: parameters keep the
     * builder's order among themselves. */
    char *read = dg_calloc((size_t)DG_MAX(src->n_tensors, 1), 1);
    for (int v = 0; v < src->n_nodes; v++)
        if (on_stage(&c, v))
            for (int k = 0; k < src->nodes[v].n_in; k++) read[src->nodes[v].in[k]] = 1;
    int st = 0;
    for (int t = 0; t < src->n_tensors && st == 0; t++)
        if (read[t] && src->tensors[t].producer < 0) st = map_input(&c, t, -1) < 0 ? -1 : 0;
    dg_free(read);
    if (st == 0 && find_shared(&c, err) != DG_OK) {
        dg_free(c.copy_lo);
        dg_free(c.copy_hi);
        dg_free(c.stage);
        dg_graph_free(c.g);
        dg_pp_bounds_free(b);
        return DG_EINPUT;
    }
    for (int v = 0; v < src->n_nodes && st == 0; v++)
        if (on_stage(&c, v)) st = copy_node(&c, &src->nodes[v]);
    if (st == 0) st = add_sends(&c);
    dg_graph_set_phase(c.g, DG_PHASE_FORWARD);
    dg_graph_set_layer(c.g, -1);
    dg_graph_set_microbatch(c.g, -1);
    dg_free(c.copy_lo);
    dg_free(c.copy_hi);
    dg_free(c.stage);
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
        int r = dg_recv(g, DG_AXIS_PP, g->mesh[DG_AXIS_PP], b->out[i].peer, DG_F32, y->ndim, shape);
        (void)layer;
        if (r < 0) break;
        g->tensors[r].sharding = lay;
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
        int theirs = send < 0 ? -1 : dg_recv(g, DG_AXIS_PP, g->mesh[DG_AXIS_PP], sh->peer, DG_F32, x->ndim, x->shape);
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
