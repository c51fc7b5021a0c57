/* dg_verify_sharding.c — the verifier's layout rules (see dg_verify.h:
 * 'layout' and 'grad-group'). Passes rewrite only the forward; the backward
 * comes from adjoints, which keep layouts by construction (a collective's
 * adjoint is the collective that undoes it), so 'layout' checks forward
 * nodes. */
#include <string.h>

#include "dg_collective.h"
#include "dg_layout.h"
#include "dg_verify.h"
#include "dg_verify_internal.h"

static int check_param_grad_group(const dg_graph *g, const dg_node *n, const dg_sharding *want, dg_err *err);

static int check_layouts(const dg_graph *g, const dg_node *n, dg_err *err) {
    dg_sharding want[DG_MAX_OUTPUTS];
    char a[64], b[64];
    if (dg_layout_infer(g, n, want, NULL) != DG_OK) {
        int o = 0;
        char ins[DG_ERR_LEN / 2] = "";
        for (int k = 0; k < n->n_in && o < (int)sizeof ins - 70; k++)
            o += snprintf(ins + o, sizeof ins - (size_t)o, "%s'%s' %s", k ? ", " : "",
                          g->tensors[n->in[k]].name,
                          dg_layout_str(&g->tensors[n->in[k]].sharding, g->tensors[n->in[k]].ndim, a));
        if (n->op->comm != DG_COMM_NONE)
            return dg_verify_node_fail(err, n, "layout",
                                       "a collective over %s cannot take input %s: no layout "
                                       "changes here",
                                       dg_axis_name(n->group), ins);
        return dg_verify_node_fail(err, n, "layout",
                                   "the op cannot run on inputs %s: a collective is missing "
                                   "before it",
                                   ins);
    }
    for (int j = 0; j < n->n_out; j++) {
        const dg_tensor *t = &g->tensors[n->out[j]];
        if (t->role != DG_ROLE_ACTIVATION) continue; /* parameters keep their placement */
        if (!dg_layout_equal(&t->sharding, &want[j]))
            return dg_verify_node_fail(err, n, "layout",
                                       "output %d '%s' is laid out %s, but the op's rule gives %s "
                                       "from its inputs",
                                       j, t->name, dg_layout_str(&t->sharding, t->ndim, a),
                                       dg_layout_str(&want[j], t->ndim, b));
    }
    return check_param_grad_group(g, n, want, err);
}

/* A parameter replicated over tp whose forward reader runs on a tp slice
 * (SP: a norm, a row-parallel bias, the router on the local tokens) gets a
 * gradient summed over this rank's tokens only: it must come through a
 * copy_to_group over tp, whose adjoint all-reduces it over the group that
 * replicates it; and only such a one, else the reduction adds tp copies of
 * a whole gradient. `want`: n's outputs' layouts by its rule. */
static int check_param_grad_group(const dg_graph *g, const dg_node *n, const dg_sharding *want, dg_err *err) {
    if (n->op->comm != DG_COMM_NONE || n->n_out < 1) return DG_OK;
    const dg_tensor *o = &g->tensors[n->out[0]];
    for (int k = 0; k < n->n_in; k++) {
        const dg_tensor *x = &g->tensors[n->in[k]];
        if (dg_param_grad_partial(x, &want[0], o->ndim, DG_AXIS_TP))
            return dg_verify_node_fail(err, n, "grad-group",
                                       "it runs on a tp slice (output %s) but reads parameter '%s', replicated "
                                       "over tp, directly: its gradient is never all-reduced over tp (a "
                                       "copy_to_group is missing)",
                                       o->name, x->name);
        const dg_node *c = x->producer >= 0 ? &g->nodes[x->producer] : NULL;
        if (!c || c->op->comm != DG_COMM_COPY_TO_GROUP || c->group != DG_AXIS_TP) continue;
        const dg_tensor *p = &g->tensors[c->in[0]];
        if (p->role == DG_ROLE_PARAMETER && !dg_param_grad_partial(p, &want[0], o->ndim, DG_AXIS_TP))
            return dg_verify_node_fail(err, n, "grad-group",
                                       "parameter '%s' reaches it through a copy_to_group over tp, but every tp "
                                       "rank computes all of its gradient here: the all-reduce adds %d copies",
                                       p->name, (int)c->attrs.i[0]);
    }
    return DG_OK;
}

/* The gradients tensor t carries into collective c (t itself, or the inputs
 * of the pack nodes that made it, two levels deep), checked against c's group. */
static int check_grads_into(const dg_graph *g, const dg_node *c, int t, const int *param_of,
                            int depth, dg_err *err) {
    int p = param_of[t];
    if (p >= 0) {
        dg_axis want = dg_param_replica_axis(&g->tensors[p]); /* edp for expert weights */
        if (c->group != want)
            return dg_verify_node_fail(err, c, "grad-group",
                                       "it reduces the gradient of '%s' over %s, but that "
                                       "parameter is replicated over %s",
                                       g->tensors[p].name, dg_axis_name(c->group), dg_axis_name(want));
        /* and exactly the ranks that hold it: an expert weight whole over
         * tp (ETP 1) needs the tp ranks in its group, a tp-split one not */
        int have = (int)c->attrs.i[DG_COLL_GROUP_SIZE], need = dg_param_replica_size(g, &g->tensors[p]);
        if (need > 0 && have != need)
            return dg_verify_node_fail(err, c, "grad-group",
                                       "it reduces the gradient of '%s' over %d %s ranks, but %d ranks hold "
                                       "that parameter and compute different summands of its gradient",
                                       g->tensors[p].name, have, dg_axis_name(c->group), need);
        return DG_OK;
    }
    int src = g->tensors[t].producer;
    if (src < 0 || depth >= 2 || g->nodes[src].op->comm != DG_COMM_NONE) return DG_OK;
    const dg_node *s = &g->nodes[src];
    for (int k = 0; k < s->n_in; k++) DG_TRY(check_grads_into(g, c, s->in[k], param_of, depth + 1, err));
    return DG_OK;
}

int dg_verify_sharding_order(const dg_graph *g, const int *order, dg_err *err) {
    for (int i = 0; i < g->n_nodes; i++) {
        const dg_node *n = &g->nodes[order ? order[i] : i];
        if (n->phase == DG_PHASE_FORWARD) DG_TRY(check_layouts(g, n, err));
    }
    int *param_of = dg_malloc(sizeof(int) * (size_t)DG_MAX(g->n_tensors, 1));
    for (int t = 0; t < g->n_tensors; t++) param_of[t] = -1;
    for (int t = 0; t < g->n_tensors; t++) {
        const dg_tensor *p = &g->tensors[t];
        if (p->role == DG_ROLE_PARAMETER && p->grad >= 0 && p->grad < g->n_tensors) param_of[p->grad] = t;
    }
    int st = DG_OK;
    /* Once the DP stage has recorded the groups (mesh[EDP] set), the expert
     * group must hold exactly the ranks that replicate each expert weight,
     * even where no collective reduces it (a group of one). */
    for (int t = 0; t < g->n_tensors && st == DG_OK && g->mesh[DG_AXIS_EDP] > 0; t++) {
        const dg_tensor *p = &g->tensors[t];
        int need = dg_param_replica_size(g, p);
        if (!dg_param_is_expert(p) || need <= 0 || need == g->mesh[DG_AXIS_EDP]) continue;
        st = dg_err_set(err, DG_EINTERNAL,
                        "tensor %d '%s': rule 'grad-group' broken: %d ranks hold this expert weight and compute "
                        "different summands of its gradient, but the edp group has %d",
                        t, p->name, need, g->mesh[DG_AXIS_EDP]);
    }
    for (int i = 0; i < g->n_nodes && st == DG_OK; i++) {
        const dg_node *c = &g->nodes[i];
        if (c->phase == DG_PHASE_FORWARD || c->n_in < 1 ||
            (c->group != DG_AXIS_DP && c->group != DG_AXIS_EDP) ||
            (c->op->comm != DG_COMM_ALL_REDUCE && c->op->comm != DG_COMM_REDUCE_SCATTER))
            continue;
        st = check_grads_into(g, c, c->in[0], param_of, 0, err);
    }
    dg_free(param_of);
    return st;
}

int dg_verify_sharding(const dg_graph *g, dg_err *err) {
    /* nodes are appended after their inputs by the builder; a rewired graph
     * should be checked with dg_verify, which orders them first */
    return dg_verify_sharding_order(g, NULL, err);
}
