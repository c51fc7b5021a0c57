/* dg_pass_ep.c — see dg_pass_ep.h. */
#include "dg_pass_ep.h"

#include <string.h>

#include "dg_etp.h"
#include "dg_layout.h"
#include "dg_moe_experts.h"
#include "dg_reemit.h"

/* Expert weights placed over ep: this rank's slice of the placed dim. */
static int ep_leaf(dg_graph *dst, const dg_graph *src, int t, void *ctx) {
    const dg_pass_ep_opts *o = ctx;
    return dg_reemit_leaf_shard(dst, src, t, DG_AXIS_EP, o->ep_size, "--expert-model-parallel-size");
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

/* ---- the rewrites and their table ------------------------------------------------------- */

/* moe_experts: dispatch, grouped GEMMs and combine for the pass's EP size,
 * dispatcher and chunks, with ETP's tp collectives under TP (dg_etp.h). */
static int ep_experts(dg_graph *g, const dg_node *n, const int *in, int *out, const dg_pass_ep_opts *po,
                           dg_err *err) {
    dg_ep_opts o = dg_ep_opts_default();
    o.ep_size = po->ep_size > 1 ? po->ep_size : 1;
    o.dispatcher = (dg_ep_dispatcher)po->dispatcher;
    o.chunks = po->chunks > 1 ? po->chunks : 1;
    o.recv_rows = po->recv_rows;
    dg_ep_experts_args a = {.x = in[0], .probs = in[1], .indices = in[2], .w1 = in[3], .w2 = in[4],
                            .num_experts = (int)n->attrs.i[0], .capacity_factor = n->attrs.f[0]};
    dg_moe_expert_mlp mlp = dg_moe_experts_mlp_of(n, in);
    a.mlp = &mlp;
    out[0] = dg_etp_experts(g, &o, &a);
    if (out[0] < 0) return dg_err_set(err, g->status != DG_OK ? g->status : DG_EINTERNAL, "%s", g->err.msg);
    return DG_OK;
}

/* The traits EP rewrites, and the table (the only way to a rewrite). */
#define DG_EP_TRAITS DG_TRAIT_EXPERTS
static const struct {
    const dg_op_def *op;
    int (*fn)(dg_graph *g, const dg_node *n, const int *in, int *out, const dg_pass_ep_opts *o, dg_err *err);
} ep_rewrites[] = {
    {&dg_op_moe_experts, ep_experts}, /* DG_TRAIT_EXPERTS */
    {NULL, NULL},
};

static int ep_node(dg_graph *dst, const dg_graph *src, const dg_node *n, int *in, int *out, void *ctx, dg_err *err) {
    (void)src;
    if (!(n->op->traits & DG_EP_TRAITS)) return DG_REEMIT_COPY;
    for (int i = 0; ep_rewrites[i].op; i++)
        if (ep_rewrites[i].op == n->op) return ep_rewrites[i].fn(dst, n, in, out, ctx, err);
    return dg_err_set(err, DG_EINPUT, "--expert-model-parallel-size: op '%s' (node '%s') has a trait EP rewrites "
                      "and no entry in its table (parallel/ep/dg_pass_ep.c)", n->op->name, n->name);
}

int dg_pass_ep(const dg_graph *src, const dg_pass_ep_opts *o, dg_graph **out, int *tmap, dg_err *err) {
    *out = NULL;
    if (o->ep_size < 1) return dg_err_set(err, DG_EINPUT, "--expert-model-parallel-size: expected >= 1, got %d", o->ep_size);
    dg_reemit_opts ro = dg_reemit_plain();
    ro.leaf = ep_leaf;
    ro.node = ep_node;
    ro.ctx = (void *)o;
    return dg_reemit_pass(src, DG_AXIS_EP, o->ep_size, &ro, out, tmap, err);
}
