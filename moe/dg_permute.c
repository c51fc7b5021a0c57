/* dg_permute.c — moe_permute, moe_unpermute, moe_gather, and the probs
 * gradient of unpermute (see dg_permute.h). */
#include "dg_permute.h"

#include "dg_cpu_moe.h"
#include "dg_ops_util.h"

static int check_rows(const dg_tensor *t, const char *what, dg_err *err) {
    char s[64];
    if (!dg_dtype_is_float(t->dtype) || t->ndim != 2)
        return DG_INFER_FAIL(err, "rule 'shape' broken: %s '%s' must be f32 [rows, H], got %s %s", what,
                             t->name, dg_dtype_name(t->dtype), dg_shape_str(t, s));
    return DG_OK;
}

static int check_row_map(const dg_tensor *m, int64_t N, dg_err *err) {
    char s[64];
    if (m->dtype != DG_I32 || m->ndim != 1 || (N >= 0 && m->shape[0] != N))
        return DG_INFER_FAIL(err, "rule 'shape' broken: row_map '%s' is %s %s, expected i32 [%lld]",
                             m->name, dg_dtype_name(m->dtype), dg_shape_str(m, s), (long long)N);
    return DG_OK;
}

/* probs, when present, must be f32 [T, k]. */
static int check_probs(const dg_tensor *p, int64_t T, int64_t k, dg_err *err) {
    char s[64];
    if (!dg_dtype_is_float(p->dtype) || p->ndim != 2 || p->shape[0] != T || p->shape[1] != k)
        return DG_INFER_FAIL(err, "rule 'shape' broken: probs '%s' is %s %s, expected f32 [T=%lld, "
                                  "k=%lld]",
                             p->name, dg_dtype_name(p->dtype), dg_shape_str(p, s), (long long)T,
                             (long long)k);
    return DG_OK;
}

static size_t ws_inverse(int64_t T, int64_t k) { return sizeof(int32_t) * (size_t)(T * k); }

/* ---- permute ------------------------------------------------------------------------ */

static int infer_permute(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    const dg_tensor *x = DG_IN(g, n, 0), *ix = DG_IN(g, n, 1);
    DG_TRY(check_rows(x, "x", err));
    char s[64];
    if (ix->dtype != DG_I32 || ix->ndim != 2 || ix->shape[0] != x->shape[0])
        return DG_INFER_FAIL(err, "rule 'shape' broken: indices '%s' is %s %s, expected i32 "
                                  "[T=%lld, k]",
                             ix->name, dg_dtype_name(ix->dtype), dg_shape_str(ix, s),
                             (long long)x->shape[0]);
    int64_t E = n->attrs.i[0], N = ix->shape[0] * ix->shape[1];
    if (E < 1)
        return DG_INFER_FAIL(err, "rule 'attrs' broken: num_experts %lld must be >= 1", (long long)E);
    dg_desc_set(&o[0], DG_F32, 2, (int64_t[]){N, x->shape[1]});
    dg_desc_set(&o[1], DG_I32, 1, (int64_t[]){E});
    dg_desc_set(&o[2], DG_I32, 1, (int64_t[]){N});
    return DG_OK;
}

static void cost_permute(const dg_graph *g, const dg_node *n, dg_cost *c) {
    double N = (double)dg_tensor_numel(DG_IN(g, n, 1)), H = (double)DG_IN(g, n, 0)->shape[1];
    c->flops = 0;
    c->bytes = 4.0 * (2.0 * N * H + 3.0 * N);
}

static size_t ws_permute(const dg_graph *g, const dg_node *n, int nthreads) {
    (void)g;
    (void)nthreads;
    return sizeof(int64_t) * (size_t)n->attrs.i[0];
}

static int k_permute(const dg_exec_env *env, const dg_graph *g, const dg_node *n, void *const *in,
                     void *const *out) {
    const dg_tensor *x = DG_IN(g, n, 0), *ix = DG_IN(g, n, 1);
    int64_t T = x->shape[0], H = x->shape[1], k = ix->shape[1];
    if (dg_cpu_moe_route(in[1], T, (int)k, n->attrs.i[0], out[1], out[2], env->workspace) != 0)
        return DG_EINPUT; /* an expert index outside [-1, E) */
    dg_cpu_moe_gather(env->team, in[0], NULL, out[2], T * k, H, (int)k, out[0]);
    return DG_OK;
}

static int adj_permute(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    if (dout[0] < 0) return DG_OK;
    const dg_tensor *ix = DG_IN(g, n, 1);
    din[0] = dg_moe_unpermute_sum(g, dout[0], n->out[2], ix->shape[0], (int)ix->shape[1]);
    return g->status;
}

const dg_op_def dg_op_moe_permute = {
    .name = "moe_permute", .min_inputs = 2, .max_inputs = 2, .n_outputs = 3,
    .iattr_names = {"num_experts"},
    .infer = infer_permute, .cost = cost_permute, .adjoint = adj_permute, .workspace = ws_permute,
    .kernel = k_permute,
};

int dg_moe_permute(dg_graph *g, int x, int indices, int num_experts, dg_permute_out *out) {
    dg_attrs a = dg_attrs_zero();
    a.i[0] = num_experts;
    int ids[3] = {-1, -1, -1};
    int r = dg_graph_add(g, &dg_op_moe_permute, &a, (int[]){x, indices}, 2, ids, "moe_permute");
    if (out) *out = (dg_permute_out){ids[0], ids[1], ids[2]};
    return r;
}

/* ---- unpermute ------------------------------------------------------------------------ */

static int infer_unpermute(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    const dg_tensor *y = DG_IN(g, n, 0);
    int64_t T = n->attrs.i[0], k = n->attrs.i[1];
    DG_TRY(check_rows(y, "y_perm", err));
    DG_TRY(check_row_map(DG_IN(g, n, 1), y->shape[0], err));
    if (T < 1 || k < 1)
        return DG_INFER_FAIL(err, "rule 'attrs' broken: T %lld and k %lld must be >= 1", (long long)T,
                             (long long)k);
    if (n->n_in > 2) DG_TRY(check_probs(DG_IN(g, n, 2), T, k, err));
    dg_desc_set(o, DG_F32, 2, (int64_t[]){T, y->shape[1]});
    return DG_OK;
}

static void cost_unpermute(const dg_graph *g, const dg_node *n, dg_cost *c) {
    double TK = (double)(n->attrs.i[0] * n->attrs.i[1]), H = (double)DG_IN(g, n, 0)->shape[1];
    c->flops = 2.0 * TK * H;
    c->bytes = 4.0 * (TK * H + (double)n->attrs.i[0] * H + 2.0 * TK);
}

static size_t ws_unpermute(const dg_graph *g, const dg_node *n, int nthreads) {
    (void)g;
    (void)nthreads;
    return ws_inverse(n->attrs.i[0], n->attrs.i[1]);
}

static int k_unpermute(const dg_exec_env *env, const dg_graph *g, const dg_node *n, void *const *in,
                       void *const *out) {
    const dg_tensor *y = DG_IN(g, n, 0);
    int64_t T = n->attrs.i[0], k = n->attrs.i[1];
    int32_t *slot_row = env->workspace;
    if (dg_cpu_moe_invert(in[1], y->shape[0], T * k, slot_row) != 0) return DG_EINPUT;
    dg_cpu_moe_combine(env->team, in[0], n->n_in > 2 ? in[2] : NULL, slot_row, T, (int)k,
                       y->shape[1], out[0]);
    return DG_OK;
}

/* y = sum_j p_j y_perm[row_j]: dy_perm[r] = p[s] dy[t]; dp[t,j] = <dy[t], y_perm[row_j]> */
static int adj_unpermute(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    int has_p = n->n_in > 2, k = (int)n->attrs.i[1];
    if (g->tensors[n->in[0]].requires_grad)
        din[0] = dg_moe_gather(g, dout[0], n->in[1], has_p ? n->in[2] : -1, k);
    if (has_p && g->tensors[n->in[2]].requires_grad) {
        dg_attrs a = dg_attrs_zero();
        a.i[0] = k;
        din[2] = dg_add1(g, &dg_op_moe_unpermute_probs_grad, &a, (int[]){dout[0], n->in[0], n->in[1]},
                         3, NULL);
    }
    return g->status;
}

const dg_op_def dg_op_moe_unpermute = {
    .name = "moe_unpermute", .min_inputs = 2, .max_inputs = 3, .n_outputs = 1,
    .iattr_names = {"num_tokens", "topk"},
    .infer = infer_unpermute, .cost = cost_unpermute, .adjoint = adj_unpermute,
    .workspace = ws_unpermute, .kernel = k_unpermute,
};

static int unpermute_node(dg_graph *g, int y_perm, int row_map, int probs, int64_t T, int k) {
    dg_attrs a = dg_attrs_zero();
    a.i[0] = T;
    a.i[1] = k;
    int in[3] = {y_perm, row_map, probs};
    return dg_add1(g, &dg_op_moe_unpermute, &a, in, probs >= 0 ? 3 : 2, NULL);
}

int dg_moe_unpermute(dg_graph *g, int y_perm, int probs, int row_map) {
    if (g->status != DG_OK) return -1;
    if (probs < 0 || probs >= g->n_tensors || g->tensors[probs].ndim != 2) {
        g->status = dg_err_set(&g->err, DG_EINPUT,
                               "dg_moe_unpermute: rule 'shape' broken: probs %d must be an [T, k] tensor",
                               probs);
        return -1;
    }
    const dg_tensor *p = &g->tensors[probs];
    return unpermute_node(g, y_perm, row_map, probs, p->shape[0], (int)p->shape[1]);
}

int dg_moe_unpermute_sum(dg_graph *g, int y_perm, int row_map, int64_t num_tokens, int topk) {
    return unpermute_node(g, y_perm, row_map, -1, num_tokens, topk);
}

/* ---- gather --------------------------------------------------------------------------- */

static int infer_gather(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    const dg_tensor *x = DG_IN(g, n, 0), *m = DG_IN(g, n, 1);
    int64_t k = n->attrs.i[0];
    DG_TRY(check_rows(x, "x", err));
    DG_TRY(check_row_map(m, -1, err));
    if (k < 1) return DG_INFER_FAIL(err, "rule 'attrs' broken: topk %lld must be >= 1", (long long)k);
    if (n->n_in > 2) DG_TRY(check_probs(DG_IN(g, n, 2), x->shape[0], k, err));
    dg_desc_set(o, DG_F32, 2, (int64_t[]){m->shape[0], x->shape[1]});
    return DG_OK;
}

static void cost_gather(const dg_graph *g, const dg_node *n, dg_cost *c) {
    double N = (double)DG_IN(g, n, 1)->shape[0], H = (double)DG_IN(g, n, 0)->shape[1];
    c->flops = n->n_in > 2 ? N * H : 0;
    c->bytes = 4.0 * (2.0 * N * H + 2.0 * N);
}

static int k_gather(const dg_exec_env *env, const dg_graph *g, const dg_node *n, void *const *in,
                    void *const *out) {
    const dg_tensor *x = DG_IN(g, n, 0), *m = DG_IN(g, n, 1);
    int64_t TK = x->shape[0] * n->attrs.i[0];
    const int32_t *map = in[1];
    for (int64_t r = 0; r < m->shape[0]; r++)
        if (map[r] < -1 || map[r] >= TK) return DG_EINPUT;
    dg_cpu_moe_gather(env->team, in[0], n->n_in > 2 ? in[2] : NULL, map, m->shape[0], x->shape[1],
                      (int)n->attrs.i[0], out[0]);
    return DG_OK;
}

/* out[r] = p[s] x[t]: dx = the weighted sum back (unpermute). The probs
 * gradient of a gather is not needed by any forward graph and is refused. */
static int adj_gather(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    int has_p = n->n_in > 2;
    if (has_p && g->tensors[n->in[2]].requires_grad) {
        if (g->status == DG_OK)
            g->status = dg_err_set(&g->err, DG_EINPUT,
                                   "moe_gather: rule 'differentiable' broken: no gradient w.r.t. probs");
        return g->status;
    }
    if (g->tensors[n->in[0]].requires_grad)
        din[0] = unpermute_node(g, dout[0], n->in[1], has_p ? n->in[2] : -1,
                                DG_IN(g, n, 0)->shape[0], (int)n->attrs.i[0]);
    return g->status;
}

const dg_op_def dg_op_moe_gather = {
    .name = "moe_gather", .min_inputs = 2, .max_inputs = 3, .n_outputs = 1,
    .iattr_names = {"topk"},
    .infer = infer_gather, .cost = cost_gather, .adjoint = adj_gather, .kernel = k_gather,
};

int dg_moe_gather(dg_graph *g, int x, int row_map, int probs, int topk) {
    dg_attrs a = dg_attrs_zero();
    a.i[0] = topk;
    int in[3] = {x, row_map, probs};
    return dg_add1(g, &dg_op_moe_gather, &a, in, probs >= 0 ? 3 : 2, NULL);
}

/* ---- probs gradient of unpermute -------------------------------------------------------- */

static int infer_dprobs(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    const dg_tensor *dy = DG_IN(g, n, 0), *y = DG_IN(g, n, 1);
    int64_t k = n->attrs.i[0];
    char a[64], b[64];
    DG_TRY(check_rows(dy, "dy", err));
    DG_TRY(check_rows(y, "y_perm", err));
    DG_TRY(check_row_map(DG_IN(g, n, 2), y->shape[0], err));
    if (k < 1) return DG_INFER_FAIL(err, "rule 'attrs' broken: topk %lld must be >= 1", (long long)k);
    if (dy->shape[1] != y->shape[1])
        return DG_INFER_FAIL(err, "rule 'shape' broken: dy %s and y_perm %s differ in H",
                             dg_shape_str(dy, a), dg_shape_str(y, b));
    dg_desc_set(o, DG_F32, 2, (int64_t[]){dy->shape[0], k});
    return DG_OK;
}

static void cost_dprobs(const dg_graph *g, const dg_node *n, dg_cost *c) {
    double TK = (double)DG_IN(g, n, 0)->shape[0] * (double)n->attrs.i[0];
    double H = (double)DG_IN(g, n, 0)->shape[1];
    c->flops = 2.0 * TK * H;
    c->bytes = 4.0 * (TK * H + (double)DG_IN(g, n, 0)->shape[0] * H + 2.0 * TK);
}

static size_t ws_dprobs(const dg_graph *g, const dg_node *n, int nthreads) {
    (void)nthreads;
    return ws_inverse(DG_IN(g, n, 0)->shape[0], n->attrs.i[0]);
}

static int k_dprobs(const dg_exec_env *env, const dg_graph *g, const dg_node *n, void *const *in,
                    void *const *out) {
    const dg_tensor *dy = DG_IN(g, n, 0), *y = DG_IN(g, n, 1);
    int64_t T = dy->shape[0], k = n->attrs.i[0];
    int32_t *slot_row = env->workspace;
    if (dg_cpu_moe_invert(in[2], y->shape[0], T * k, slot_row) != 0) return DG_EINPUT;
    dg_cpu_moe_combine_dprobs(env->team, in[0], in[1], slot_row, T, (int)k, dy->shape[1], out[0]);
    return DG_OK;
}

const dg_op_def dg_op_moe_unpermute_probs_grad = {
    .name = "moe_unpermute_probs_grad", .min_inputs = 3, .max_inputs = 3, .n_outputs = 1,
    .iattr_names = {"topk"},
    .infer = infer_dprobs, .cost = cost_dprobs, .workspace = ws_dprobs, .kernel = k_dprobs,
};
