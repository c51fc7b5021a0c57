/* dg_graph.c — tensors, nodes and graphs: creation, shape inference on
 * insertion, use lists. Ordering edges and the topological order: dg_order.c. */
#include "dg_graph.h"

#include <stdarg.h>
#include <string.h>

#include "dg_layout.h"
#include "dg_op.h"

/* ---- enums as text ---------------------------------------------------------- */

size_t dg_dtype_size(dg_dtype t) {
    static const size_t sizes[DG_DTYPE_COUNT] = {4, 2, 2, 4, 8, 1, 8};
    return (unsigned)t < DG_DTYPE_COUNT ? sizes[t] : 0;
}

const char *dg_dtype_name(dg_dtype t) {
    static const char *names[DG_DTYPE_COUNT] = {"f32", "bf16", "f16", "i32", "i64", "u8", "f64"};
    return (unsigned)t < DG_DTYPE_COUNT ? names[t] : "?";
}

const char *dg_role_name(dg_role r) {
    static const char *names[DG_ROLE_COUNT] = {"activation", "parameter", "gradient", "optimizer",
                                               "input"};
    return (unsigned)r < DG_ROLE_COUNT ? names[r] : "?";
}

const char *dg_axis_name(dg_axis a) {
    static const char *names[DG_AXIS_COUNT] = {"none", "tp", "cp", "ep", "dp", "pp", "edp"};
    return (unsigned)a < DG_AXIS_COUNT ? names[a] : "?";
}

const char *dg_phase_name(dg_phase p) {
    static const char *names[DG_PHASE_COUNT] = {"forward", "backward", "recompute", "optimizer"};
    return (unsigned)p < DG_PHASE_COUNT ? names[p] : "?";
}

const char *dg_stream_name(dg_stream_class s) {
    static const char *names[DG_STREAM_COUNT] = {"compute", "comm"};
    return (unsigned)s < DG_STREAM_COUNT ? names[s] : "?";
}

int64_t dg_tensor_numel(const dg_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

size_t dg_tensor_bytes(const dg_tensor *t) {
    return (size_t)dg_tensor_numel(t) * dg_dtype_size(t->dtype);
}

/* ---- graphs ---------------------------------------------------------------- */

dg_graph *dg_graph_new(const char *name) {
    dg_graph *g = dg_calloc(1, sizeof *g);
    snprintf(g->name, sizeof g->name, "%s", name ? name : "graph");
    g->cur_layer = -1;
    g->cur_microbatch = -1;
    return g;
}

void dg_graph_free(dg_graph *g) {
    if (!g) return;
    dg_free(g->tensors);
    dg_free(g->nodes);
    dg_free(g->order);
    dg_free(g);
}

dg_graph *dg_graph_clone(const dg_graph *g) {
    dg_graph *c = dg_malloc(sizeof *c);
    *c = *g;
    c->tensors = dg_malloc(sizeof(dg_tensor) * (size_t)DG_MAX(g->cap_tensors, 1));
    c->nodes = dg_malloc(sizeof(dg_node) * (size_t)DG_MAX(g->cap_nodes, 1));
    memcpy(c->tensors, g->tensors, sizeof(dg_tensor) * (size_t)g->n_tensors);
    memcpy(c->nodes, g->nodes, sizeof(dg_node) * (size_t)g->n_nodes);
    c->order = dg_malloc(sizeof(dg_order_edge) * (size_t)DG_MAX(g->cap_order, 1));
    if (g->n_order > 0) memcpy(c->order, g->order, sizeof(dg_order_edge) * (size_t)g->n_order);
    return c;
}

void dg_graph_set_phase(dg_graph *g, dg_phase p) { g->cur_phase = p; }
void dg_graph_set_layer(dg_graph *g, int layer) { g->cur_layer = layer; }
void dg_graph_set_microbatch(dg_graph *g, int mb) { g->cur_microbatch = mb; }
void dg_graph_set_stage(dg_graph *g, int stage) { g->cur_stage = stage; }
void dg_graph_set_module(dg_graph *g, int module) { g->cur_module = module; }

int dg_graph_fail(dg_graph *g, const char *fmt, ...) {
    if (g->status == DG_OK) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(g->err.msg, sizeof g->err.msg, fmt, ap);
        va_end(ap);
        g->status = DG_EINPUT;
    }
    return -1;
}

static int tensor_push(dg_graph *g, const char *name, dg_dtype dtype, int ndim,
                       const int64_t *shape, dg_role role) {
    if (g->n_tensors == g->cap_tensors) {
        g->cap_tensors = g->cap_tensors ? 2 * g->cap_tensors : 64;
        g->tensors = dg_realloc(g->tensors, sizeof(dg_tensor) * (size_t)g->cap_tensors);
    }
    int id = g->n_tensors++;
    dg_tensor *t = &g->tensors[id];
    memset(t, 0, sizeof *t);
    t->id = id;
    if (name && name[0])
        snprintf(t->name, sizeof t->name, "%s", name);
    else
        snprintf(t->name, sizeof t->name, "t%d", id);
    t->dtype = dtype;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    t->role = role;
    t->producer = -1;
    t->grad = -1;
    t->requires_grad = role == DG_ROLE_PARAMETER;
    t->layer = g->cur_layer;
    return id;
}

/* A leaf's checks, then the push. */
static int leaf_new(dg_graph *g, const char *name, dg_dtype dtype, int ndim, const int64_t *shape, dg_role role) {
    if (g->status != DG_OK) return -1;
    if (ndim < 0 || ndim > DG_MAX_DIMS)
        return dg_graph_fail(g, "tensor '%s': rank %d outside 0..%d", name ? name : "?", ndim,
                          DG_MAX_DIMS);
    if ((unsigned)dtype >= DG_DTYPE_COUNT)
        return dg_graph_fail(g, "tensor '%s': unknown dtype %d", name ? name : "?", (int)dtype);
    for (int i = 0; i < ndim; i++)
        if (shape[i] <= 0)
            return dg_graph_fail(g, "tensor '%s': dimension %d is %lld, expected > 0",
                              name ? name : "?", i, (long long)shape[i]);
    return tensor_push(g, name, dtype, ndim, shape, role);
}

int dg_tensor_new(dg_graph *g, const char *name, dg_dtype dtype, int ndim,
                  const int64_t *shape, dg_role role) {
    /* one way to make a parameter, so each has its init and placement */
    if (role == DG_ROLE_PARAMETER && g->status == DG_OK)
        return dg_graph_fail(g, "tensor '%s': parameters are made with dg_param", name ? name : "?");
    return leaf_new(g, name, dtype, ndim, shape, role);
}

int dg_param_new(dg_graph *g, const char *name, int ndim, const int64_t *shape) {
    return dg_param(g, name, ndim, shape, NULL);
}

int dg_param(dg_graph *g, const char *name, int ndim, const int64_t *shape, const dg_param_spec *spec) {
    if (g->status != DG_OK) return -1;
    for (int t = 0; t < g->n_tensors; t++) {
        const dg_tensor *x = &g->tensors[t];
        if (x->role != DG_ROLE_PARAMETER || strcmp(x->name, name) != 0) continue;
        int same = x->ndim == ndim;
        for (int i = 0; same && i < ndim; i++) same = x->shape[i] == shape[i];
        if (!same) return dg_graph_fail(g, "parameter '%s' exists with another shape", name);
        return t;
    }
    int t = leaf_new(g, name, DG_F32, ndim, shape, DG_ROLE_PARAMETER);
    if (t >= 0 && spec) {
        g->tensors[t].init = (uint8_t)spec->init;
        g->tensors[t].place = spec->place;
    }
    return t;
}

int dg_input_new(dg_graph *g, const char *name, dg_dtype dtype, int ndim, const int64_t *shape) {
    return dg_tensor_new(g, name, dtype, ndim, shape, DG_ROLE_INPUT);
}

static int node_push(dg_graph *g, const dg_op_def *op, const dg_attrs *attrs, const int *inputs,
                     int n_in, const char *name) {
    if (g->n_nodes == g->cap_nodes) {
        g->cap_nodes = g->cap_nodes ? 2 * g->cap_nodes : 64;
        g->nodes = dg_realloc(g->nodes, sizeof(dg_node) * (size_t)g->cap_nodes);
    }
    int id = g->n_nodes++;
    dg_node *n = &g->nodes[id];
    memset(n, 0, sizeof *n);
    n->id = id;
    if (name && name[0])
        snprintf(n->name, sizeof n->name, "%s", name);
    else
        snprintf(n->name, sizeof n->name, "%s_%d", op ? op->name : "node", id);
    n->op = op;
    if (attrs) n->attrs = *attrs;
    n->n_in = n_in;
    for (int i = 0; i < n_in; i++) n->in[i] = inputs[i];
    n->phase = g->cur_phase;
    n->microbatch = g->cur_microbatch;
    n->layer = g->cur_layer;
    n->stage = g->cur_stage;
    n->module = g->cur_module;
    n->stream = op ? op->stream : DG_STREAM_COMPUTE;
    n->group = DG_AXIS_NONE;
    n->fwd_node = -1;
    return id;
}

int dg_op_infer(const dg_graph *g, const dg_node *n, dg_tensor_desc *outs, dg_err *err) {
    DG_TRY(n->op->infer(g, n, outs, err));
    dg_dtype store = DG_F32;
    for (int i = 0; i < n->n_in && store == DG_F32; i++) {
        const dg_tensor *t = &g->tensors[n->in[i]];
        if (dg_dtype_is_16(t->dtype) && dg_tensor_numel(t) > 1) store = t->dtype;
    }
    if (store == DG_F32) return DG_OK;
    for (int j = 0; j < n->op->n_outputs && j < DG_MAX_OUTPUTS; j++) {
        int64_t numel = 1;
        for (int d = 0; d < outs[j].ndim; d++) numel *= outs[j].shape[d];
        if (outs[j].dtype == DG_F32 && numel > 1 && !(n->op->f32_outputs >> j & 1u)) outs[j].dtype = store;
    }
    return DG_OK;
}

void dg_graph_weights(const dg_graph *g, bool *w) {
    for (int t = 0; t < g->n_tensors; t++) w[t] = g->tensors[t].role == DG_ROLE_PARAMETER;
    /* nodes in id order: a node's inputs were made before it */
    for (int v = 0; v < g->n_nodes; v++) {
        const dg_node *n = &g->nodes[v];
        bool from_weights = n->n_in > 0 && n->op && n->op->comm == DG_COMM_NONE;
        int any_weight = 0;
        for (int i = 0; i < n->n_in && from_weights; i++) {
            const dg_tensor *t = &g->tensors[n->in[i]];
            any_weight |= w[n->in[i]];
            from_weights = w[n->in[i]] || (t->role == DG_ROLE_INPUT && t->producer < 0 && dg_tensor_numel(t) == 1);
        }
        if (!from_weights || !any_weight) continue;
        for (int j = 0; j < n->n_out; j++)
            if (g->tensors[n->out[j]].role == DG_ROLE_ACTIVATION) w[n->out[j]] = true;
    }
}

int dg_graph_add(dg_graph *g, const dg_op_def *op, const dg_attrs *attrs, const int *inputs,
                 int n_in, int *out_ids, const char *name) {
    if (g->status != DG_OK) return -1;
    if (!op) return dg_graph_fail(g, "node '%s': no op", name ? name : "?");
    if (n_in < op->min_inputs || n_in > op->max_inputs || n_in > DG_MAX_INPUTS)
        return dg_graph_fail(g, "node '%s' (op %s): %d inputs, expected %d..%d", name ? name : "?",
                          op->name, n_in, op->min_inputs, op->max_inputs);
    for (int i = 0; i < n_in; i++)
        if (inputs[i] < 0 || inputs[i] >= g->n_tensors)
            return dg_graph_fail(g, "node '%s' (op %s): input %d is tensor %d, which does not exist",
                              name ? name : "?", op->name, i, inputs[i]);

    int nid = node_push(g, op, attrs, inputs, n_in, name);
    dg_tensor_desc outs[DG_MAX_OUTPUTS];
    memset(outs, 0, sizeof outs);
    dg_err err = {{0}};
    if (dg_op_infer(g, &g->nodes[nid], outs, &err) != DG_OK) {
        g->n_nodes--; /* the node was never valid */
        return dg_graph_fail(g, "node '%s' (op %s): %s", name ? name : op->name, op->name, err.msg);
    }
    bool needs_grad = false;
    for (int i = 0; i < n_in; i++) needs_grad |= g->tensors[inputs[i]].requires_grad;

    dg_node *n = &g->nodes[nid];
    n->n_out = op->n_outputs;
    for (int j = 0; j < op->n_outputs; j++) {
        char tname[DG_NAME_LEN + 16];
        if (op->n_outputs == 1)
            snprintf(tname, sizeof tname, "%s", n->name);
        else
            snprintf(tname, sizeof tname, "%.*s.%d", DG_NAME_LEN - 4, n->name, j);
        tname[DG_NAME_LEN - 1] = 0;
        int tid = tensor_push(g, tname, outs[j].dtype, outs[j].ndim, outs[j].shape,
                              DG_ROLE_ACTIVATION);
        n = &g->nodes[nid]; /* tensor_push does not move nodes, but stay safe */
        g->tensors[tid].producer = nid;
        g->tensors[tid].requires_grad = needs_grad && dg_dtype_is_float(outs[j].dtype);
        n->out[j] = tid;
        if (out_ids) out_ids[j] = tid;
    }
    /* Layouts propagate as the graph is built; when the rule cannot take
     * the inputs the outputs stay replicated and the verifier names the
     * node (a collective is missing before it). */
    dg_sharding lay[DG_MAX_OUTPUTS];
    if (dg_layout_infer(g, n, lay, NULL) == DG_OK)
        for (int j = 0; j < n->n_out; j++) g->tensors[n->out[j]].sharding = lay[j];
    return n->n_out > 0 ? n->out[0] : nid;
}

int dg_graph_add_raw(dg_graph *g, const dg_op_def *op, const dg_attrs *attrs, const int *inputs,
                     int n_in, const int *outputs, int n_out, const char *name) {
    DG_ASSERT(n_in <= DG_MAX_INPUTS && n_out <= DG_MAX_OUTPUTS);
    int nid = node_push(g, op, attrs, inputs, n_in, name);
    dg_node *n = &g->nodes[nid];
    n->n_out = n_out;
    for (int j = 0; j < n_out; j++) {
        n->out[j] = outputs[j];
        /* The verifier reports tensors written twice; keep the first writer. */
        if (outputs[j] >= 0 && outputs[j] < g->n_tensors && g->tensors[outputs[j]].producer < 0)
            g->tensors[outputs[j]].producer = nid;
    }
    return nid;
}

/* ---- uses ------------------------------------------------------- */

void dg_uses_build(const dg_graph *g, dg_uses *u) {
    u->offsets = dg_calloc((size_t)g->n_tensors + 1, sizeof(int));
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++) {
            int t = g->nodes[i].in[k];
            if (t >= 0 && t < g->n_tensors) u->offsets[t + 1]++;
        }
    for (int t = 0; t < g->n_tensors; t++) u->offsets[t + 1] += u->offsets[t];
    u->nodes = dg_malloc(sizeof(int) * (size_t)DG_MAX(u->offsets[g->n_tensors], 1));
    int *fill = dg_calloc((size_t)g->n_tensors, sizeof(int));
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++) {
            int t = g->nodes[i].in[k];
            if (t < 0 || t >= g->n_tensors) continue;
            /* A node reading the same tensor twice is listed twice. */
            u->nodes[u->offsets[t] + fill[t]++] = i;
        }
    dg_free(fill);
}

void dg_uses_free(dg_uses *u) {
    dg_free(u->offsets);
    dg_free(u->nodes);
    u->offsets = u->nodes = NULL;
}

/* ---- text ------------------------------------------------------------------- */

const char *dg_shape_str(const dg_tensor *t, char *buf) {
    int o = snprintf(buf, 64, "[");
    for (int i = 0; i < t->ndim && o < 60; i++)
        o += snprintf(buf + o, (size_t)(64 - o), "%s%lld", i ? "," : "", (long long)t->shape[i]);
    snprintf(buf + o, (size_t)(64 - o), "]");
    return buf;
}

const char *dg_sharding_str(const dg_tensor *t, char *buf) {
    return dg_layout_str(&t->sharding, t->ndim, buf);
}
