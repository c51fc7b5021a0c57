/* dg_pass_ep.c — see dg_pass_ep.h. */
#include "dg_pass_ep.h"

#include <string.h>

#include "dg_layout.h"
#include "dg_reemit.h"

/* Expert weights placed over ep: this rank's slice of the placed dim. */
static int ep_leaf(dg_graph *dst, const dg_graph *src, int t, void *ctx) {
    const dg_pass_ep_opts *o = ctx;
    const dg_tensor *x = &src->tensors[t];
    if (x->role != DG_ROLE_PARAMETER || o->ep_size <= 1) return dg_reemit_leaf_default(dst, src, t, ctx);
    int64_t shape[DG_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    dg_sharding lay = x->sharding;
    for (int d = 0; d < x->ndim; d++) {
        if (x->place.split[d] != DG_AXIS_EP) continue;
        if (shape[d] % o->ep_size != 0)
            return dg_graph_fail(dst, "--expert-model-parallel-size %d does not divide dim %d (%lld) of '%s'",
                                 o->ep_size, d, (long long)shape[d], x->name);
        shape[d] /= o->ep_size;
        lay.split[d] = DG_AXIS_EP;
    }
    dg_param_spec spec = {(dg_init)x->init, x->place};
    int id = dg_param(dst, x->name, x->ndim, shape, &spec);
    if (id >= 0) dst->tensors[id].sharding = lay;
    return id;
}

void dg_pass_ep_place_experts(dg_graph *g, const dg_pass_ep_opts *o) {
    if (o->etp_size != 1) return;
    for (int t = 0; t < g->n_tensors; t++) {
        dg_tensor *x = &g->tensors[t];
        if (!dg_param_is_expert(x)) continue;
        for (int d = 0; d < x->ndim; d++)
            if (x->place.split[d] == DG_AXIS_TP) {
                x->place.split[d] = DG_AXIS_NONE;
                x->place.stride[d] = 0;
            }
    }
}

/* The EP pass lowers the experts; other ops' lowerings (dropout and
 * matmul under SP and --tp-comm-overlap) are the TP pass's. */
static int lower_all(const dg_graph *src, const dg_node *n, void *ctx) {
    (void)src;
    (void)ctx;
    return !strcmp(n->op->name, "moe_experts");
}

int dg_pass_ep(const dg_graph *src, const dg_pass_ep_opts *o, dg_graph **out, int *tmap, dg_err *err) {
    *out = NULL;
    if (o->ep_size < 1) return dg_err_set(err, DG_EINPUT, "--expert-model-parallel-size: expected >= 1, got %d", o->ep_size);
    dg_graph *g = dg_graph_new(src->name);
    memcpy(g->mesh, src->mesh, sizeof g->mesh);
    g->mesh[DG_AXIS_EP] = o->ep_size;
    dg_reemit_opts ro = dg_reemit_plain();
    ro.leaf = ep_leaf;
    ro.lower = lower_all;
    ro.lower_opts = o;
    ro.ctx = (void *)o;
    int st = dg_reemit(g, src, &ro, tmap, err);
    if (st != DG_OK) {
        dg_graph_free(g);
        return st;
    }
    *out = g;
    return DG_OK;
}
