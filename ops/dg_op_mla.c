/* dg_op_mla.c — narrow, pad_last, expand_heads, heads_sum (see dg_op_mla.h). */
#include "dg_op_mla.h"

#include <string.h>

#include "dg_layout.h"
#include "dg_ops_util.h"

static void cost_copy(const dg_graph *g, const dg_node *n, dg_cost *c) {
    double e = (double)dg_tensor_numel(DG_OUT(g, n, 0));
    c->flops = 0;
    c->bytes = 8.0 * e;
}

/* Any layout with the last dim whole passes through. */
static int shard_last_whole(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                            dg_attrs *attrs) {
    (void)attrs;
    if (dg_layout_dim_split(&in[0], g->tensors[n->in[0]].ndim - 1)) return DG_SHARD_CANNOT;
    out[0] = in[0];
    return DG_OK;
}

/* ---- narrow / pad_last ------------------------------------------------------------- */

static int infer_narrow(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    const dg_tensor *x = DG_IN(g, n, 0);
    int64_t a = n->attrs.i[0], len = n->attrs.i[1], N = dg_cols(x);
    if (x->ndim < 1 || a < 0 || len < 1 || a + len > N)
        return DG_INFER_FAIL(err, "rule 'attrs' broken: narrow [%lld, %lld) of a last dim of %lld", (long long)a,
                             (long long)(a + len), (long long)N);
    dg_desc_like(o, x);
    o->shape[x->ndim - 1] = len;
    return DG_OK;
}

static int infer_pad(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    const dg_tensor *x = DG_IN(g, n, 0);
    int64_t a = n->attrs.i[0], total = n->attrs.i[1], len = dg_cols(x);
    if (x->ndim < 1 || a < 0 || a + len > total)
        return DG_INFER_FAIL(err, "rule 'attrs' broken: pad_last of %lld at %lld into %lld", (long long)len,
                             (long long)a, (long long)total);
    dg_desc_like(o, x);
    o->shape[x->ndim - 1] = total;
    return DG_OK;
}

static int k_narrow(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in, void *const *out) {
    (void)e;
    const dg_tensor *x = DG_IN(g, n, 0);
    int64_t rows = dg_rows(x), N = dg_cols(x), a = n->attrs.i[0], len = n->attrs.i[1];
    const float *xs = in[0];
    float *y = out[0];
    for (int64_t r = 0; r < rows; r++) memcpy(y + r * len, xs + r * N + a, sizeof(float) * (size_t)len);
    return DG_OK;
}

static int k_pad(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in, void *const *out) {
    (void)e;
    const dg_tensor *x = DG_IN(g, n, 0);
    int64_t rows = dg_rows(x), len = dg_cols(x), a = n->attrs.i[0], T = n->attrs.i[1];
    const float *xs = in[0];
    float *y = out[0];
    memset(y, 0, sizeof(float) * (size_t)(rows * T));
    for (int64_t r = 0; r < rows; r++) memcpy(y + r * T + a, xs + r * len, sizeof(float) * (size_t)len);
    return DG_OK;
}

static int node2(dg_graph *g, const dg_op_def *op, int x, int64_t i0, int64_t i1) {
    dg_attrs a = dg_attrs_zero();
    a.i[0] = i0;
    a.i[1] = i1;
    return dg_add1(g, op, &a, &x, 1, NULL);
}

static int adj_narrow(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    din[0] = node2(g, &dg_op_pad_last, dout[0], n->attrs.i[0], dg_cols(DG_IN(g, n, 0)));
    return g->status;
}

static int adj_pad(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    din[0] = node2(g, &dg_op_narrow, dout[0], n->attrs.i[0], dg_cols(DG_IN(g, n, 0)));
    return g->status;
}

const dg_op_def dg_op_narrow = {
    .name = "narrow", .min_inputs = 1, .max_inputs = 1, .n_outputs = 1,
    .iattr_names = {"start", "len"},
    .infer = infer_narrow, .cost = cost_copy, .adjoint = adj_narrow, .kernel = k_narrow, .shard = shard_last_whole,
};

const dg_op_def dg_op_pad_last = {
    .name = "pad_last", .min_inputs = 1, .max_inputs = 1, .n_outputs = 1,
    .iattr_names = {"start", "total"},
    .infer = infer_pad, .cost = cost_copy, .adjoint = adj_pad, .kernel = k_pad, .shard = shard_last_whole,
};

int dg_narrow(dg_graph *g, int x, int64_t start, int64_t len) { return node2(g, &dg_op_narrow, x, start, len); }

int dg_pad_last(dg_graph *g, int x, int64_t start, int64_t total) {
    return node2(g, &dg_op_pad_last, x, start, total);
}

/* ---- expand_heads / heads_sum ---------------------------------------------------------- */

static int infer_expand(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    const dg_tensor *x = DG_IN(g, n, 0), *l = DG_IN(g, n, 1);
    char s[64], t[64];
    if (x->ndim != 4 || l->ndim != 4 || x->shape[2] != 1 || x->shape[0] != l->shape[0] || x->shape[1] != l->shape[1])
        return DG_INFER_FAIL(err, "rule 'shape' broken: x %s must be [B, S, 1, P] beside like %s [B, S, N, *]",
                             dg_shape_str(x, s), dg_shape_str(l, t));
    dg_desc_like(o, x);
    o->shape[2] = l->shape[2];
    return DG_OK;
}

static int k_expand(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in, void *const *out) {
    (void)e;
    const dg_tensor *y = DG_OUT(g, n, 0);
    int64_t T = y->shape[0] * y->shape[1], N = y->shape[2], P = y->shape[3];
    const float *x = in[0];
    float *o = out[0];
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < N; h++) memcpy(o + (t * N + h) * P, x + t * P, sizeof(float) * (size_t)P);
    return DG_OK;
}

static int adj_expand(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    (void)n;
    din[0] = dg_heads_sum(g, dout[0]);
    din[1] = -1;
    return g->status;
}

static int shard_expand(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                        dg_attrs *attrs) {
    (void)g;
    (void)n;
    (void)attrs;
    const dg_sharding *x = &in[0], *l = &in[1];
    if (x->partial != DG_AXIS_NONE || l->partial != DG_AXIS_NONE || dg_layout_dim_split(x, 2) ||
        dg_layout_dim_split(x, 3))
        return DG_SHARD_CANNOT;
    for (int d = 0; d < 2; d++)
        if (x->split[d] != l->split[d] || x->split2[d] != l->split2[d] || x->stride[d] != l->stride[d])
            return DG_SHARD_CANNOT;
    memset(&out[0], 0, sizeof out[0]);
    for (int d = 0; d < 3; d++) {
        out[0].split[d] = l->split[d];
        out[0].split2[d] = l->split2[d];
        out[0].stride[d] = l->stride[d];
    }
    return DG_OK;
}

const dg_op_def dg_op_expand_heads = {
    .name = "expand_heads", .min_inputs = 2, .max_inputs = 2, .n_outputs = 1,
    .infer = infer_expand, .cost = cost_copy, .adjoint = adj_expand, .kernel = k_expand, .shard = shard_expand,
    .traits = DG_TRAIT_BROADCAST,
};

int dg_expand_heads(dg_graph *g, int x, int like) {
    return dg_add1(g, &dg_op_expand_heads, NULL, (int[]){x, like}, 2, NULL);
}

static int infer_hsum(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    const dg_tensor *x = DG_IN(g, n, 0);
    char s[64];
    if (x->ndim != 4) return DG_INFER_FAIL(err, "rule 'shape' broken: x %s must be [B, S, N, P]", dg_shape_str(x, s));
    dg_desc_like(o, x);
    o->shape[2] = 1;
    return DG_OK;
}

static int k_hsum(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in, void *const *out) {
    (void)e;
    const dg_tensor *x = DG_IN(g, n, 0);
    int64_t T = x->shape[0] * x->shape[1], N = x->shape[2], P = x->shape[3];
    const float *xs = in[0];
    float *o = out[0];
    for (int64_t t = 0; t < T; t++)
        for (int64_t p = 0; p < P; p++) {
            float acc = 0;
            for (int64_t h = 0; h < N; h++) acc += xs[(t * N + h) * P + p];
            o[t * P + p] = acc;
        }
    return DG_OK;
}

static int adj_hsum(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    din[0] = dg_expand_heads(g, dout[0], n->in[0]);
    return g->status;
}

static int shard_hsum(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                      dg_attrs *attrs) {
    (void)g;
    (void)n;
    (void)attrs;
    const dg_sharding *x = &in[0];
    if (dg_layout_dim_split(x, 3) || x->split2[2] != DG_AXIS_NONE) return DG_SHARD_CANNOT;
    dg_axis a = (dg_axis)x->split[2];
    if (a != DG_AXIS_NONE && x->partial != DG_AXIS_NONE) return DG_SHARD_CANNOT;
    out[0] = *x;
    out[0].split[2] = DG_AXIS_NONE;
    out[0].stride[2] = 0;
    if (a != DG_AXIS_NONE) out[0].partial = (uint8_t)a;
    return DG_OK;
}

const dg_op_def dg_op_heads_sum = {
    .name = "heads_sum", .min_inputs = 1, .max_inputs = 1, .n_outputs = 1,
    .infer = infer_hsum, .cost = cost_copy, .adjoint = adj_hsum, .kernel = k_hsum, .shard = shard_hsum,
};

int dg_heads_sum(dg_graph *g, int x) { return dg_add1(g, &dg_op_heads_sum, NULL, &x, 1, NULL); }
