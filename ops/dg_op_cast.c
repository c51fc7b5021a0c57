/* dg_op_cast.c — see dg_op_cast.h. */
#include "dg_op_cast.h"

#include <string.h>

#include "dg_cpu_half.h"
#include "dg_ops_util.h"

static int infer_cast(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    if (!dg_dtype_is_float((dg_dtype)n->attrs.i[0]))
        return DG_INFER_FAIL(err, "rule 'attrs' broken: cast to dtype %d, expected f32, bf16 or f16", (int)n->attrs.i[0]);
    dg_desc_like(o, DG_IN(g, n, 0));
    o->dtype = (dg_dtype)n->attrs.i[0];
    return DG_OK;
}

static void cost_cast(const dg_graph *g, const dg_node *n, dg_cost *c) {
    c->flops = (double)dg_tensor_numel(DG_IN(g, n, 0));
    c->bytes = (double)dg_tensor_bytes(DG_IN(g, n, 0)) + (double)dg_tensor_bytes(DG_OUT(g, n, 0));
}

/* Any floating dtype to any: through f32, exactly (16 -> f32 is exact). */
static int k_cast(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                  void *const *out) {
    dg_dtype from = DG_IN(g, n, 0)->dtype, to = DG_OUT(g, n, 0)->dtype;
    int64_t len = dg_tensor_numel(DG_IN(g, n, 0));
    if (from == to) {
        if (in[0] != out[0]) memcpy(out[0], in[0], dg_tensor_bytes(DG_IN(g, n, 0)));
    } else if (from == DG_F32) {
        dg_cpu_to_half(e->team, in[0], out[0], len, to == DG_F16);
    } else if (to == DG_F32) {
        dg_cpu_from_half(e->team, in[0], out[0], len, from == DG_F16);
    } else { /* bf16 <-> f16 */
        const uint16_t *x = in[0];
        uint16_t *y = out[0];
        for (int64_t i = 0; i < len; i++) y[i] = dg_half_bits(dg_half_value(x[i], from == DG_F16), to == DG_F16);
    }
    return DG_OK;
}

static int adj_cast(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    din[0] = dg_cast(g, dout[0], g->tensors[n->in[0]].dtype);
    return g->status;
}

/* A cast applies to whatever the tensor holds: a layout passes through. */
static int shard_same(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                      dg_attrs *attrs) {
    (void)g;
    (void)n;
    (void)attrs;
    out[0] = in[0];
    return DG_OK;
}

const dg_op_def dg_op_cast = {
    .name = "cast", .min_inputs = 1, .max_inputs = 1, .n_outputs = 1,
    .iattr_names = {"dtype"},
    .infer = infer_cast, .cost = cost_cast, .adjoint = adj_cast, .kernel = k_cast,
    .shard = shard_same, .f32_outputs = 1u, .any_dtype = 1,
};

int dg_cast(dg_graph *g, int x, dg_dtype dtype) {
    dg_attrs a = dg_attrs_zero();
    a.i[0] = dtype;
    return dg_add1(g, &dg_op_cast, &a, &x, 1, NULL);
}

static void cost_scaling(const dg_graph *g, const dg_node *n, dg_cost *c) {
    double e = (double)dg_tensor_numel(DG_IN(g, n, 0));
    c->flops = e;
    c->bytes = 2.0 * (double)dg_tensor_bytes(DG_IN(g, n, 0));
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
    .infer = infer_loss_scaling, .cost = cost_scaling, .adjoint = adj_loss_scaling,
    .kernel = k_loss_scaling, .shard = shard_same,
};

int dg_loss_scaling(dg_graph *g, int x, int s, int k, int apply_forward) {
    dg_attrs a = dg_attrs_zero();
    a.i[0] = k;
    a.i[1] = apply_forward;
    return dg_add1(g, &dg_op_loss_scaling, &a, (int[]){x, s}, 2, NULL);
}
