/* dg_router.c — the "moe_router" op and its backward (see dg_router.h). */
#include "dg_router.h"

#include <math.h>
#include <string.h>

#include "dg_ops_util.h"

dg_router_opts dg_router_opts_default(int topk) {
    dg_router_opts o = {.topk = topk, .score = DG_MOE_SCORE_SOFTMAX, .pre_softmax = 0,
                        .capacity_factor = 0.0, .drop_policy = DG_MOE_DROP_PROBS,
                        .scaling_factor = 0.0, .num_groups = 0, .group_topk = 0,
                        .expert_bias = -1, .count_kept = 0};
    return o;
}

int64_t dg_moe_capacity(int64_t T, int topk, int64_t E, double capacity_factor) {
    /* Python: math.ceil((num_tokens / num_experts) * capacity_factor) in double */
    return (int64_t)ceil(((double)(T * topk) / (double)E) * capacity_factor);
}

static void cfg_from_node(const dg_graph *g, const dg_node *n, int64_t T, int64_t E,
                          dg_moe_router_cfg *c) {
    (void)g;
    c->k = (int)n->attrs.i[0];
    c->score = (dg_moe_score_fn)n->attrs.i[1];
    c->pre_softmax = (int)n->attrs.i[2];
    c->policy = (dg_moe_drop_policy)n->attrs.i[3];
    c->scaling = (float)n->attrs.f[1];
    c->capacity = n->attrs.f[0] > 0 ? dg_moe_capacity(T, c->k, E, n->attrs.f[0]) : 0;
    c->num_groups = (int)n->attrs.i[4];
    c->group_topk = (int)n->attrs.i[5];
    c->bias = NULL; /* the kernel sets it from its input */
}

/* Attr checks shared by the forward and backward op; E from the logits. */
static int check_attrs(const dg_node *n, int64_t E, dg_err *err) {
    int64_t k = n->attrs.i[0];
    if (k < 1 || k > E || k > DG_ROUTER_MAX_TOPK)
        return DG_INFER_FAIL(err, "rule 'attrs' broken: topk %lld must be in 1..min(E=%lld, %d)",
                             (long long)k, (long long)E, DG_ROUTER_MAX_TOPK);
    if (n->attrs.i[1] != DG_MOE_SCORE_SOFTMAX && n->attrs.i[1] != DG_MOE_SCORE_SIGMOID)
        return DG_INFER_FAIL(err, "rule 'attrs' broken: score function %lld is neither softmax (0) "
                                  "nor sigmoid (1)",
                             (long long)n->attrs.i[1]);
    if (n->attrs.i[2] && n->attrs.i[1] != DG_MOE_SCORE_SOFTMAX)
        return DG_INFER_FAIL(err, "rule 'attrs' broken: pre_softmax applies to the softmax "
                                  "score function only");
    if (n->attrs.i[3] != DG_MOE_DROP_PROBS && n->attrs.i[3] != DG_MOE_DROP_POSITION)
        return DG_INFER_FAIL(err, "rule 'attrs' broken: drop policy %lld is neither probs (0) nor "
                                  "position (1)",
                             (long long)n->attrs.i[3]);
    int64_t G = n->attrs.i[4], gk = n->attrs.i[5];
    if (G != 0) {
        if (G < 1 || G > DG_MOE_MAX_GROUPS || E % G != 0)
            return DG_INFER_FAIL(err, "rule 'attrs' broken: num_groups %lld must divide E=%lld "
                                      "(and be <= %d)",
                                 (long long)G, (long long)E, DG_MOE_MAX_GROUPS);
        if (gk < 1 || gk > G || gk > k || k / gk > E / G)
            return DG_INFER_FAIL(err, "rule 'attrs' broken: group_topk %lld must be in "
                                      "1..min(num_groups=%lld, topk=%lld), with "
                                      "topk/group_topk <= experts per group %lld",
                                 (long long)gk, (long long)G, (long long)k, (long long)(E / G));
    }
    return DG_OK;
}

/* The optional expert bias: f32 [E], sigmoid score function only. */
static int check_bias(const dg_node *n, const dg_tensor *b, int64_t E, dg_err *err) {
    char s[64];
    if (!dg_dtype_is_float(b->dtype) || b->ndim != 1 || b->shape[0] != E)
        return DG_INFER_FAIL(err, "rule 'shape' broken: expert bias '%s' is %s %s, expected f32 "
                                  "[E=%lld]",
                             b->name, dg_dtype_name(b->dtype), dg_shape_str(b, s), (long long)E);
    if (n->attrs.i[1] != DG_MOE_SCORE_SIGMOID)
        return DG_INFER_FAIL(err, "rule 'attrs' broken: an expert bias needs the sigmoid score function");
    return DG_OK;
}

static int check_logits(const dg_tensor *z, dg_err *err) {
    char s[64];
    if (!dg_dtype_is_float(z->dtype) || z->ndim != 2)
        return DG_INFER_FAIL(err, "rule 'shape' broken: logits '%s' must be f32 [T, E], got %s %s",
                             z->name, dg_dtype_name(z->dtype), dg_shape_str(z, s));
    return DG_OK;
}

/* ---- forward ---------------------------------------------------------------- */

static int infer_router(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    const dg_tensor *z = DG_IN(g, n, 0);
    DG_TRY(check_logits(z, err));
    int64_t T = z->shape[0], E = z->shape[1], k = n->attrs.i[0];
    DG_TRY(check_attrs(n, E, err));
    if (n->n_in > 1) DG_TRY(check_bias(n, DG_IN(g, n, 1), E, err));
    dg_desc_set(&o[0], DG_F32, 2, (int64_t[]){T, k});
    dg_desc_set(&o[1], DG_I32, 2, (int64_t[]){T, k});
    dg_desc_set(&o[2], DG_I32, 1, (int64_t[]){E});
    return DG_OK;
}

static void cost_router(const dg_graph *g, const dg_node *n, dg_cost *c) {
    const dg_tensor *z = DG_IN(g, n, 0);
    double TE = (double)dg_tensor_numel(z), Tk = (double)z->shape[0] * (double)n->attrs.i[0];
    /* exp per score plus a compare-insert per candidate */
    c->flops = TE * (n->attrs.i[1] == DG_MOE_SCORE_SOFTMAX && !n->attrs.i[2] ? 2.0 : 5.0) + Tk * 4.0;
    c->bytes = 4.0 * (TE + 2.0 * Tk + (double)z->shape[1]);
}

static size_t ws_router(const dg_graph *g, const dg_node *n, int nthreads) {
    (void)nthreads;
    const dg_tensor *z = DG_IN(g, n, 0);
    if (n->attrs.f[0] <= 0) return 0;
    return dg_cpu_moe_router_work_bytes(z->shape[0], z->shape[1], (int)n->attrs.i[0]);
}

static int k_router(const dg_exec_env *env, const dg_graph *g, const dg_node *n, void *const *in,
                    void *const *out) {
    const dg_tensor *z = DG_IN(g, n, 0);
    dg_moe_router_cfg c;
    cfg_from_node(g, n, z->shape[0], z->shape[1], &c);
    c.bias = n->n_in > 1 ? in[1] : NULL;
    if (dg_cpu_moe_router(env->team, &c, in[0], z->shape[0], z->shape[1], out[0], out[1], out[2],
                          env->workspace) != 0)
        return DG_EINTERNAL;
    if (n->attrs.i[6]) { /* count the kept slots instead (dropped ones are -1) */
        int32_t *cnt = out[2];
        const int32_t *idx = out[1];
        memset(cnt, 0, sizeof(int32_t) * (size_t)z->shape[1]);
        for (int64_t s = 0; s < z->shape[0] * n->attrs.i[0]; s++)
            if (idx[s] >= 0) cnt[idx[s]]++;
    }
    return DG_OK;
}

static int adj_router(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    if (dout[0] < 0) return DG_OK; /* only probs differentiates, w.r.t. the logits */
    int in[4] = {dout[0], n->in[0], n->out[1], n->n_in > 1 ? n->in[1] : -1};
    din[0] = dg_add1(g, &dg_op_moe_router_grad, &n->attrs, in, n->n_in > 1 ? 4 : 3, NULL);
    return g->status;
}

const dg_op_def dg_op_moe_router = {
    .name = "moe_router", .min_inputs = 1, .max_inputs = 2, .n_outputs = 3,
    .iattr_names = {"topk", "score_function", "pre_softmax", "drop_policy", "num_groups", "group_topk", "count_kept"},
    .fattr_names = {"capacity_factor", "scaling_factor"},
    .infer = infer_router, .cost = cost_router, .adjoint = adj_router, .workspace = ws_router,
    .kernel = k_router,
    .f32_outputs = 7u /* probabilities (and the int outputs) */,
};

int dg_moe_router(dg_graph *g, int logits, const dg_router_opts *o, dg_router_out *out) {
    dg_attrs a = dg_attrs_zero();
    a.i[0] = o->topk;
    a.i[1] = o->score;
    a.i[2] = o->pre_softmax;
    a.i[3] = o->drop_policy;
    a.f[0] = o->capacity_factor > 0 ? o->capacity_factor : 0.0;
    a.f[1] = o->scaling_factor;
    a.i[4] = o->num_groups;
    a.i[5] = o->num_groups > 0 ? o->group_topk : 0;
    a.i[6] = o->count_kept;
    int ids[3] = {-1, -1, -1};
    int in[2] = {logits, o->expert_bias};
    int p = dg_graph_add(g, &dg_op_moe_router, &a, in, o->expert_bias >= 0 ? 2 : 1, ids, "moe_router");
    if (out) *out = (dg_router_out){ids[0], ids[1], ids[2]};
    return p;
}

/* ---- backward ----------------------------------------------------------------- */

static int infer_router_grad(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    const dg_tensor *dp = DG_IN(g, n, 0), *z = DG_IN(g, n, 1), *ix = DG_IN(g, n, 2);
    DG_TRY(check_logits(z, err));
    DG_TRY(check_attrs(n, z->shape[1], err));
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    DG_INFER_DTYPE(g, n, 2, DG_I32, err);
    char a[64], b[64];
    int64_t T = z->shape[0], k = n->attrs.i[0];
    if (dp->ndim != 2 || dp->shape[0] != T || dp->shape[1] != k || !dg_same_shape(dp, ix))
        return DG_INFER_FAIL(err, "rule 'shape' broken: dprobs %s and indices %s must be [T=%lld, "
                                  "k=%lld]",
                             dg_shape_str(dp, a), dg_shape_str(ix, b), (long long)T, (long long)k);
    if (n->n_in > 3) DG_TRY(check_bias(n, DG_IN(g, n, 3), z->shape[1], err));
    dg_desc_like(o, z);
    return DG_OK;
}

static void cost_router_grad(const dg_graph *g, const dg_node *n, dg_cost *c) {
    cost_router(g, n, c);
    c->bytes += 4.0 * (double)dg_tensor_numel(DG_IN(g, n, 1));
}

static int k_router_grad(const dg_exec_env *env, const dg_graph *g, const dg_node *n,
                         void *const *in, void *const *out) {
    const dg_tensor *z = DG_IN(g, n, 1);
    dg_moe_router_cfg c;
    cfg_from_node(g, n, z->shape[0], z->shape[1], &c);
    c.bias = n->n_in > 3 ? in[3] : NULL;
    dg_cpu_moe_router_bwd(env->team, &c, in[0], in[1], in[2], z->shape[0], z->shape[1], out[0]);
    return DG_OK;
}

const dg_op_def dg_op_moe_router_grad = {
    .name = "moe_router_grad", .min_inputs = 3, .max_inputs = 4, .n_outputs = 1,
    .iattr_names = {"topk", "score_function", "pre_softmax", "drop_policy", "num_groups", "group_topk"},
    .fattr_names = {"capacity_factor", "scaling_factor"},
    .infer = infer_router_grad, .cost = cost_router_grad, .kernel = k_router_grad,
};
