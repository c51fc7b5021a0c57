/* dg_op_adamw.c — adamw. */
#include "dg_op_adamw.h"

#include "dg_ops_util.h"

dg_adamw_hparams dg_adamw_hparams_of(const dg_node *n) {
    dg_adamw_hparams h = {
        .lr = n->attrs.f[0], .beta1 = n->attrs.f[1], .beta2 = n->attrs.f[2],
        .eps = n->attrs.f[3], .weight_decay = n->attrs.f[4], .step = n->attrs.i[0],
    };
    return h;
}

static int infer_adamw(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    static const char *const names[4] = {"param", "grad", "m", "v"};
    char a[64], b[64];
    for (int i = 0; i < 4; i++) {
        DG_INFER_DTYPE(g, n, i, DG_F32, err);
        if (!dg_same_shape(DG_IN(g, n, i), DG_IN(g, n, 0)))
            return DG_INFER_FAIL(err, "rule 'shape' broken: %s %s differs from param %s", names[i],
                                 dg_shape_str(DG_IN(g, n, i), a), dg_shape_str(DG_IN(g, n, 0), b));
    }
    dg_adamw_hparams h = dg_adamw_hparams_of(n);
    if (h.step < 1)
        return DG_INFER_FAIL(err, "rule 'attrs' broken: step must be >= 1, got %lld",
                             (long long)h.step);
    if (!(h.lr >= 0) || !(h.beta1 >= 0 && h.beta1 < 1) || !(h.beta2 >= 0 && h.beta2 < 1) ||
        !(h.eps > 0) || !(h.weight_decay >= 0))
        return DG_INFER_FAIL(err, "rule 'attrs' broken: need lr >= 0, 0 <= beta1, beta2 < 1, "
                                  "eps > 0, weight_decay >= 0; got lr %g beta1 %g beta2 %g eps %g "
                                  "weight_decay %g",
                             h.lr, h.beta1, h.beta2, h.eps, h.weight_decay);
    for (int j = 0; j < 3; j++) dg_desc_like(&o[j], DG_IN(g, n, 0));
    return DG_OK;
}

static void cost_adamw(const dg_graph *g, const dg_node *n, dg_cost *c) {
    double e = (double)dg_tensor_numel(DG_IN(g, n, 0));
    c->flops = 12.0 * e;
    c->bytes = 4.0 * 7.0 * e;
}

static int k_adamw(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                   void *const *out) {
    dg_adamw_hparams h = dg_adamw_hparams_of(n);
    dg_cpu_adamw(e->team, &h, in[0], in[1], in[2], in[3], out[0], out[1], out[2],
                 dg_tensor_numel(DG_IN(g, n, 0)));
    return DG_OK;
}

const dg_op_def dg_op_adamw = {
    .name = "adamw", .min_inputs = 4, .max_inputs = 4, .n_outputs = 3,
    .iattr_names = {"step"},
    .fattr_names = {"lr", "beta1", "beta2", "eps", "weight_decay"},
    .infer = infer_adamw, .cost = cost_adamw, .kernel = k_adamw,
};

int dg_adamw(dg_graph *g, int param, int grad, int m, int v, const dg_adamw_hparams *h,
             int out[3]) {
    dg_attrs a = dg_attrs_zero();
    a.i[0] = h->step;
    a.f[0] = h->lr;
    a.f[1] = h->beta1;
    a.f[2] = h->beta2;
    a.f[3] = h->eps;
    a.f[4] = h->weight_decay;
    int outs[3];
    int p = dg_graph_add(g, &dg_op_adamw, &a, (int[]){param, grad, m, v}, 4, outs, NULL);
    if (p < 0) return -1;
    g->nodes[g->tensors[p].producer].phase = DG_PHASE_OPTIMIZER;
    for (int j = 0; j < 3; j++) {
        g->tensors[outs[j]].requires_grad = false;
        if (out) out[j] = outs[j];
    }
    return p;
}
