/* dg_verify.c — graph invariants (see dg_verify.h for the rules).
 *
 * The checks go from cheap and structural to expensive and semantic, so that
 * a later check can trust what an earlier one established: ids are in range
 * before anything indexes with them, producers are consistent before the
 * topological sort relies on them, and the graph is acyclic before infer()
 * is trusted to terminate on sensible inputs. */
#include "dg_verify.h"
#include "dg_verify_internal.h"

#include <stdarg.h>
#include <string.h>

#include "dg_op.h"

static const char *op_name(const dg_node *n) { return n->op ? n->op->name : "?"; }

/* "node 7 'attn_out' (op matmul): rule 'shape' broken: <detail>" */
int dg_verify_node_fail(dg_err *err, const dg_node *n, const char *rule, const char *fmt, ...) {
    char detail[DG_ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    return dg_err_set(err, DG_EINPUT, "node %d '%s' (op %s): rule '%s' broken: %s", n->id,
                      n->name, op_name(n), rule, detail);
}
#define node_fail dg_verify_node_fail

static int tensor_fail(dg_err *err, const dg_tensor *t, const char *rule, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int tensor_fail(dg_err *err, const dg_tensor *t, const char *rule, const char *fmt, ...) {
    char detail[DG_ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    return dg_err_set(err, DG_EINPUT, "tensor %d '%s': rule '%s' broken: %s", t->id, t->name,
                      rule, detail);
}

/* Shapes as text from a desc, matching dg_shape_str's format. */
static const char *desc_str(const dg_tensor_desc *d, char *buf) {
    dg_tensor t;
    memset(&t, 0, sizeof t);
    t.ndim = d->ndim < 0 ? 0 : DG_MIN(d->ndim, DG_MAX_DIMS);
    for (int i = 0; i < t.ndim; i++) t.shape[i] = d->shape[i];
    return dg_shape_str(&t, buf);
}

static bool is_leaf_role(dg_role r) {
    return r == DG_ROLE_PARAMETER || r == DG_ROLE_INPUT || r == DG_ROLE_OPTIMIZER ||
           r == DG_ROLE_GRADIENT;
}

/* ---- pass 1: tensors on their own ------------------------------------------- */
static int check_tensors(const dg_graph *g, dg_err *err) {
    for (int i = 0; i < g->n_tensors; i++) {
        const dg_tensor *t = &g->tensors[i];
        if (t->id != i) return tensor_fail(err, t, "ids", "its id is %d but it sits at index %d", t->id, i);
        if ((unsigned)t->dtype >= DG_DTYPE_COUNT)
            return tensor_fail(err, t, "ids", "dtype %d is not a dg_dtype", (int)t->dtype);
        if ((unsigned)t->role >= DG_ROLE_COUNT)
            return tensor_fail(err, t, "ids", "role %d is not a dg_role", (int)t->role);
        if (t->producer < -1 || t->producer >= g->n_nodes)
            return tensor_fail(err, t, "ids", "producer is node %d, graph has %d nodes",
                               t->producer, g->n_nodes);
        if (t->grad < -1 || t->grad >= g->n_tensors)
            return tensor_fail(err, t, "ids", "grad is tensor %d, graph has %d tensors", t->grad,
                               g->n_tensors);
        for (int d = 0; d < DG_MAX_DIMS; d++)
            if (t->sharding.split[d] >= DG_AXIS_COUNT)
                return tensor_fail(err, t, "ids", "sharding of dimension %d is axis %d, not a dg_axis",
                                   d, t->sharding.split[d]);
        if (t->sharding.partial >= DG_AXIS_COUNT)
            return tensor_fail(err, t, "ids", "partial-sum axis %d is not a dg_axis",
                               t->sharding.partial);
        if (t->ndim < 0 || t->ndim > DG_MAX_DIMS)
            return tensor_fail(err, t, "tensor", "rank %d outside 0..%d", t->ndim, DG_MAX_DIMS);
        for (int d = 0; d < t->ndim; d++)
            if (t->shape[d] <= 0)
                return tensor_fail(err, t, "tensor", "dimension %d is %lld, expected > 0", d,
                                   (long long)t->shape[d]);
    }
    return DG_OK;
}

/* ---- pass 2: each node on its own -------------------------------------------- */
static int check_node_local(const dg_graph *g, const dg_node *n, int index, dg_err *err) {
    if (n->id != index) return node_fail(err, n, "ids", "its id is %d but it sits at index %d", n->id, index);
    if (!n->op) return node_fail(err, n, "op", "the node has no op");
    const dg_op_def *op = n->op;
    if (n->n_in < op->min_inputs || n->n_in > op->max_inputs || n->n_in < 0 ||
        n->n_in > DG_MAX_INPUTS)
        return node_fail(err, n, "inputs", "%d inputs, op takes %d..%d", n->n_in,
                         op->min_inputs, op->max_inputs);
    if (n->n_out != op->n_outputs || n->n_out < 0 || n->n_out > DG_MAX_OUTPUTS)
        return node_fail(err, n, "outputs", "%d outputs, op produces %d", n->n_out,
                         op->n_outputs);
    for (int k = 0; k < n->n_in; k++)
        if (n->in[k] < 0 || n->in[k] >= g->n_tensors)
            return node_fail(err, n, "ids", "input %d is tensor %d, graph has %d tensors", k,
                             n->in[k], g->n_tensors);
    for (int j = 0; j < n->n_out; j++)
        if (n->out[j] < 0 || n->out[j] >= g->n_tensors)
            return node_fail(err, n, "ids", "output %d is tensor %d, graph has %d tensors", j,
                             n->out[j], g->n_tensors);
    if ((unsigned)n->phase >= DG_PHASE_COUNT)
        return node_fail(err, n, "ids", "phase %d is not a dg_phase", (int)n->phase);
    if ((unsigned)n->stream >= DG_STREAM_COUNT)
        return node_fail(err, n, "ids", "stream %d is not a dg_stream_class", (int)n->stream);
    if ((unsigned)n->group >= DG_AXIS_COUNT)
        return node_fail(err, n, "ids", "group %d is not a dg_axis", (int)n->group);
    if (op->comm != DG_COMM_NONE && n->group == DG_AXIS_NONE)
        return node_fail(err, n, "group",
                         "a collective must name the axis whose group it runs over (group is none)");
    return DG_OK;
}

/* ---- pass 3: who writes what ------------------------------------------------- */
static int check_producers(const dg_graph *g, dg_err *err) {
    /* writer[t]: the first node (by id) listing t as an output, or -1 */
    int *writer = dg_malloc(sizeof(int) * (size_t)DG_MAX(g->n_tensors, 1));
    for (int t = 0; t < g->n_tensors; t++) writer[t] = -1;
    int st = DG_OK;
    for (int i = 0; i < g->n_nodes && st == DG_OK; i++) {
        const dg_node *n = &g->nodes[i];
        for (int j = 0; j < n->n_out && st == DG_OK; j++) {
            int t = n->out[j];
            if (writer[t] >= 0) {
                const dg_node *w = &g->nodes[writer[t]];
                st = node_fail(err, n, "single-producer",
                               "output %d '%s' (tensor %d) is also produced by node %d '%s' (op %s)",
                               j, g->tensors[t].name, t, w->id, w->name, op_name(w));
            } else {
                writer[t] = i;
            }
        }
    }
    for (int t = 0; t < g->n_tensors && st == DG_OK; t++) {
        const dg_tensor *tt = &g->tensors[t];
        if (writer[t] >= 0 && tt->producer != writer[t])
            st = node_fail(err, &g->nodes[writer[t]], "producer",
                           "it writes tensor %d '%s', whose producer field says %d", t, tt->name,
                           tt->producer);
        else if (writer[t] < 0 && tt->producer >= 0)
            st = node_fail(err, &g->nodes[tt->producer], "producer",
                           "tensor %d '%s' names it as producer, but it is not among its outputs",
                           t, tt->name);
    }
    dg_free(writer);
    return st;
}

/* ---- pass 4: every input comes from somewhere ------------------------------------ */
static int check_dangling(const dg_graph *g, dg_err *err) {
    for (int i = 0; i < g->n_nodes; i++) {
        const dg_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_in; k++) {
            const dg_tensor *t = &g->tensors[n->in[k]];
            if (t->producer < 0 && !is_leaf_role(t->role))
                return node_fail(err, n, "dangling-input",
                                 "input %d '%s' (tensor %d) is an %s that no node produces", k,
                                 t->name, t->id, dg_role_name(t->role));
        }
    }
    return DG_OK;
}

/* ---- pass 5: ordering edges name nodes, and nothing waits on itself ----------------- */
static int check_order_ids(const dg_graph *g, dg_err *err) {
    if (g->n_order < 0 || (g->n_order > 0 && !g->order))
        return dg_err_set(err, DG_EINPUT, "graph '%s': rule 'ids' broken: %d ordering edges", g->name,
                          g->n_order);
    for (int i = 0; i < g->n_order; i++) {
        const dg_order_edge *e = &g->order[i];
        if (e->before < 0 || e->before >= g->n_nodes || e->after < 0 || e->after >= g->n_nodes)
            return dg_err_set(err, DG_EINPUT,
                              "graph '%s': rule 'ids' broken: ordering edge %d is %d -> %d, graph has %d nodes",
                              g->name, i, e->before, e->after, g->n_nodes);
    }
    return DG_OK;
}

/* A cycle through data edges, ordering edges or both: the topological order
 * fails and its message names a node on the cycle (dg_order.c). */
static int check_acyclic(const dg_graph *g, int *order, dg_err *err) {
    DG_TRY(check_order_ids(g, err));
    return dg_graph_topo_order(g, order, err);
}

/* ---- pass 6: the op's shape rule agrees with what is recorded -------------------- */
static int check_infer(const dg_graph *g, const int *order, dg_err *err) {
    for (int oi = 0; oi < g->n_nodes; oi++) {
        const dg_node *n = &g->nodes[order[oi]];
        if (!n->op->infer) return node_fail(err, n, "infer", "op has no infer() callback");
        dg_tensor_desc outs[DG_MAX_OUTPUTS];
        memset(outs, 0, sizeof outs);
        dg_err e = {{0}};
        if (dg_op_infer(g, n, outs, &e) != DG_OK)
            return node_fail(err, n, "infer", "op rejects its inputs: %s",
                             e.msg[0] ? e.msg : "(no reason given)");
        for (int j = 0; j < n->n_out; j++) {
            const dg_tensor *t = &g->tensors[n->out[j]];
            char a[64], b[64];
            bool same = outs[j].ndim == t->ndim;
            for (int d = 0; same && d < t->ndim; d++) same = outs[j].shape[d] == t->shape[d];
            if (!same)
                return node_fail(err, n, "shape", "output %d is %s, op infers %s", j,
                                 dg_shape_str(t, a), desc_str(&outs[j], b));
            if (outs[j].dtype != t->dtype)
                return node_fail(err, n, "dtype", "output %d is %s, op infers %s", j,
                                 dg_dtype_name(t->dtype), dg_dtype_name(outs[j].dtype));
        }
    }
    return DG_OK;
}

int dg_verify(const dg_graph *g, dg_err *err) {
    if (g->status != DG_OK)
        return dg_err_set(err, DG_EINPUT, "graph '%s': rule 'builder' broken: %s", g->name,
                          g->err.msg[0] ? g->err.msg : "a builder call failed");
    if (g->n_nodes < 0 || g->n_tensors < 0)
        return dg_err_set(err, DG_EINPUT, "graph '%s': rule 'ids' broken: negative counts",
                          g->name);
    DG_TRY(check_tensors(g, err));
    for (int i = 0; i < g->n_nodes; i++) DG_TRY(check_node_local(g, &g->nodes[i], i, err));
    DG_TRY(check_producers(g, err));
    DG_TRY(check_dangling(g, err));

    int *order = dg_malloc(sizeof(int) * (size_t)DG_MAX(g->n_nodes, 1));
    int st = check_acyclic(g, order, err);
    if (st == DG_OK) st = check_infer(g, order, err);
    if (st == DG_OK) st = dg_verify_sharding_order(g, order, err);
    dg_free(order);
    return st;
}

int dg_verify_after(const dg_graph *g, const char *stage, dg_err *err) {
    dg_err e = {{0}};
    int st = dg_verify(g, &e);
    if (st != DG_OK) dg_err_set(err, st, "after %s: %s", stage ? stage : "?", e.msg);
    return st;
}
