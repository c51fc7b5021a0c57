/* dg_pass_precision.c — see dg_pass_precision.h. */
#include "dg_pass_precision.h"

#include <string.h>

#include "dg_reemit.h"

typedef struct precision_ctx {
    const dg_pass_precision_opts *o;
    int *rounded; /* per dst tensor: its rounded copy, or -1 */
    int cap;
    int scale;    /* the loss_scale input, or -1 */
} precision_ctx;

/* Ops whose floating inputs stay fp32: the router and its losses. */
static int keeps_fp32(const dg_node *n) {
    const char *name = n->op->name;
    return !strcmp(name, "moe_router") || !strcmp(name, "moe_aux_loss") || !strcmp(name, "moe_z_loss");
}

static int rounded_copy(dg_graph *dst, precision_ctx *x, int t) {
    if (t >= x->cap) {
        int cap = DG_MAX(2 * x->cap, t + 1);
        x->rounded = dg_realloc(x->rounded, sizeof(int) * (size_t)cap);
        for (int i = x->cap; i < cap; i++) x->rounded[i] = -1;
        x->cap = cap;
    }
    if (x->rounded[t] < 0) {
        dg_attrs a;
        memset(&a, 0, sizeof a);
        a.i[0] = x->o->format;
        a.i[1] = dst->tensors[t].role != DG_ROLE_PARAMETER; /* activations round their gradient too */
        char name[DG_NAME_LEN];
        snprintf(name, sizeof name, "%.*s.16", DG_NAME_LEN - 4, dst->tensors[t].name);
        int from = t;
        if (x->scale >= 0 && !a.i[1]) { /* a parameter's copy: its gradient leaves unscaled */
            dg_attrs u;
            memset(&u, 0, sizeof u);
            u.i[0] = -1;
            int in[2] = {t, x->scale};
            from = dg_graph_add(dst, x->o->loss_scaling, &u, in, 2, NULL, NULL);
            if (from < 0) return -1;
        }
        x->rounded[t] = dg_graph_add(dst, x->o->round16, &a, &from, 1, NULL, name);
    }
    return x->rounded[t];
}

static int round_inputs(dg_graph *dst, const dg_node *n, int *in, void *ctx) {
    precision_ctx *x = ctx;
    if (keeps_fp32(n)) return DG_OK;
    for (int i = 0; i < n->n_in; i++) {
        const dg_tensor *t = &dst->tensors[in[i]];
        if (t->dtype != DG_F32 || dg_tensor_numel(t) <= 1) continue;
        int r = rounded_copy(dst, x, in[i]);
        if (r < 0) return dst->status;
        in[i] = r;
    }
    return DG_OK;
}

int dg_pass_precision(const dg_graph *src, const dg_pass_precision_opts *o, dg_graph **out, int *tmap,
                      dg_err *err) {
    precision_ctx x = {o, NULL, 0, -1};
    dg_reemit_opts ro = dg_reemit_plain();
    ro.inputs = round_inputs;
    ro.ctx = &x;
    dg_graph *g = dg_graph_new(src->name);
    memcpy(g->mesh, src->mesh, sizeof g->mesh);
    if (o->loss_scaling) x.scale = dg_input_new(g, "loss_scale", DG_F32, 1, DG_SHAPE(1));
    int st = dg_reemit(g, src, &ro, tmap, err);
    if (st == DG_OK && o->loss_scaling) { /* the loss's gradient is scaled from here */
        dg_attrs a;
        memset(&a, 0, sizeof a);
        a.i[0] = 1;
        int in[2] = {tmap[o->loss], x.scale};
        tmap[o->loss] = dg_graph_add(g, o->loss_scaling, &a, in, 2, NULL, "loss.scaled");
        if (tmap[o->loss] < 0) st = dg_err_set(err, g->status, "%s", g->err.msg);
    }
    dg_free(x.rounded);
    if (st != DG_OK) {
        dg_graph_free(g);
        return st;
    }
    *out = g;
    return DG_OK;
}
