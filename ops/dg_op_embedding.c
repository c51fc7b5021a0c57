/* dg_op_embedding.c — embedding and embedding_bwd. */
#include "dg_op_embedding.h"

#include "dg_cpu_embedding.h"
#include "dg_op_shard.h"
#include "dg_ops_util.h"

static int infer_embedding(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    DG_INFER_DTYPE(g, n, 1, DG_I32, err);
    const dg_tensor *tb = DG_IN(g, n, 0), *tk = DG_IN(g, n, 1);
    char s[64];
    if (tb->ndim != 2)
        return DG_INFER_FAIL(err, "rule 'shape' broken: table is %s, expected [V, H]",
                             dg_shape_str(tb, s));
    if (tk->ndim >= DG_MAX_DIMS)
        return DG_INFER_FAIL(err, "rule 'shape' broken: tokens %s has more than %d dims",
                             dg_shape_str(tk, s), DG_MAX_DIMS - 1);
    dg_desc_like(o, tk);
    o->dtype = DG_F32;
    o->ndim = tk->ndim + 1;
    o->shape[tk->ndim] = tb->shape[1];
    return DG_OK;
}

static void cost_embedding(const dg_graph *g, const dg_node *n, dg_cost *c) {
    double e = (double)dg_tensor_numel(DG_OUT(g, n, 0));
    c->flops = 0;
    c->bytes = 4.0 * (2.0 * e + (double)dg_tensor_numel(DG_IN(g, n, 1)));
}

static int k_embedding(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                       void *const *out) {
    const dg_tensor *tb = DG_IN(g, n, 0);
    return dg_cpu_embedding_fwd(e->team, in[0], in[1], out[0], dg_tensor_numel(DG_IN(g, n, 1)),
                                tb->shape[0], tb->shape[1], NULL);
}

static int adj_embedding(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    dg_attrs a = dg_attrs_zero();
    a.i[0] = DG_IN(g, n, 0)->shape[0];
    din[0] = dg_add1(g, &dg_op_embedding_bwd, &a, (int[]){dout[0], n->in[1]}, 2, NULL);
    return g->status;
}

const dg_op_def dg_op_embedding = {
    .name = "embedding", .min_inputs = 2, .max_inputs = 2, .n_outputs = 1,
    .infer = infer_embedding, .cost = cost_embedding, .adjoint = adj_embedding,
    .kernel = k_embedding,
    .shard = dg_shard_embedding,
    .traits = DG_TRAIT_VOCAB,
};

int dg_embedding(dg_graph *g, int table, int tokens) {
    return dg_add1(g, &dg_op_embedding, NULL, (int[]){table, tokens}, 2, NULL);
}

/* ---- embedding_bwd: (dout [..., H], tokens [...]) -> dtable [V, H] ------------------------ */

static int infer_embedding_bwd(const dg_graph *g, const dg_node *n, dg_tensor_desc *o,
                               dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    DG_INFER_DTYPE(g, n, 1, DG_I32, err);
    const dg_tensor *d = DG_IN(g, n, 0), *tk = DG_IN(g, n, 1);
    char a[64], b[64];
    if (d->ndim != tk->ndim + 1 || dg_rows(d) != dg_tensor_numel(tk))
        return DG_INFER_FAIL(err, "rule 'shape' broken: dout %s must be tokens %s plus [H]",
                             dg_shape_str(d, a), dg_shape_str(tk, b));
    if (n->attrs.i[0] <= 0)
        return DG_INFER_FAIL(err, "rule 'attrs' broken: vocab size V is %lld",
                             (long long)n->attrs.i[0]);
    dg_desc_set(o, DG_F32, 2, (int64_t[]){n->attrs.i[0], dg_cols(d)});
    return DG_OK;
}

static void cost_embedding_bwd(const dg_graph *g, const dg_node *n, dg_cost *c) {
    double e = (double)dg_tensor_numel(DG_IN(g, n, 0));
    c->flops = e;
    c->bytes = 4.0 * (e + (double)dg_tensor_numel(DG_OUT(g, n, 0)));
}

static int k_embedding_bwd(const dg_exec_env *e, const dg_graph *g, const dg_node *n,
                           void *const *in, void *const *out) {
    const dg_tensor *d = DG_IN(g, n, 0);
    return dg_cpu_embedding_bwd(e->team, in[0], in[1], out[0], dg_rows(d), n->attrs.i[0],
                                dg_cols(d), NULL);
}

const dg_op_def dg_op_embedding_bwd = {
    .name = "embedding_bwd", .min_inputs = 2, .max_inputs = 2, .n_outputs = 1,
    .iattr_names = {"vocab"},
    .infer = infer_embedding_bwd, .cost = cost_embedding_bwd, .kernel = k_embedding_bwd,
};
