/* dg_grouped_bias.c — grouped_bias_add and grouped_bias_grad (see dg_grouped_bias.h). */
#include "dg_grouped_bias.h"

#include <string.h>

#include "dg_cpu_grouped_bias.h"
#include "dg_layout.h"
#include "dg_ops_util.h"

static int check_rows(const dg_tensor *x, const dg_tensor *c, const char *what, dg_err *err) {
    char s[64], t[64];
    if (!dg_dtype_is_float(x->dtype) || x->ndim != 2)
        return DG_INFER_FAIL(err, "rule 'shape' broken: %s '%s' must be f32 [N, features], got %s %s", what, x->name,
                             dg_dtype_name(x->dtype), dg_shape_str(x, s));
    if (c->dtype != DG_I32 || c->ndim != 1)
        return DG_INFER_FAIL(err, "rule 'shape' broken: tokens_per_expert '%s' is %s %s, expected i32 [E]", c->name,
                             dg_dtype_name(c->dtype), dg_shape_str(c, t));
    return DG_OK;
}

static int infer_add(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    const dg_tensor *x = DG_IN(g, n, 0), *c = DG_IN(g, n, 1), *b = DG_IN(g, n, 2);
    char s[64], t[64];
    DG_TRY(check_rows(x, c, "x", err));
    if (!dg_dtype_is_float(b->dtype) || b->ndim != 2 || b->shape[0] != c->shape[0] || b->shape[1] != x->shape[1])
        return DG_INFER_FAIL(err, "rule 'shape' broken: bias '%s' is %s, expected [E=%lld, %lld] for x %s", b->name,
                             dg_shape_str(b, s), (long long)c->shape[0], (long long)x->shape[1], dg_shape_str(x, t));
    dg_desc_like(o, x);
    return DG_OK;
}

static void cost_add(const dg_graph *g, const dg_node *n, dg_cost *c) {
    double e = (double)dg_tensor_numel(DG_IN(g, n, 0));
    c->flops = e;
    c->bytes = 4.0 * 2.0 * e;
}

static int k_add(const dg_exec_env *env, const dg_graph *g, const dg_node *n, void *const *in, void *const *out) {
    const dg_tensor *x = DG_IN(g, n, 0);
    return dg_cpu_grouped_bias_fwd(env->team, DG_IN(g, n, 1)->shape[0], in[1], x->shape[0], x->shape[1], in[0], in[2],
                                   out[0]) == 0
               ? DG_OK
               : DG_EINPUT; /* counts negative or summing past N */
}

static int adj_add(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    int x = n->in[0], c = n->in[1], b = n->in[2];
    if (g->tensors[x].requires_grad) din[0] = dout[0];
    if (g->tensors[b].requires_grad)
        din[2] = dg_add1(g, &dg_op_grouped_bias_grad, NULL, (int[]){dout[0], c}, 2, NULL);
    return g->status;
}

static int shard_add(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out, dg_attrs *attrs) {
    (void)g;
    (void)n;
    (void)attrs;
    dg_sharding x = in[0], b = in[2];
    memset(out, 0, sizeof *out);
    if (b.split[0] == DG_AXIS_EP && !b.split2[0]) b.split[0] = DG_AXIS_NONE;
    if (x.partial != DG_AXIS_NONE) return DG_SHARD_CANNOT;
    if (x.split[1] != DG_AXIS_NONE || b.split[1] != DG_AXIS_NONE) {
        if (x.split[1] != b.split[1] || x.split2[1] || b.split2[1] || x.stride[1] != b.stride[1])
            return DG_SHARD_CANNOT;
        out[0].split[1] = x.split[1];
        out[0].stride[1] = x.stride[1];
        x.split[1] = b.split[1] = DG_AXIS_NONE;
        x.stride[1] = b.stride[1] = 0;
    }
    if (!dg_layout_is_replicated(&x) || !dg_layout_is_replicated(&in[1]) || !dg_layout_is_replicated(&b)) {
        memset(out, 0, sizeof *out);
        return DG_SHARD_CANNOT;
    }
    return DG_OK;
}

const dg_op_def dg_op_grouped_bias_add = {
    .name = "grouped_bias_add", .min_inputs = 3, .max_inputs = 3, .n_outputs = 1,
    .infer = infer_add, .cost = cost_add, .adjoint = adj_add, .kernel = k_add, .shard = shard_add,
};

int dg_grouped_bias_add(dg_graph *g, int x, int tokens_per_expert, int b) {
    return dg_add1(g, &dg_op_grouped_bias_add, NULL, (int[]){x, tokens_per_expert, b}, 3, NULL);
}

/* ---- grouped_bias_grad ------------------------------------------------------------------ */

static int infer_grad(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    const dg_tensor *dy = DG_IN(g, n, 0), *c = DG_IN(g, n, 1);
    DG_TRY(check_rows(dy, c, "dy", err));
    dg_desc_set(o, DG_F32, 2, (int64_t[]){c->shape[0], dy->shape[1]});
    return DG_OK;
}

static int k_grad(const dg_exec_env *env, const dg_graph *g, const dg_node *n, void *const *in, void *const *out) {
    const dg_tensor *dy = DG_IN(g, n, 0);
    return dg_cpu_grouped_bias_grad(env->team, DG_IN(g, n, 1)->shape[0], in[1], dy->shape[0], dy->shape[1], in[0],
                                    out[0]) == 0
               ? DG_OK
               : DG_EINPUT;
}

const dg_op_def dg_op_grouped_bias_grad = {
    .name = "grouped_bias_grad", .min_inputs = 2, .max_inputs = 2, .n_outputs = 1,
    .infer = infer_grad, .cost = cost_add, .kernel = k_grad,
};
