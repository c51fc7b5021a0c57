/* dg_op_dropout.c — the dropout op; its adjoint is itself on dy. */
#include "dg_op_dropout.h"

#include "dg_cpu_dropout.h"
#include "dg_layout.h"
#include "dg_ops_util.h"

static int infer_dropout(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    DG_INFER_DTYPE(g, n, 1, DG_I32, err);
    const dg_tensor *x = DG_IN(g, n, 0), *k = DG_IN(g, n, 1);
    char s[64];
    if (x->ndim < 1 || dg_tensor_numel(k) != 4)
        return DG_INFER_FAIL(err, "rule 'shape' broken: x %s needs a sample dim and key 4 ints",
                             dg_shape_str(x, s));
    if (!(n->attrs.f[0] >= 0 && n->attrs.f[0] < 1))
        return DG_INFER_FAIL(err, "rule 'attrs' broken: p is %g, expected [0, 1)", n->attrs.f[0]);
    dg_desc_like(o, x);
    return DG_OK;
}

static void cost_dropout(const dg_graph *g, const dg_node *n, dg_cost *c) {
    double e = (double)dg_tensor_numel(DG_IN(g, n, 0));
    c->flops = 10.0 * e; /* the hash */
    c->bytes = 8.0 * e;
}

static int k_dropout(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                     void *const *out) {
    const dg_tensor *x = DG_IN(g, n, 0);
    int64_t B = x->shape[0];
    dg_cpu_dropout(e->team, in[0], out[0], in[1], n->attrs.i[0], n->attrs.f[0], B,
                   dg_tensor_numel(x) / (B > 0 ? B : 1));
    return DG_OK;
}

static int adj_dropout(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    din[0] = dg_add1(g, &dg_op_dropout, &n->attrs, (int[]){dout[0], n->in[1]}, 2, NULL);
    din[1] = -1;
    return g->status;
}

static int shard_dropout(const dg_graph *g, const dg_node *n, const dg_sharding *in,
                         dg_sharding *out, dg_attrs *attrs) {
    (void)g;
    (void)n;
    (void)attrs;
    /* the mask hashes each element's index within its whole sample: a
     * slice of the sample (SP's sequence split) would draw the mask of the
     * sample's first elements, so no dim may be split */
    if (!dg_layout_is_replicated(&in[0]) || !dg_layout_is_replicated(&in[1])) return DG_SHARD_CANNOT;
    out[0] = in[0];
    return DG_OK;
}

const dg_op_def dg_op_dropout = {
    .name = "dropout", .min_inputs = 2, .max_inputs = 2, .n_outputs = 1,
    .iattr_names = {"site"}, .fattr_names = {"p"},
    .infer = infer_dropout, .cost = cost_dropout, .adjoint = adj_dropout, .kernel = {k_dropout},
    .shard = shard_dropout,
};

int dg_dropout(dg_graph *g, int x, int key, double p, int site) {
    dg_attrs a = dg_attrs_zero();
    a.f[0] = p;
    a.i[0] = site;
    return dg_add1(g, &dg_op_dropout, &a, (int[]){x, key}, 2, NULL);
}
