/* dg_pass_precision.c — see dg_pass_precision.h. */
#include "dg_pass_precision.h"

#include <string.h>

#include "dg_collective.h"
#include "dg_reemit.h"

typedef struct precision_ctx {
    const dg_pass_precision_opts *o;
    int *copy; /* per dst tensor: its parameter's 16-bit working copy, or -1 */
    int cap;
    int scale; /* the loss_scale input, or -1 */
} precision_ctx;

/* The 16-bit working copy of parameter t of dst, made on first use. */
static int working_copy(dg_graph *dst, precision_ctx *x, int t) {
    if (t >= x->cap) {
        int cap = DG_MAX(2 * x->cap, t + 1);
        x->copy = dg_realloc(x->copy, sizeof(int) * (size_t)cap);
        for (int i = x->cap; i < cap; i++) x->copy[i] = -1;
        x->cap = cap;
    }
    if (x->copy[t] < 0) {
        dg_attrs a;
        memset(&a, 0, sizeof a);
        a.i[0] = x->o->dtype;
        char name[DG_NAME_LEN];
        snprintf(name, sizeof name, "%.*s.%s", DG_NAME_LEN - 6, dst->tensors[t].name, dg_dtype_name(x->o->dtype));
        int from = t;
        if (x->scale >= 0) { /* its gradient leaves the copy unscaled */
            dg_attrs u;
            memset(&u, 0, sizeof u);
            u.i[0] = -1;
            int in[2] = {t, x->scale};
            from = dg_graph_add(dst, x->o->loss_scaling, &u, in, 2, NULL, NULL);
            if (from < 0) return -1;
        }
        x->copy[t] = dg_graph_add(dst, x->o->cast, &a, &from, 1, NULL, name);
    }
    return x->copy[t];
}

static int cast_params(dg_graph *dst, const dg_graph *src, const dg_node *n, int *in, int *out, void *ctx,
                       dg_err *err) {
    (void)src;
    (void)out;
    (void)err;
    precision_ctx *x = ctx;
    for (int i = 0; i < n->n_in; i++) {
        const dg_tensor *t = &dst->tensors[in[i]];
        if (t->role != DG_ROLE_PARAMETER || t->dtype != DG_F32 || dg_tensor_numel(t) <= 1) continue;
        int c = working_copy(dst, x, in[i]);
        if (c < 0) return dst->status;
        in[i] = c;
    }
    return DG_REEMIT_COPY;
}

/* A received activation (CP's ring: K and V from the neighbour) was
 * computed from parameters on the sending rank, so it arrives in 16 bits:
 * a copy of src whose float recvs of more than one element say so. */
static dg_graph *recvs_16(const dg_graph *src, dg_dtype dt) {
    dg_graph *c = dg_graph_clone(src);
    for (int v = 0; v < c->n_nodes; v++) {
        dg_node *n = &c->nodes[v];
        if (!n->op || n->op->comm != DG_COMM_RECV || n->n_out != 1) continue;
        dg_tensor *t = &c->tensors[n->out[0]];
        if (t->dtype != DG_F32 || dg_tensor_numel(t) <= 1) continue;
        n->attrs.i[DG_COLL_DTYPE] = dt;
        t->dtype = dt;
    }
    return c;
}

int dg_pass_precision(const dg_graph *src_in, const dg_pass_precision_opts *o, dg_graph **out, int *tmap,
                      dg_err *err) {
    if (!dg_dtype_is_16(o->dtype) || !o->cast)
        return dg_err_set(err, DG_EINTERNAL, "precision pass: dtype %s, expected bf16 or f16", dg_dtype_name(o->dtype));
    dg_graph *src = recvs_16(src_in, o->dtype);
    precision_ctx x = {o, NULL, 0, -1};
    dg_reemit_opts ro = dg_reemit_plain();
    ro.node = cast_params;
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
    dg_free(x.copy);
    dg_graph_free(src);
    if (st != DG_OK) {
        dg_graph_free(g);
        return st;
    }
    *out = g;
    return DG_OK;
}
