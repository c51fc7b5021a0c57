/* dg_pass_recompute.c — see dg_pass_recompute.h. */
#include "dg_pass_recompute.h"

#include <string.h>

#include "dg_module.h"
#include "dg_op.h"
#include "dg_reemit.h"

/* A growing list of ints. */
typedef struct ivec {
    int *v;
    int n, cap;
} ivec;

static void ivec_push(ivec *a, int x) {
    if (a->n == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 16;
        a->v = dg_realloc(a->v, sizeof(int) * (size_t)a->cap);
    }
    a->v[a->n++] = x;
}

static int ivec_has(const ivec *a, int x) {
    for (int i = 0; i < a->n; i++)
        if (a->v[i] == x) return 1;
    return 0;
}

typedef struct rc_ctx {
    const dg_graph *src;
    const dg_recompute_opts *o;
    const int *tmap;   /* src tensor -> dst, filled as dg_reemit goes */
    int *region;       /* per src node: its region, -1: none */
    int *clone;        /* per src tensor: its recomputed copy in dst, -1: none yet */
    int *seen;         /* per src node: 1 + the region whose entering gradient was last sought there */
    int n_regions;
    ivec *triggers;    /* per region: dst nodes producing the gradient that enters it */
    ivec *trig_layers; /* per region: the layers those nodes are in */
    ivec *readers;     /* per region: dst backward nodes reading its recomputed tensors */
    ivec roots;        /* (dst node, region) pairs of recompute nodes with no recomputed input */
    dg_recompute_stats st;
} rc_ctx;

int dg_recompute_any(const dg_recompute_opts *o) {
    if (!o) return 0;
    for (int l = 0; l < o->n_layers; l++)
        if ((o->full_group && o->full_group[l] >= 0) || (o->modules && o->modules[l])) return 1;
    return 0;
}

/* The region of forward node n (see the header), or -1. Full groups are
 * regions 0..n_layers-1; module regions follow, one per (layer, module). */
static int region_of(const dg_recompute_opts *o, const dg_node *n) {
    int l = n->layer;
    if (n->phase != DG_PHASE_FORWARD || l < 0 || l >= o->n_layers) return -1;
    /* a point-to-point transfer (pipeline stages) is never repeated: what
     * it delivers is a checkpoint */
    if (n->op && (n->op->comm == DG_COMM_SEND || n->op->comm == DG_COMM_RECV)) return -1;
    if (o->full_group && o->full_group[l] >= 0) return o->full_group[l];
    unsigned m = o->modules ? o->modules[l] : 0;
    int parent = dg_module_parent(n->module);
    int pick = (m >> parent) & 1u ? parent : (m >> n->module) & 1u ? n->module : -1;
    if (pick <= DG_MODULE_NONE) return -1;
    return o->n_layers + l * DG_MODULE_COUNT + pick;
}

/* Does region r cover layer l (so the backward of layer l reads its copies)? */
static int region_covers(const dg_recompute_opts *o, int r, int l) {
    if (l < 0 || l >= o->n_layers) return 0;
    if (r < o->n_layers) return o->full_group && o->full_group[l] == r;
    return (r - o->n_layers) / DG_MODULE_COUNT == l;
}

static int clone_tensor(dg_graph *dst, rc_ctx *c, int t, int r);

/* Re-emit forward node v of region r as a recompute node: its inputs made
 * in the region are recomputed too, the others (checkpoints, parameters,
 * inputs) are the forward's. The attrs, stream and group are those of v's
 * copy in dst, which are already local to this rank. */
static int clone_node(dg_graph *dst, rc_ctx *c, int v, int r) {
    const dg_node *n = &c->src->nodes[v];
    int in[DG_MAX_INPUTS], root = 1;
    for (int k = 0; k < n->n_in; k++) {
        int u = n->in[k], p = c->src->tensors[u].producer;
        root &= !(p >= 0 && c->region[p] == r);
        in[k] = p >= 0 && c->region[p] == r ? clone_tensor(dst, c, u, r) : c->tmap[u];
        if (in[k] < 0) {
            if (dst->status == DG_OK) dg_graph_fail(dst, "recompute: input %d of '%s' is missing", k, n->name);
            return dst->status;
        }
    }
    const dg_node m = dst->nodes[dst->tensors[c->tmap[n->out[0]]].producer]; /* a copy: add() may move it */
    dg_phase ph = dst->cur_phase;
    int layer = dst->cur_layer, mb = dst->cur_microbatch, stage = dst->cur_stage, mod = dst->cur_module;
    dg_graph_set_phase(dst, DG_PHASE_RECOMPUTE);
    dg_graph_set_layer(dst, m.layer);
    dg_graph_set_microbatch(dst, m.microbatch);
    dg_graph_set_stage(dst, m.stage);
    dg_graph_set_module(dst, m.module);
    char name[DG_NAME_LEN];
    snprintf(name, sizeof name, "%.*s.rc", DG_NAME_LEN - 4, m.name);
    int outs[DG_MAX_OUTPUTS];
    int first = dg_graph_add(dst, m.op, &m.attrs, in, n->n_in, outs, name);
    dg_graph_set_phase(dst, ph);
    dg_graph_set_layer(dst, layer);
    dg_graph_set_microbatch(dst, mb);
    dg_graph_set_stage(dst, stage);
    dg_graph_set_module(dst, mod);
    if (first < 0) return dst->status;
    dg_node *rn = &dst->nodes[dst->n_nodes - 1];
    rn->stream = m.stream;
    rn->group = m.group;
    rn->priority = m.priority;
    rn->fwd_node = m.id;
    for (int j = 0; j < n->n_out; j++) {
        const dg_tensor *f = &dst->tensors[m.out[j]];
        char tn[DG_NAME_LEN];
        snprintf(tn, sizeof tn, "rc/%.*s", DG_NAME_LEN - 4, f->name);
        dg_tensor *x = &dst->tensors[outs[j]];
        x->sharding = f->sharding;
        memcpy(x->name, tn, sizeof tn);
        c->clone[n->out[j]] = outs[j];
    }
    if (root) {
        ivec_push(&c->roots, rn->id);
        ivec_push(&c->roots, r);
    }
    c->st.n_nodes++;
    if (m.op->cost) {
        dg_cost cost = {0, 0};
        m.op->cost(dst, rn, &cost);
        c->st.flops += cost.flops;
    }
    return DG_OK;
}

/* The recomputed copy of src tensor t (made in region r), emitting it first
 * if needed. Returns its id in dst, or -1 with dst's error set. */
static int clone_tensor(dg_graph *dst, rc_ctx *c, int t, int r) {
    if (c->clone[t] >= 0) return c->clone[t];
    if (clone_node(dst, c, c->src->tensors[t].producer, r) != DG_OK) return -1;
    return c->clone[t];
}

/* The layer whose backward made the gradient that backward node n
 * outputs: its stamp, except for a point-to-point transfer (-1). Under
 * pipeline parallelism a stage receives the gradients of the tensors it
 * sent, stamped with the layer that made them in the forward: the hidden
 * state, and the running sums of the MoE aux and z losses, whose gradient
 * (that of a loss term) every layer of the stage reads directly. Such a
 * gradient is made on another stage, upstream of this stage's whole
 * backward, as the loss's seed is on the last stage: it enters every
 * region it reaches and is made inside none. */
static int made_in_layer(const dg_node *n) {
    /* only the pipeline's transfers: CP's ring exchanges K/V blocks inside
     * a layer's attention, and its backward receives are made in that layer
     * (taken as made in none, the region's recompute would wait for them
     * while they wait for it: a cycle) */
    if (n->op && (n->op->comm == DG_COMM_SEND || n->op->comm == DG_COMM_RECV) && n->group == DG_AXIS_PP) return -1;
    return n->layer;
}

/* The gradient entering region r upstream of backward node p (src): p
 * itself when it is made outside the region's layers, else what its
 * backward inputs come from, recursively. Each is recorded as a trigger of
 * r, with the layer it is made in. */
static void seek_entering(const dg_graph *dst, rc_ctx *c, int p, int r) {
    const dg_graph *src = c->src;
    if (c->seen[p] == r + 1) return;
    c->seen[p] = r + 1;
    const dg_node *n = &src->nodes[p];
    int made = made_in_layer(n);
    if (!region_covers(c->o, r, made)) {
        int d = n->n_out > 0 && c->tmap[n->out[0]] >= 0 ? dst->tensors[c->tmap[n->out[0]]].producer : -1;
        if (d >= 0 && !ivec_has(&c->triggers[r], d)) {
            ivec_push(&c->triggers[r], d);
            ivec_push(&c->trig_layers[r], made);
        }
        return;
    }
    for (int k = 0; k < n->n_in; k++) {
        int q = src->tensors[n->in[k]].producer;
        if (q >= 0 && src->nodes[q].phase == DG_PHASE_BACKWARD) seek_entering(dst, c, q, r);
    }
}

/* dg_reemit's inputs hook: a backward node of a region's layers reads the
 * region's tensors from their recomputed copies. Upstream of its other
 * backward inputs, where the backward leaves the region's layers, is the
 * gradient entering the region: the recompute waits for it. */
static int rc_node(dg_graph *dst, const dg_graph *src, const dg_node *n, int *in, int *out, void *ctx, dg_err *err) {
    (void)out;
    (void)err;
    rc_ctx *c = ctx;
    if (n->phase != DG_PHASE_BACKWARD || n->fwd_node < 0) return DG_REEMIT_COPY;
    int fl = src->nodes[n->fwd_node].layer, used = -1;
    for (int k = 0; k < n->n_in; k++) {
        int p = src->tensors[n->in[k]].producer;
        int r = p >= 0 ? c->region[p] : -1;
        if (r < 0 || !region_covers(c->o, r, fl)) continue;
        if ((in[k] = clone_tensor(dst, c, n->in[k], r)) < 0) return dst->status;
        used = r;
    }
    if (used < 0) return DG_REEMIT_COPY;
    ivec_push(&c->readers[used], dst->n_nodes); /* n's copy is the next node */
    for (int k = 0; k < n->n_in; k++) {
        int p = src->tensors[n->in[k]].producer;
        if (p >= 0 && src->nodes[p].phase == DG_PHASE_BACKWARD) seek_entering(dst, c, p, used);
    }
    return DG_REEMIT_COPY;
}

/* Mark in `down` every node reachable from the nodes already marked, over
 * data and ordering edges (visiting nodes in id order suffices: every edge
 * of dst points forward, data edges by construction and ordering edges from
 * a node emitted earlier to one emitted later). */
static void mark_downstream(const dg_graph *g, const dg_uses *u, const dg_order_adj *succ, char *down) {
    for (int v = 0; v < g->n_nodes; v++) {
        if (!down[v]) continue;
        const dg_node *n = &g->nodes[v];
        for (int j = 0; j < n->n_out; j++)
            for (int k = u->offsets[n->out[j]]; k < u->offsets[n->out[j] + 1]; k++) down[u->nodes[k]] = 1;
        for (int k = succ->offsets[v]; k < succ->offsets[v + 1]; k++) down[succ->nodes[k]] = 1;
    }
}

/* The readers of a region's recomputed tensors (the weight gradients too,
 * which a scheduler would otherwise leave for the end of the step) run
 * before the backward leaves the region's layers: before each backward node
 * outside those layers that reads a gradient made inside them, unless that
 * node is upstream of the reader. */
static void order_exits(dg_graph *dst, const rc_ctx *c) {
    dg_uses u;
    dg_uses_build(dst, &u);
    dg_order_adj succ;
    dg_order_adj_build(dst, 0, &succ);
    int nn = dst->n_nodes;
    char *down = dg_malloc((size_t)DG_MAX(nn, 1));
    ivec exits = {0};
    for (int r = 0; r < c->n_regions; r++) {
        if (c->readers[r].n == 0) continue;
        exits.n = 0;
        memset(down, 0, (size_t)DG_MAX(nn, 1));
        for (int v = 0; v < nn; v++) {
            const dg_node *n = &dst->nodes[v];
            if (n->phase != DG_PHASE_BACKWARD || !region_covers(c->o, r, n->layer)) continue;
            for (int j = 0; j < n->n_out; j++)
                for (int k = u.offsets[n->out[j]]; k < u.offsets[n->out[j] + 1]; k++) {
                    int e = u.nodes[k];
                    const dg_node *x = &dst->nodes[e];
                    if (x->phase == DG_PHASE_BACKWARD && !region_covers(c->o, r, x->layer) && !down[e]) {
                        down[e] = 1;
                        ivec_push(&exits, e);
                    }
                }
        }
        mark_downstream(dst, &u, &succ, down);
        for (int i = 0; i < c->readers[r].n; i++)
            for (int k = 0; k < exits.n && !down[c->readers[r].v[i]]; k++)
                dg_graph_add_order(dst, c->readers[r].v[i], exits.v[k]);
    }
    dg_free(exits.v);
    dg_free(down);
    dg_order_adj_free(&succ);
    dg_uses_free(&u);
}

/* Ordering edges. Each region's first recompute nodes (the rest follow
 * through data edges) run after the gradient entering the region. And the
 * backward nodes that read the recomputed tensors of the region above (the
 * layers that gradient comes from) all run before it is made: so the
 * backward goes layer by layer as Megatron's checkpointed layers do, the
 * readers (weight gradients too) run as soon as their recompute has, and
 * one layer's recomputed activations are freed before the next layer's are
 * made. Only triggers made inside the region above are delayed so: the
 * gradient of a loss term (the aux and z losses' seed on the last pipeline
 * stage, what the stage receives on the others, see made_in_layer) is made
 * before any reader, which may read it, and stays free. */
static void order_clones(dg_graph *dst, const rc_ctx *c) {
    for (int r = 0; r < c->n_regions; r++) {
        const ivec *tr = &c->triggers[r], *tl = &c->trig_layers[r];
        for (int q = 0; q < c->n_regions && tr->n > 0; q++) {
            if (q == r || c->readers[q].n == 0) continue;
            for (int k = 0; k < tr->n; k++)
                if (region_covers(c->o, q, tl->v[k]))
                    for (int i = 0; i < c->readers[q].n; i++) dg_graph_add_order(dst, c->readers[q].v[i], tr->v[k]);
        }
    }
    for (int i = 0; i < c->roots.n; i += 2) {
        int v = c->roots.v[i], r = c->roots.v[i + 1];
        for (int k = 0; k < c->triggers[r].n; k++) dg_graph_add_order(dst, c->triggers[r].v[k], v);
    }
    order_exits(dst, c);
}

/* What dg_reemit does not carry: which tensor is whose gradient, and the
 * parameters' gradients' role (persistent buffers, not the arena). */
static void carry_grads(dg_graph *dst, const dg_graph *src, const int *tmap) {
    for (int t = 0; t < src->n_tensors; t++) {
        const dg_tensor *x = &src->tensors[t];
        if (tmap[t] < 0) continue;
        dg_tensor *y = &dst->tensors[tmap[t]];
        if (x->grad >= 0) y->grad = tmap[x->grad];
        y->role = x->role;
        y->layer = x->layer;
        y->requires_grad = x->requires_grad;
    }
}

int dg_pass_recompute(const dg_graph *src, const dg_recompute_opts *o, dg_graph **out, int *tmap,
                      dg_recompute_stats *stats, dg_err *err) {
    rc_ctx c;
    memset(&c, 0, sizeof c);
    c.src = src;
    c.o = o;
    c.tmap = tmap;
    c.n_regions = o ? o->n_layers * (1 + DG_MODULE_COUNT) : 0;
    c.region = dg_malloc(sizeof(int) * (size_t)DG_MAX(src->n_nodes, 1));
    c.clone = dg_malloc(sizeof(int) * (size_t)DG_MAX(src->n_tensors, 1));
    c.seen = dg_calloc((size_t)DG_MAX(src->n_nodes, 1), sizeof(int));
    c.triggers = dg_calloc((size_t)DG_MAX(c.n_regions, 1), sizeof(ivec));
    c.trig_layers = dg_calloc((size_t)DG_MAX(c.n_regions, 1), sizeof(ivec));
    c.readers = dg_calloc((size_t)DG_MAX(c.n_regions, 1), sizeof(ivec));
    for (int v = 0; v < src->n_nodes; v++) c.region[v] = o ? region_of(o, &src->nodes[v]) : -1;
    for (int t = 0; t < src->n_tensors; t++) c.clone[t] = -1;

    dg_graph *g = dg_graph_new(src->name);
    memcpy(g->mesh, src->mesh, sizeof g->mesh);
    dg_reemit_opts ro = dg_reemit_plain();
    if (dg_recompute_any(o)) {
        ro.node = rc_node;
        ro.ctx = &c;
    }
    int st = dg_reemit(g, src, &ro, tmap, err);
    if (st == DG_OK) {
        carry_grads(g, src, tmap);
        order_clones(g, &c);
        if (g->status != DG_OK) st = dg_err_set(err, g->status, "recompute: %s", g->err.msg);
    }
    for (int r = 0; r < c.n_regions; r++) {
        c.st.n_regions += c.readers[r].n > 0;
        dg_free(c.triggers[r].v);
        dg_free(c.trig_layers[r].v);
        dg_free(c.readers[r].v);
    }
    if (stats) *stats = c.st;
    dg_free(c.triggers);
    dg_free(c.trig_layers);
    dg_free(c.readers);
    dg_free(c.roots.v);
    dg_free(c.clone);
    dg_free(c.seen);
    dg_free(c.region);
    if (st != DG_OK) dg_graph_free(g);
    else *out = g;
    return st;
}
