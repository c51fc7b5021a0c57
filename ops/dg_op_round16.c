/* dg_op_round16.c — see dg_op_round16.h. */
#include "dg_op_round16.h"

#include <math.h>
#include <string.h>

#include "dg_ops_util.h"

static int infer_round16(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    if (n->attrs.i[0] != DG_ROUND16_BF16 && n->attrs.i[0] != DG_ROUND16_FP16)
        return DG_INFER_FAIL(err, "rule 'attrs' broken: format %d, expected 0 (bf16) or 1 (fp16)", (int)n->attrs.i[0]);
    dg_desc_like(o, DG_IN(g, n, 0));
    return DG_OK;
}

static void cost_round16(const dg_graph *g, const dg_node *n, dg_cost *c) {
    double e = (double)dg_tensor_numel(DG_IN(g, n, 0));
    c->flops = e;
    c->bytes = 8.0 * e;
}

static int k_round16(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                     void *const *out) {
    (void)e;
    const float *x = in[0];
    float *y = out[0];
    int64_t len = dg_tensor_numel(DG_IN(g, n, 0));
    if (n->attrs.i[0] == DG_ROUND16_BF16)
        for (int64_t i = 0; i < len; i++) y[i] = dg_round_bf16(x[i]);
    else
        for (int64_t i = 0; i < len; i++) y[i] = dg_round_fp16(x[i]);
    return DG_OK;
}

static int adj_round16(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    din[0] = n->attrs.i[1] ? dg_add1(g, &dg_op_round16, &n->attrs, dout, 1, NULL) : dout[0];
    return g->status;
}

/* Rounding applies to whatever the tensor holds: a layout passes through
 * (a 16-bit run rounds partial sums before their reduction too). */
static int shard_round16(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                         dg_attrs *attrs) {
    (void)g;
    (void)n;
    (void)attrs;
    out[0] = in[0];
    return DG_OK;
}

const dg_op_def dg_op_round16 = {
    .name = "round16", .min_inputs = 1, .max_inputs = 1, .n_outputs = 1,
    .iattr_names = {"format", "round_grad"},
    .infer = infer_round16, .cost = cost_round16, .adjoint = adj_round16, .kernel = k_round16,
    .shard = shard_round16,
};

int dg_round16(dg_graph *g, int x, int format, int round_grad) {
    dg_attrs a = dg_attrs_zero();
    a.i[0] = format;
    a.i[1] = round_grad;
    return dg_add1(g, &dg_op_round16, &a, &x, 1, NULL);
}

static int infer_loss_scaling(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    DG_INFER_DTYPE(g, n, 1, DG_F32, err);
    if (dg_tensor_numel(DG_IN(g, n, 1)) != 1 || (n->attrs.i[0] != 1 && n->attrs.i[0] != -1))
        return DG_INFER_FAIL(err, "rule 'shape' broken: s must be one value and k +-1");
    dg_desc_like(o, DG_IN(g, n, 0));
    return DG_OK;
}

static int k_loss_scaling(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                          void *const *out) {
    (void)e;
    const float *x = in[0];
    float *y = out[0];
    float s = *(const float *)in[1];
    float f = !n->attrs.i[1] ? 1.0f : n->attrs.i[0] > 0 ? s : 1.0f / s;
    int64_t len = dg_tensor_numel(DG_IN(g, n, 0));
    for (int64_t i = 0; i < len; i++) y[i] = x[i] * f;
    return DG_OK;
}

static int adj_loss_scaling(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    dg_attrs a = n->attrs;
    a.i[1] = 1;
    din[0] = dg_add1(g, &dg_op_loss_scaling, &a, (int[]){dout[0], n->in[1]}, 2, NULL);
    din[1] = -1;
    return g->status;
}

const dg_op_def dg_op_loss_scaling = {
    .name = "loss_scaling", .min_inputs = 2, .max_inputs = 2, .n_outputs = 1,
    .iattr_names = {"k", "apply_forward"},
    .infer = infer_loss_scaling, .cost = cost_round16, .adjoint = adj_loss_scaling,
    .kernel = k_loss_scaling, .shard = shard_round16,
};

int dg_loss_scaling(dg_graph *g, int x, int s, int k, int apply_forward) {
    dg_attrs a = dg_attrs_zero();
    a.i[0] = k;
    a.i[1] = apply_forward;
    return dg_add1(g, &dg_op_loss_scaling, &a, (int[]){x, s}, 2, NULL);
}
