/* dg_moe_loss.c — aux (load-balancing) loss and z-loss ops (see dg_moe_loss.h). */
#include "dg_moe_loss.h"

#include "dg_ops_util.h"

static int check_logits(const dg_tensor *z, dg_err *err) {
    char s[64];
    if (!dg_dtype_is_float(z->dtype) || z->ndim != 2)
        return DG_INFER_FAIL(err, "rule 'shape' broken: logits '%s' must be f32 [T, E], got %s %s",
                             z->name, dg_dtype_name(z->dtype), dg_shape_str(z, s));
    return DG_OK;
}

static int check_scalar(const dg_tensor *d, dg_err *err) {
    if (d->dtype != DG_F32 || dg_tensor_numel(d) != 1)
        return DG_INFER_FAIL(err, "rule 'shape' broken: dloss '%s' must be an f32 scalar", d->name);
    return DG_OK;
}

/* Is routing i32 indices [T, k] (returns 1) or counts [E] (returns 0)? */
static int check_routing(const dg_node *n, const dg_tensor *z, const dg_tensor *r, dg_err *err,
                         int *is_indices) {
    char s[64];
    int64_t T = z->shape[0], E = z->shape[1], k = n->attrs.i[0];
    if (k < 1 || k > E)
        return DG_INFER_FAIL(err, "rule 'attrs' broken: topk %lld must be in 1..E=%lld", (long long)k,
                             (long long)E);
    if (n->attrs.i[1] != DG_MOE_SCORE_SOFTMAX && n->attrs.i[1] != DG_MOE_SCORE_SIGMOID)
        return DG_INFER_FAIL(err, "rule 'attrs' broken: score function %lld is neither softmax (0) "
                                  "nor sigmoid (1)",
                             (long long)n->attrs.i[1]);
    int64_t B = n->attrs.i[2];
    if (B < 0 || (B > 1 && T % B != 0))
        return DG_INFER_FAIL(err, "rule 'attrs' broken: num_seqs %lld must divide T=%lld",
                             (long long)B, (long long)T);
    if (n->attrs.i[4]) { /* seq_counts: i32 counts per sequence [B, E] */
        int64_t Bc = DG_MAX(B, 1);
        if (!r || r->dtype != DG_I32 || r->ndim != 2 || r->shape[0] != Bc || r->shape[1] != E)
            return DG_INFER_FAIL(err, "rule 'shape' broken: seq_counts wants routing i32 [B=%lld, E=%lld]%s%s",
                                 (long long)Bc, (long long)E, r ? ", got " : "", r ? dg_shape_str(r, s) : "");
        *is_indices = 0;
        return DG_OK;
    }
    if (B > 1 && r && r->ndim == 1)
        return DG_INFER_FAIL(err, "rule 'shape' broken: the per-sequence loss (num_seqs %lld) needs "
                                  "indices [T, k] or no routing input, not counts [E]",
                             (long long)B);
    if (!r) return DG_OK; /* top-k of the aux scores, computed by the kernel */
    if (r->dtype == DG_I32 && r->ndim == 2 && r->shape[0] == T && r->shape[1] == k) {
        *is_indices = 1;
        return DG_OK;
    }
    if (r->dtype == DG_I32 && r->ndim == 1 && r->shape[0] == E) {
        *is_indices = 0;
        return DG_OK;
    }
    return DG_INFER_FAIL(err, "rule 'shape' broken: routing '%s' is %s %s, expected i32 indices "
                              "[T=%lld, k=%lld] or i32 counts [E=%lld]",
                         r->name, dg_dtype_name(r->dtype), dg_shape_str(r, s), (long long)T,
                         (long long)k, (long long)E);
}

/* Bytes rounded up to whole cache lines, so workspace parts stay aligned. */
static size_t lines(size_t n) { return (n + 63) / 64 * 64; }

static dg_moe_seqs seqs_of(const dg_node *n) {
    dg_moe_seqs q = {DG_MAX(n->attrs.i[2], 1), (int)n->attrs.i[3]};
    return q;
}

/* Workspace: f [B, E] floats, then (without a routing input) T*k indices. */
static size_t f_bytes(const dg_graph *g, const dg_node *n, int zin) {
    const dg_tensor *z = DG_IN(g, n, zin);
    size_t b = lines(sizeof(float) * (size_t)(seqs_of(n).B * z->shape[1]));
    if (n->n_in == zin + 1) b += lines(sizeof(int32_t) * (size_t)(z->shape[0] * n->attrs.i[0]));
    return b;
}

/* f as floats [B, E] at the start of the workspace: from the routing input
 * (r != NULL) or Megatron's top-k of the aux scores. */
static float *counts_f(const dg_exec_env *env, const dg_node *n, const dg_tensor *z,
                       const dg_tensor *r, const void *routing, const float *logits) {
    int64_t T = z->shape[0], E = z->shape[1];
    dg_moe_seqs q = seqs_of(n);
    float *f = env->workspace;
    if (!r) {
        int32_t *idx = (int32_t *)((char *)env->workspace + lines(sizeof(float) * (size_t)(q.B * E)));
        dg_cpu_moe_aux_counts(env->team, (dg_moe_score_fn)n->attrs.i[1], logits, T, E,
                              (int)n->attrs.i[0], q, idx, f);
    } else if (n->attrs.i[4]) { /* counts per sequence [B, E] */
        const int32_t *c = routing;
        for (int64_t u = 0; u < q.B * E; u++) f[u] = (float)c[u];
    } else if (r->ndim == 2) {
        dg_cpu_moe_count(routing, T, (int)r->shape[1], E, q, f);
    } else {
        const int32_t *c = routing;
        for (int64_t e = 0; e < E; e++) f[e] = (float)c[e];
    }
    return f;
}


/* ---- aux loss ------------------------------------------------------------------------ */

static int infer_aux(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    const dg_tensor *z = DG_IN(g, n, 0);
    int is_ix;
    DG_TRY(check_logits(z, err));
    DG_TRY(check_routing(n, z, n->n_in > 1 ? DG_IN(g, n, 1) : NULL, err, &is_ix));
    dg_desc_set(o, DG_F32, 0, NULL);
    return DG_OK;
}

static void cost_aux(const dg_graph *g, const dg_node *n, dg_cost *c) {
    double TE = (double)dg_tensor_numel(DG_IN(g, n, 0));
    c->flops = 5.0 * TE;
    c->bytes = 4.0 * 2.0 * TE;
}

static size_t ws_aux(const dg_graph *g, const dg_node *n, int nthreads) {
    (void)nthreads;
    const dg_tensor *z = DG_IN(g, n, 0);
    return f_bytes(g, n, 0) + dg_cpu_moe_aux_work_bytes(z->shape[0], z->shape[1], seqs_of(n).B);
}

static int k_aux(const dg_exec_env *env, const dg_graph *g, const dg_node *n, void *const *in,
                 void *const *out) {
    const dg_tensor *z = DG_IN(g, n, 0);
    int64_t T = z->shape[0], E = z->shape[1];
    const float *f = counts_f(env, n, z, n->n_in > 1 ? DG_IN(g, n, 1) : NULL,
                              n->n_in > 1 ? in[1] : NULL, in[0]);
    *(float *)out[0] = dg_cpu_moe_aux_loss(env->team, (dg_moe_score_fn)n->attrs.i[1], in[0], f, T, E,
                                           (int)n->attrs.i[0], seqs_of(n), (float)n->attrs.f[0],
                                           (char *)env->workspace + f_bytes(g, n, 0));
    return DG_OK;
}

static int adj_aux(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    int in[3] = {dout[0], n->in[0], n->n_in > 1 ? n->in[1] : -1};
    din[0] = dg_add1(g, &dg_op_moe_aux_loss_grad, &n->attrs, in, n->n_in + 1, NULL);
    return g->status;
}

const dg_op_def dg_op_moe_aux_loss = {
    .name = "moe_aux_loss", .min_inputs = 1, .max_inputs = 2, .n_outputs = 1,
    .iattr_names = {"topk", "score_function", "num_seqs", "seq_major", "seq_counts"}, .fattr_names = {"coeff"},
    .infer = infer_aux, .cost = cost_aux, .adjoint = adj_aux, .workspace = ws_aux,
    .kernel = k_aux, .traits = DG_TRAIT_TOKEN_STAT,
    .f32_outputs = 1u,
};

int dg_moe_aux_loss(dg_graph *g, int logits, int routing, int topk, dg_moe_score_fn score,
                    double coeff) {
    return dg_moe_seq_aux_loss(g, logits, routing, topk, score, coeff, 1, 0);
}

/* The aux loss's attrs (also the per-sequence counts'): see dg_moe_loss.h. */
static dg_attrs aux_attrs(int topk, dg_moe_score_fn score, double coeff, int64_t num_seqs, int seq_major,
                          int seq_counts) {
    dg_attrs a = dg_attrs_zero();
    a.i[0] = topk;
    a.i[1] = score;
    a.i[2] = num_seqs;
    a.i[3] = seq_major ? 1 : 0;
    a.i[4] = seq_counts;
    a.f[0] = coeff;
    return a;
}

int dg_moe_seq_aux_loss(dg_graph *g, int logits, int routing, int topk, dg_moe_score_fn score,
                        double coeff, int64_t num_seqs, int seq_major) {
    dg_attrs a = aux_attrs(topk, score, coeff, num_seqs, seq_major, 0);
    return dg_add1(g, &dg_op_moe_aux_loss, &a, (int[]){logits, routing}, routing >= 0 ? 2 : 1,
                   "moe_aux_loss");
}

int dg_moe_seq_aux_loss_counts(dg_graph *g, int logits, int counts, int topk, dg_moe_score_fn score,
                               double coeff, int64_t num_seqs, int seq_major) {
    dg_attrs a = aux_attrs(topk, score, coeff, num_seqs, seq_major, 1);
    return dg_add1(g, &dg_op_moe_aux_loss, &a, (int[]){logits, counts}, 2, "moe_aux_loss");
}

/* ---- Megatron's own counts per sequence ------------------------------------------------ */

static int infer_seq_counts(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    const dg_tensor *z = DG_IN(g, n, 0);
    int is_ix;
    DG_TRY(check_logits(z, err));
    DG_TRY(check_routing(n, z, NULL, err, &is_ix));
    dg_desc_set(o, DG_I32, 2, DG_SHAPE(seqs_of(n).B, z->shape[1]));
    return DG_OK;
}

static size_t ws_seq_counts(const dg_graph *g, const dg_node *n, int nthreads) {
    (void)nthreads;
    return f_bytes(g, n, 0);
}

static int k_seq_counts(const dg_exec_env *env, const dg_graph *g, const dg_node *n, void *const *in,
                        void *const *out) {
    const dg_tensor *z = DG_IN(g, n, 0);
    const float *f = counts_f(env, n, z, NULL, NULL, in[0]);
    int32_t *c = out[0];
    for (int64_t u = 0; u < seqs_of(n).B * z->shape[1]; u++) c[u] = (int32_t)f[u];
    return DG_OK;
}

const dg_op_def dg_op_moe_seq_counts = {
    .name = "moe_seq_counts", .min_inputs = 1, .max_inputs = 1, .n_outputs = 1,
    .iattr_names = {"topk", "score_function", "num_seqs", "seq_major"},
    .infer = infer_seq_counts, .workspace = ws_seq_counts, .kernel = k_seq_counts,
};

int dg_moe_seq_counts(dg_graph *g, int logits, int topk, dg_moe_score_fn score, int64_t num_seqs, int seq_major) {
    dg_attrs a = aux_attrs(topk, score, 0.0, num_seqs, seq_major, 0);
    return dg_add1(g, &dg_op_moe_seq_counts, &a, &logits, 1, "moe_seq_counts");
}

static int infer_aux_grad(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    const dg_tensor *z = DG_IN(g, n, 1);
    int is_ix;
    DG_TRY(check_scalar(DG_IN(g, n, 0), err));
    DG_TRY(check_logits(z, err));
    DG_TRY(check_routing(n, z, n->n_in > 2 ? DG_IN(g, n, 2) : NULL, err, &is_ix));
    dg_desc_like(o, z);
    return DG_OK;
}

static void cost_aux_grad(const dg_graph *g, const dg_node *n, dg_cost *c) {
    double TE = (double)dg_tensor_numel(DG_IN(g, n, 1));
    c->flops = 8.0 * TE;
    c->bytes = 4.0 * 2.0 * TE;
}

static size_t ws_aux_grad(const dg_graph *g, const dg_node *n, int nthreads) {
    (void)nthreads;
    return f_bytes(g, n, 1);
}

static int k_aux_grad(const dg_exec_env *env, const dg_graph *g, const dg_node *n, void *const *in,
                      void *const *out) {
    const dg_tensor *z = DG_IN(g, n, 1);
    int64_t T = z->shape[0], E = z->shape[1];
    const float *f = counts_f(env, n, z, n->n_in > 2 ? DG_IN(g, n, 2) : NULL,
                              n->n_in > 2 ? in[2] : NULL, in[1]);
    dg_cpu_moe_aux_loss_bwd(env->team, (dg_moe_score_fn)n->attrs.i[1], in[1], f, T, E,
                            (int)n->attrs.i[0], seqs_of(n), (float)n->attrs.f[0],
                            *(const float *)in[0], out[0]);
    return DG_OK;
}

const dg_op_def dg_op_moe_aux_loss_grad = {
    .name = "moe_aux_loss_grad", .min_inputs = 2, .max_inputs = 3, .n_outputs = 1,
    .iattr_names = {"topk", "score_function", "num_seqs", "seq_major", "seq_counts"}, .fattr_names = {"coeff"},
    .infer = infer_aux_grad, .cost = cost_aux_grad, .workspace = ws_aux_grad,
    .kernel = k_aux_grad,
};

/* ---- z-loss ------------------------------------------------------------------------------ */

static int infer_z(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_TRY(check_logits(DG_IN(g, n, 0), err));
    dg_desc_set(o, DG_F32, 0, NULL);
    return DG_OK;
}

static void cost_z(const dg_graph *g, const dg_node *n, dg_cost *c) {
    double TE = (double)dg_tensor_numel(DG_IN(g, n, 0));
    c->flops = 3.0 * TE;
    c->bytes = 4.0 * TE;
}

static size_t ws_z(const dg_graph *g, const dg_node *n, int nthreads) {
    (void)nthreads;
    return sizeof(double) * (size_t)DG_IN(g, n, 0)->shape[0];
}

static int k_z(const dg_exec_env *env, const dg_graph *g, const dg_node *n, void *const *in,
               void *const *out) {
    const dg_tensor *z = DG_IN(g, n, 0);
    *(float *)out[0] = dg_cpu_moe_z_loss(env->team, in[0], z->shape[0], z->shape[1],
                                         (float)n->attrs.f[0], env->workspace);
    return DG_OK;
}

static int adj_z(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    int in[2] = {dout[0], n->in[0]};
    din[0] = dg_add1(g, &dg_op_moe_z_loss_grad, &n->attrs, in, 2, NULL);
    return g->status;
}

const dg_op_def dg_op_moe_z_loss = {
    .name = "moe_z_loss", .min_inputs = 1, .max_inputs = 1, .n_outputs = 1,
    .fattr_names = {"coeff"},
    .infer = infer_z, .cost = cost_z, .adjoint = adj_z, .workspace = ws_z, .kernel = k_z,
    .traits = DG_TRAIT_TOKEN_STAT,
    .f32_outputs = 1u,
};

int dg_moe_z_loss(dg_graph *g, int logits, double coeff) {
    dg_attrs a = dg_attrs_zero();
    a.f[0] = coeff;
    return dg_add1(g, &dg_op_moe_z_loss, &a, &logits, 1, "moe_z_loss");
}

static int infer_z_grad(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_TRY(check_scalar(DG_IN(g, n, 0), err));
    DG_TRY(check_logits(DG_IN(g, n, 1), err));
    dg_desc_like(o, DG_IN(g, n, 1));
    return DG_OK;
}

static void cost_z_grad(const dg_graph *g, const dg_node *n, dg_cost *c) {
    double TE = (double)dg_tensor_numel(DG_IN(g, n, 1));
    c->flops = 5.0 * TE;
    c->bytes = 8.0 * TE;
}

static int k_z_grad(const dg_exec_env *env, const dg_graph *g, const dg_node *n, void *const *in,
                    void *const *out) {
    const dg_tensor *z = DG_IN(g, n, 1);
    dg_cpu_moe_z_loss_bwd(env->team, in[1], z->shape[0], z->shape[1], (float)n->attrs.f[0],
                          *(const float *)in[0], out[0]);
    return DG_OK;
}

const dg_op_def dg_op_moe_z_loss_grad = {
    .name = "moe_z_loss_grad", .min_inputs = 2, .max_inputs = 2, .n_outputs = 1,
    .fattr_names = {"coeff"},
    .infer = infer_z_grad, .cost = cost_z_grad, .kernel = k_z_grad,
};
