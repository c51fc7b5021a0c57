/* dg_autodiff.c — reverse mode over the graph (see dg_autodiff.h). */
#include "dg_autodiff.h"

#include <string.h>

/* Add contribution c to the running gradient of tensor t. */
static int accumulate(dg_graph *g, const dg_autodiff_ops *ops, int *acc, int t, int c) {
    if (c < 0) return DG_OK;
    if (acc[t] < 0) {
        acc[t] = c;
        return DG_OK;
    }
    int in[2] = {acc[t], c};
    int s = dg_graph_add(g, ops->add, NULL, in, 2, NULL, NULL);
    if (s < 0) return g->status;
    acc[t] = s;
    return DG_OK;
}

int dg_autodiff(dg_graph *g, int loss, const dg_autodiff_ops *ops, int *loss_seed, dg_err *err) {
    return dg_autodiff_seeded(g, loss, 0, NULL, NULL, ops, loss_seed, err);
}

int dg_autodiff_seeded(dg_graph *g, int loss, int n_seeds, const int *seed_t, const int *seed_g,
                       const dg_autodiff_ops *ops, int *loss_seed, dg_err *err) {
    if (g->status != DG_OK) return dg_err_set(err, g->status, "%s", g->err.msg);
    if ((loss < 0 && n_seeds == 0) || loss >= g->n_tensors)
        return dg_err_set(err, DG_EINPUT, "autodiff: loss tensor %d does not exist", loss);
    const dg_tensor *L = loss >= 0 ? &g->tensors[loss] : NULL;
    if (L && (L->dtype != DG_F32 || dg_tensor_numel(L) != 1))
        return dg_err_set(err, DG_EINPUT, "autodiff: loss '%s' must be an f32 scalar", L->name);

    int n_fwd = g->n_nodes;
    int *order = dg_malloc(sizeof(int) * (size_t)DG_MAX(n_fwd, 1));
    int st = dg_graph_topo_order(g, order, err);
    if (st != DG_OK) {
        dg_free(order);
        return st;
    }

    /* 1. Which nodes lie on a path to the loss: walk producers back from it. */
    char *needed = dg_calloc((size_t)DG_MAX(n_fwd, 1), 1);
    char *reaches = dg_calloc((size_t)g->n_tensors, 1); /* tensor influences the loss */
    if (loss >= 0) reaches[loss] = 1;
    for (int i = 0; i < n_seeds; i++) reaches[seed_t[i]] = 1;
    for (int k = n_fwd - 1; k >= 0; k--) {
        const dg_node *n = &g->nodes[order[k]];
        int hit = 0;
        for (int j = 0; j < n->n_out; j++) hit |= reaches[n->out[j]];
        if (!hit) continue;
        needed[order[k]] = 1;
        for (int i = 0; i < n->n_in; i++) reaches[n->in[i]] = 1;
    }

    /* acc[t]: running gradient of tensor t (-1: none yet). Sized for the
     * tensors that exist now; backward tensors never need a gradient. */
    int n_t0 = g->n_tensors;
    int *acc = dg_malloc(sizeof(int) * (size_t)n_t0);
    for (int t = 0; t < n_t0; t++) acc[t] = -1;

    dg_phase saved_phase = g->cur_phase;
    int saved_layer = g->cur_layer, saved_mb = g->cur_microbatch;
    g->cur_phase = DG_PHASE_BACKWARD;

    /* 2. Seeds: the given gradients, and d loss / d loss = 1. */
    for (int i = 0; i < n_seeds; i++)
        if ((st = accumulate(g, ops, acc, seed_t[i], seed_g[i])) != DG_OK) {
            st = dg_err_set(err, st, "autodiff: seeding '%s': %s", g->tensors[seed_t[i]].name, g->err.msg);
            goto done;
        }
    if (loss >= 0) {
        L = &g->tensors[loss]; /* the seeds' adds may have moved the array */
        dg_attrs fa;
        memset(&fa, 0, sizeof fa);
        fa.i[0] = L->ndim;
        for (int i = 0; i < L->ndim; i++) fa.i[1 + i] = L->shape[i];
        fa.f[0] = 1.0;
        int seed = dg_graph_add(g, ops->fill, &fa, NULL, 0, NULL, "grad_seed");
        if (seed < 0) {
            st = dg_err_set(err, g->status, "autodiff: %s", g->err.msg);
            goto done;
        }
        acc[loss] = seed;
        if (loss_seed) *loss_seed = seed;
    }

    /* 3. Reverse topological order: every user of a tensor is visited before
     * its producer, so acc[out] is final when the producer's turn comes. */
    for (int k = n_fwd - 1; k >= 0; k--) {
        int nid = order[k];
        if (!needed[nid]) continue;
        dg_node fwd = g->nodes[nid]; /* a copy: adjoint() may grow g->nodes */
        int dout[DG_MAX_OUTPUTS], din[DG_MAX_INPUTS];
        int any = 0, wants = 0;
        for (int j = 0; j < fwd.n_out; j++) {
            dout[j] = acc[fwd.out[j]];
            any |= dout[j] >= 0;
        }
        for (int i = 0; i < fwd.n_in; i++) {
            din[i] = -1;
            wants |= g->tensors[fwd.in[i]].requires_grad;
        }
        if (!any || !wants) continue;
        if (!fwd.op->adjoint) {
            st = dg_err_set(err, DG_EINPUT,
                            "autodiff: node %d '%s' (op %s): rule 'differentiable' broken: the op has no adjoint",
                            nid, fwd.name, fwd.op->name);
            goto done;
        }
        g->cur_layer = fwd.layer;
        g->cur_microbatch = fwd.microbatch;
        int first_new = g->n_nodes;
        st = fwd.op->adjoint(g, &fwd, dout, din);
        if (st != DG_OK || g->status != DG_OK) {
            st = dg_err_set(err, st != DG_OK ? st : g->status,
                            "autodiff: node %d '%s' (op %s): adjoint failed: %s", nid, fwd.name,
                            fwd.op->name, g->err.msg[0] ? g->err.msg : "(no message)");
            goto done;
        }
        for (int m = first_new; m < g->n_nodes; m++) g->nodes[m].fwd_node = nid;
        for (int i = 0; i < fwd.n_in; i++) {
            int t = fwd.in[i];
            if (din[i] < 0 || !g->tensors[t].requires_grad) continue;
            st = accumulate(g, ops, acc, t, din[i]);
            if (st != DG_OK) {
                st = dg_err_set(err, st, "autodiff: accumulating the gradient of '%s': %s",
                                g->tensors[t].name, g->err.msg);
                goto done;
            }
        }
    }

    /* 4. Publish gradients; name and mark the parameters' ones. A parameter
     * gets a gradient tensor of its own: when its accumulated tensor is
     * shared (an add's adjoint passes one gradient to both inputs), it is
     * copied as zeros + g, so marking it a gradient touches nothing else. */
    int *users = dg_calloc((size_t)g->n_tensors, sizeof(int));
    for (int t = 0; t < n_t0; t++)
        if (acc[t] >= 0 && t != loss && g->tensors[t].requires_grad) users[acc[t]]++;
    for (int t = 0; t < n_t0; t++) {
        if (acc[t] < 0 || t == loss) continue;
        dg_tensor *x = &g->tensors[t];
        if (!x->requires_grad) continue;
        if (x->role == DG_ROLE_PARAMETER && users[acc[t]] > 1) {
            dg_attrs za;
            memset(&za, 0, sizeof za);
            za.i[0] = x->ndim;
            for (int i = 0; i < x->ndim; i++) za.i[1 + i] = x->shape[i];
            g->cur_layer = x->layer;
            int zeros = dg_graph_add(g, ops->fill, &za, NULL, 0, NULL, NULL);
            int in[2] = {zeros, acc[t]};
            int copy = zeros < 0 ? -1 : dg_graph_add(g, ops->add, NULL, in, 2, NULL, NULL);
            if (copy < 0) {
                dg_free(users);
                st = dg_err_set(err, g->status, "autodiff: %s", g->err.msg);
                goto done;
            }
            users[acc[t]]--;
            acc[t] = copy;
            x = &g->tensors[t];
        }
        x->grad = acc[t];
        if (x->role == DG_ROLE_PARAMETER) {
            dg_tensor *gt = &g->tensors[acc[t]];
            gt->role = DG_ROLE_GRADIENT;
            gt->layer = x->layer;
            snprintf(gt->name, sizeof gt->name, "grad/%.*s", DG_NAME_LEN - 6, x->name);
        }
    }
    dg_free(users);
    st = DG_OK;
done:
    g->cur_phase = saved_phase;
    g->cur_layer = saved_layer;
    g->cur_microbatch = saved_mb;
    dg_free(acc);
    dg_free(reaches);
    dg_free(needed);
    dg_free(order);
    return st;
}
