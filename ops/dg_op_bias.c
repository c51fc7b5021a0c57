/* dg_op_bias.c — bias_add, pos_embed_add and their backward ops. */
#include "dg_op_bias.h"

#include "dg_cpu_bias.h"
#include "dg_layout.h"
#include "dg_ops_util.h"

/* ---- bias_add: (x [..., N], b [N]) -> [..., N] ------------------------------------------ */

static int infer_bias_add(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    DG_INFER_DTYPE(g, n, 1, DG_F32, err);
    const dg_tensor *x = DG_IN(g, n, 0), *b = DG_IN(g, n, 1);
    char s[64], t[64];
    if (x->ndim < 1 || b->ndim != 1 || b->shape[0] != dg_cols(x))
        return DG_INFER_FAIL(err, "rule 'shape' broken: bias %s must be [N] of x %s's last dim",
                             dg_shape_str(b, s), dg_shape_str(x, t));
    dg_desc_like(o, x);
    return DG_OK;
}

static void cost_rows(const dg_graph *g, const dg_node *n, dg_cost *c) {
    double e = (double)dg_tensor_numel(DG_IN(g, n, 0));
    c->flops = e;
    c->bytes = 8.0 * e;
}

static int k_bias_add(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                      void *const *out) {
    const dg_tensor *x = DG_IN(g, n, 0);
    dg_cpu_add_rows(e->team, in[0], in[1], out[0], dg_rows(x), dg_cols(x));
    return DG_OK;
}

static int adj_bias_add(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    (void)n;
    din[0] = dout[0];
    din[1] = dg_add1(g, &dg_op_bias_grad, NULL, &dout[0], 1, NULL);
    return g->status;
}

static int shard_bias_add(const dg_graph *g, const dg_node *n, const dg_sharding *in,
                          dg_sharding *out, dg_attrs *attrs) {
    (void)attrs;
    const dg_sharding *x = &in[0], *b = &in[1];
    int last = g->tensors[n->in[0]].ndim - 1;
    if (x->partial != DG_AXIS_NONE || b->partial != DG_AXIS_NONE) return DG_SHARD_CANNOT;
    if (x->split[last] != b->split[0] || x->split2[last] != b->split2[0] ||
        (x->stride[last] > 1 ? x->stride[last] : 1) != (b->stride[0] > 1 ? b->stride[0] : 1))
        return DG_SHARD_CANNOT;
    out[0] = *x;
    return DG_OK;
}

const dg_op_def dg_op_bias_add = {
    .name = "bias_add", .min_inputs = 2, .max_inputs = 2, .n_outputs = 1,
    .infer = infer_bias_add, .cost = cost_rows, .adjoint = adj_bias_add, .kernel = k_bias_add,
    .shard = shard_bias_add,
};

int dg_bias_add(dg_graph *g, int x, int b) {
    return dg_add1(g, &dg_op_bias_add, NULL, (int[]){x, b}, 2, NULL);
}

/* ---- bias_grad: dy [..., N] -> [N] ------------------------------------------------------ */

static int infer_bias_grad(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    if (DG_IN(g, n, 0)->ndim < 1) return DG_INFER_FAIL(err, "rule 'shape' broken: dy is a scalar");
    dg_desc_set(o, DG_F32, 1, (int64_t[]){dg_cols(DG_IN(g, n, 0))});
    return DG_OK;
}

static int k_bias_grad(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                       void *const *out) {
    const dg_tensor *d = DG_IN(g, n, 0);
    dg_cpu_sum_rows(e->team, in[0], out[0], dg_rows(d), dg_cols(d));
    return DG_OK;
}

const dg_op_def dg_op_bias_grad = {
    .name = "bias_grad", .min_inputs = 1, .max_inputs = 1, .n_outputs = 1,
    .infer = infer_bias_grad, .cost = cost_rows, .kernel = k_bias_grad,
};

/* ---- pos_embed_add: (x [B, S, H], table [P, H]) -> [B, S, H] ------------------------------- */

static int infer_pos_add(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    DG_INFER_DTYPE(g, n, 1, DG_F32, err);
    const dg_tensor *x = DG_IN(g, n, 0), *t = DG_IN(g, n, 1);
    char s[64], u[64];
    if (x->ndim != 3 || t->ndim != 2 || t->shape[1] != x->shape[2] || t->shape[0] < x->shape[1])
        return DG_INFER_FAIL(err, "rule 'shape' broken: x %s must be [B, S, H] and table %s [P >= S, H]",
                             dg_shape_str(x, s), dg_shape_str(t, u));
    dg_desc_like(o, x);
    return DG_OK;
}

/* x viewed as [B, S*H] plus the table's first S*H elements on every row. */
static int k_pos_add(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                     void *const *out) {
    const dg_tensor *x = DG_IN(g, n, 0);
    dg_cpu_add_rows(e->team, in[0], in[1], out[0], x->shape[0], x->shape[1] * x->shape[2]);
    return DG_OK;
}

static int adj_pos_add(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    dg_attrs a = dg_attrs_zero();
    a.i[0] = g->tensors[n->in[1]].shape[0];
    din[0] = dout[0];
    din[1] = dg_add1(g, &dg_op_pos_embed_grad, &a, &dout[0], 1, NULL);
    return g->status;
}

static int shard_pos_add(const dg_graph *g, const dg_node *n, const dg_sharding *in,
                         dg_sharding *out, dg_attrs *attrs) {
    (void)g;
    (void)n;
    (void)attrs;
    if (!dg_layout_is_replicated(&in[1]) || in[0].partial != DG_AXIS_NONE ||
        dg_layout_dim_split(&in[0], 1) || dg_layout_dim_split(&in[0], 2))
        return DG_SHARD_CANNOT;
    out[0] = in[0];
    return DG_OK;
}

const dg_op_def dg_op_pos_embed_add = {
    .name = "pos_embed_add", .min_inputs = 2, .max_inputs = 2, .n_outputs = 1,
    .infer = infer_pos_add, .cost = cost_rows, .adjoint = adj_pos_add, .kernel = k_pos_add,
    .shard = shard_pos_add,
    .traits = DG_TRAIT_POSITIONS,
};

int dg_pos_embed_add(dg_graph *g, int x, int table) {
    return dg_add1(g, &dg_op_pos_embed_add, NULL, (int[]){x, table}, 2, NULL);
}

/* ---- pos_embed_grad: dy [B, S, H] -> dtable [P, H] ---------------------------------------- */

static int infer_pos_grad(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    const dg_tensor *d = DG_IN(g, n, 0);
    if (d->ndim != 3 || n->attrs.i[0] < d->shape[1])
        return DG_INFER_FAIL(err, "rule 'shape' broken: dy must be [B, S, H] with S <= P = %lld",
                             (long long)n->attrs.i[0]);
    dg_desc_set(o, DG_F32, 2, (int64_t[]){n->attrs.i[0], d->shape[2]});
    return DG_OK;
}

static int k_pos_grad(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                      void *const *out) {
    const dg_tensor *d = DG_IN(g, n, 0);
    int64_t SH = d->shape[1] * d->shape[2], PH = n->attrs.i[0] * d->shape[2];
    float *dt = out[0];
    dg_cpu_sum_rows(e->team, in[0], dt, d->shape[0], SH);
    memset(dt + SH, 0, (size_t)(PH - SH) * sizeof *dt); /* positions past S get no gradient */
    return DG_OK;
}

const dg_op_def dg_op_pos_embed_grad = {
    .name = "pos_embed_grad", .min_inputs = 1, .max_inputs = 1, .n_outputs = 1,
    .iattr_names = {"positions"},
    .infer = infer_pos_grad, .cost = cost_rows, .kernel = k_pos_grad,
};

/* ---- pos_embed_add_at: (x [B, L, H], table [P, H], pos i32 [B]) -> [B, L, H] --------------- */

static int infer_pos_add_at(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    DG_INFER_DTYPE(g, n, 1, DG_F32, err);
    DG_INFER_DTYPE(g, n, 2, DG_I32, err);
    const dg_tensor *x = DG_IN(g, n, 0), *t = DG_IN(g, n, 1), *p = DG_IN(g, n, 2);
    char s[64], u[64];
    if (x->ndim != 3 || t->ndim != 2 || t->shape[1] != x->shape[2] || p->ndim != 1 ||
        p->shape[0] != x->shape[0])
        return DG_INFER_FAIL(err, "rule 'shape' broken: x %s must be [B, L, H], table %s [P, H], pos [B]",
                             dg_shape_str(x, s), dg_shape_str(t, u));
    dg_desc_like(o, x);
    return DG_OK;
}

/* Row (b, l) gets the table's row pos[b] + l: a decoding step's positions. */
static int k_pos_add_at(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                        void *const *out) {
    const dg_tensor *x = DG_IN(g, n, 0);
    int64_t B = x->shape[0], L = x->shape[1], H = x->shape[2], P = DG_IN(g, n, 1)->shape[0];
    const float *xs = in[0], *tab = in[1];
    const int32_t *pos = in[2];
    for (int64_t b = 0; b < B; b++) {
        if (pos[b] < 0 || pos[b] + L > P) return DG_EINPUT; /* past the position table */
        dg_cpu_add_rows(e->team, xs + b * L * H, tab + (int64_t)pos[b] * H, (float *)out[0] + b * L * H, 1,
                        L * H);
    }
    return DG_OK;
}

const dg_op_def dg_op_pos_embed_add_at = {
    .name = "pos_embed_add_at", .min_inputs = 3, .max_inputs = 3, .n_outputs = 1,
    .infer = infer_pos_add_at, .cost = cost_rows, .kernel = k_pos_add_at,
};

int dg_pos_embed_add_at(dg_graph *g, int x, int table, int pos) {
    return dg_add1(g, &dg_op_pos_embed_add_at, NULL, (int[]){x, table, pos}, 3, NULL);
}
