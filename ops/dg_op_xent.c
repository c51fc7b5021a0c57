/* dg_op_xent.c — softmax_xent and softmax_xent_bwd. */
#include "dg_op_xent.h"

#include "dg_cpu_xent.h"
#include "dg_ops_util.h"

/* logits at in[0], targets at in[1], mask (or -1 for none) at in[mask_at]. */
static int check_xent_inputs(const dg_graph *g, const dg_node *n, int mask_at, dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    DG_INFER_DTYPE(g, n, 1, DG_I32, err);
    const dg_tensor *lg = DG_IN(g, n, 0), *tg = DG_IN(g, n, 1);
    char a[64], b[64];
    if (lg->ndim < 2)
        return DG_INFER_FAIL(err, "rule 'shape' broken: logits is %s, expected [..., V]",
                             dg_shape_str(lg, a));
    if (dg_tensor_numel(tg) != dg_rows(lg))
        return DG_INFER_FAIL(err, "rule 'shape' broken: targets %s must have one entry per row "
                                  "of logits %s",
                             dg_shape_str(tg, a), dg_shape_str(lg, b));
    if (mask_at >= 0 && mask_at < n->n_in) {
        DG_INFER_DTYPE(g, n, mask_at, DG_F32, err);
        if (!dg_same_shape(DG_IN(g, n, mask_at), tg))
            return DG_INFER_FAIL(err, "rule 'shape' broken: loss_mask %s and targets %s differ",
                                 dg_shape_str(DG_IN(g, n, mask_at), a), dg_shape_str(tg, b));
    }
    return DG_OK;
}

/* ---- softmax_xent: (logits, targets [, mask]) -> (loss, lse) --------------------------- */

static int infer_xent(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_TRY(check_xent_inputs(g, n, 2, err));
    dg_desc_set(&o[0], DG_F32, 0, NULL);
    dg_desc_like(&o[1], DG_IN(g, n, 1));
    o[1].dtype = DG_F32;
    return DG_OK;
}

static void cost_xent(const dg_graph *g, const dg_node *n, dg_cost *c) {
    double e = (double)dg_tensor_numel(DG_IN(g, n, 0)), r = (double)dg_rows(DG_IN(g, n, 0));
    c->flops = 4.0 * e; /* max, sub, exp, add */
    c->bytes = 4.0 * (e + 4.0 * r);
}

static int k_xent(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                  void *const *out) {
    const dg_tensor *lg = DG_IN(g, n, 0);
    return dg_cpu_xent_fwd(e->team, in[0], in[1], n->n_in > 2 ? in[2] : NULL, out[0], out[1],
                           dg_rows(lg), dg_cols(lg), NULL);
}

static int adj_xent(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    if (dout[1] >= 0) {
        /* recorded like a builder error, so autodiff reports it */
        if (g->status == DG_OK)
            g->status = dg_err_set(&g->err, DG_EINPUT, "rule 'differentiable' broken: no "
                                                       "gradient flows through softmax_xent's lse");
        return DG_EINPUT;
    }
    if (dout[0] < 0) return DG_OK;
    int in[5] = {n->in[0], n->in[1], n->out[1], dout[0], n->n_in > 2 ? n->in[2] : -1};
    din[0] = dg_add1(g, &dg_op_softmax_xent_bwd, NULL, in, n->n_in > 2 ? 5 : 4, NULL);
    return g->status;
}

const dg_op_def dg_op_softmax_xent = {
    .name = "softmax_xent", .min_inputs = 2, .max_inputs = 3, .n_outputs = 2,
    .infer = infer_xent, .cost = cost_xent, .adjoint = adj_xent, .kernel = k_xent,
    .traits = DG_TRAIT_VOCAB | DG_TRAIT_TOKEN_STAT,
    .f32_outputs = 3u /* loss, lse */,
};

int dg_softmax_xent(dg_graph *g, int logits, int targets, int mask, int *lse) {
    int in[3] = {logits, targets, mask}, outs[2];
    int loss = dg_graph_add(g, &dg_op_softmax_xent, NULL, in, mask >= 0 ? 3 : 2, outs, NULL);
    if (lse) *lse = loss < 0 ? -1 : outs[1];
    return loss;
}

/* ---- softmax_xent_bwd: (logits, targets, lse, dloss [, mask]) -> dlogits ----------------- */

static int infer_xent_bwd(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_TRY(check_xent_inputs(g, n, 4, err));
    DG_INFER_DTYPE(g, n, 2, DG_F32, err);
    DG_INFER_DTYPE(g, n, 3, DG_F32, err);
    char a[64], b[64];
    if (!dg_same_shape(DG_IN(g, n, 2), DG_IN(g, n, 1)))
        return DG_INFER_FAIL(err, "rule 'shape' broken: lse %s and targets %s differ",
                             dg_shape_str(DG_IN(g, n, 2), a), dg_shape_str(DG_IN(g, n, 1), b));
    if (dg_tensor_numel(DG_IN(g, n, 3)) != 1)
        return DG_INFER_FAIL(err, "rule 'shape' broken: dloss %s must be a scalar",
                             dg_shape_str(DG_IN(g, n, 3), a));
    dg_desc_like(o, DG_IN(g, n, 0));
    return DG_OK;
}

static void cost_xent_bwd(const dg_graph *g, const dg_node *n, dg_cost *c) {
    double e = (double)dg_tensor_numel(DG_IN(g, n, 0)), r = (double)dg_rows(DG_IN(g, n, 0));
    c->flops = 4.0 * e;
    c->bytes = 4.0 * (2.0 * e + 3.0 * r);
}

static int k_xent_bwd(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                      void *const *out) {
    const dg_tensor *lg = DG_IN(g, n, 0);
    return dg_cpu_xent_bwd(e->team, in[0], in[1], n->n_in > 4 ? in[4] : NULL, in[2],
                           *(const float *)in[3], out[0], dg_rows(lg), dg_cols(lg), NULL);
}

const dg_op_def dg_op_softmax_xent_bwd = {
    .name = "softmax_xent_bwd", .min_inputs = 4, .max_inputs = 5, .n_outputs = 1,
    .infer = infer_xent_bwd, .cost = cost_xent_bwd, .kernel = k_xent_bwd,
};
