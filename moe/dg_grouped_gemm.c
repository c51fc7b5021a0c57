/* dg_grouped_gemm.c — grouped_gemm and grouped_gemm_wgrad ops (see dg_grouped_gemm.h). */
#include "dg_grouped_gemm.h"
#include "dg_layout.h"

#include <string.h>

#include "dg_cpu_grouped_gemm.h"
#include "dg_ops_util.h"

static int check_counts(const dg_tensor *c, int64_t E, dg_err *err) {
    char s[64];
    if (c->dtype != DG_I32 || c->ndim != 1 || (E >= 0 && c->shape[0] != E))
        return DG_INFER_FAIL(err, "rule 'shape' broken: tokens_per_expert '%s' is %s %s, expected "
                                  "i32 [E=%lld]",
                             c->name, dg_dtype_name(c->dtype), dg_shape_str(c, s), (long long)E);
    return DG_OK;
}

static int check_2d(const dg_tensor *t, const char *what, dg_err *err) {
    char s[64];
    if (!dg_dtype_is_float(t->dtype) || t->ndim != 2)
        return DG_INFER_FAIL(err, "rule 'shape' broken: %s '%s' must be f32 [N, features], got %s %s",
                             what, t->name, dg_dtype_name(t->dtype), dg_shape_str(t, s));
    return DG_OK;
}

/* ---- grouped_gemm ----------------------------------------------------------------------- */

static int infer_gg(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    const dg_tensor *x = DG_IN(g, n, 0), *w = DG_IN(g, n, 2);
    int tw = (int)n->attrs.i[0];
    char a[64], b[64];
    DG_TRY(check_2d(x, "x", err));
    if (!dg_dtype_is_float(w->dtype) || w->ndim != 3)
        return DG_INFER_FAIL(err, "rule 'shape' broken: w '%s' must be f32 [E, out, in], got %s %s",
                             w->name, dg_dtype_name(w->dtype), dg_shape_str(w, a));
    DG_TRY(check_counts(DG_IN(g, n, 1), w->shape[0], err));
    int64_t K = tw ? w->shape[2] : w->shape[1], M = tw ? w->shape[1] : w->shape[2];
    if (x->shape[1] != K)
        return DG_INFER_FAIL(err, "rule 'shape' broken: inner dims differ: x %s @ w_e%s with w %s",
                             dg_shape_str(x, a), tw ? "^T" : "", dg_shape_str(w, b));
    dg_desc_set(o, DG_F32, 2, (int64_t[]){x->shape[0], M});
    return DG_OK;
}

double dg_grouped_gemm_routed_fraction(const dg_graph *g, const dg_node *n) {
    int gg = n->op == &dg_op_grouped_gemm;
    if (!gg && n->op != &dg_op_grouped_gemm_wgrad) return 1.0;
    int64_t bound = g->tensors[n->in[0]].shape[0], expected = n->attrs.i[gg ? 1 : 0];
    return expected > 0 && expected < bound && bound > 0 ? (double)expected / (double)bound : 1.0;
}

static void cost_gg(const dg_graph *g, const dg_node *n, dg_cost *c) {
    const dg_tensor *x = DG_IN(g, n, 0), *w = DG_IN(g, n, 2);
    double N = (double)x->shape[0], K = (double)x->shape[1];
    double M = (double)(n->attrs.i[0] ? w->shape[1] : w->shape[2]);
    /* N is the bound on the routed rows: so is this (the plan's worst case) */
    c->flops = 2.0 * N * K * M;
    c->bytes = 4.0 * (N * K + (double)dg_tensor_numel(w) + N * M);
}

static int k_gg(const dg_exec_env *env, const dg_graph *g, const dg_node *n, void *const *in,
                void *const *out) {
    const dg_tensor *x = DG_IN(g, n, 0), *w = DG_IN(g, n, 2);
    int tw = (int)n->attrs.i[0];
    int64_t M = tw ? w->shape[1] : w->shape[2];
    return dg_cpu_grouped_gemm(env->team, tw, w->shape[0], in[1], x->shape[0], x->shape[1], M, in[0],
                               in[2], out[0]) == 0
               ? DG_OK
               : DG_EINPUT; /* counts negative or summing past N */
}

static int gg_add(dg_graph *g, int x, int c, int w, int tw, int64_t rows);
static int wgrad_add(dg_graph *g, int a, int b, int c, int64_t rows);

static int adj_gg(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    int x = n->in[0], c = n->in[1], w = n->in[2], dy = dout[0];
    int tw = (int)n->attrs.i[0];
    int64_t rows = n->attrs.i[1];
    if (g->tensors[x].requires_grad) din[0] = gg_add(g, dy, c, w, !tw, rows);
    if (g->tensors[w].requires_grad) din[2] = tw ? wgrad_add(g, dy, x, c, rows) : wgrad_add(g, x, dy, c, rows);
    return g->status;
}

/* The experts' weights may be this rank's slice (dim 0 over ep, the EP
 * pass's local [E/ep, ...]): the rows in x were dispatched to those
 * experts, so the output is an ordinary, unsplit activation. Under expert
 * tensor parallelism (parallel/ep/dg_etp.h) a weight may also be split over tp on
 * its output features (column parallel: x whole, output features split
 * alike, stride kept) or on its input features with x's features split
 * alike (row parallel: the output is a partial sum over tp). */
static int shard_gg(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                    dg_attrs *attrs) {
    (void)attrs;
    (void)g;
    dg_sharding w = in[2], x = in[0];
    int tw = (int)n->attrs.i[0], nd = tw ? 1 : 2, kd = tw ? 2 : 1;
    if (w.split[0] == DG_AXIS_EP && w.split2[0] == DG_AXIS_NONE) w.split[0] = DG_AXIS_NONE;
    memset(out, 0, sizeof *out);
    if (w.split[nd] == DG_AXIS_TP && !w.split2[nd] && dg_layout_is_replicated(&x)) { /* column parallel */
        out[0].split[1] = DG_AXIS_TP;
        out[0].stride[1] = w.stride[nd];
        w.split[nd] = DG_AXIS_NONE;
        w.stride[nd] = 0;
    } else if (w.split[kd] == DG_AXIS_TP && !w.split2[kd] && !w.stride[kd] && x.split[1] == DG_AXIS_TP &&
               !x.split2[1] && !x.stride[1] && x.partial == DG_AXIS_NONE) { /* row parallel */
        out[0].partial = DG_AXIS_TP;
        w.split[kd] = DG_AXIS_NONE;
        x.split[1] = DG_AXIS_NONE;
    }
    if (!dg_layout_is_replicated(&x) || !dg_layout_is_replicated(&in[1]) || !dg_layout_is_replicated(&w)) {
        memset(out, 0, sizeof *out);
        return DG_SHARD_CANNOT;
    }
    return DG_OK;
}

const dg_op_def dg_op_grouped_gemm = {
    .name = "grouped_gemm", .min_inputs = 3, .max_inputs = 3, .n_outputs = 1,
    .iattr_names = {"transpose_w", "expected_rows"},
    .infer = infer_gg, .cost = cost_gg, .adjoint = adj_gg, .kernel = k_gg, .shard = shard_gg,
};

static int gg_add(dg_graph *g, int x, int c, int w, int tw, int64_t rows) {
    dg_attrs a = dg_attrs_zero();
    a.i[0] = tw ? 1 : 0;
    a.i[1] = rows;
    return dg_add1(g, &dg_op_grouped_gemm, &a, (int[]){x, c, w}, 3, NULL);
}

int dg_grouped_gemm(dg_graph *g, int x, int tokens_per_expert, int w, int transpose_w) {
    return gg_add(g, x, tokens_per_expert, w, transpose_w, 0);
}

int dg_grouped_linear(dg_graph *g, int x, int tokens_per_expert, int w) {
    return gg_add(g, x, tokens_per_expert, w, 1, 0);
}

int dg_grouped_linear_expect(dg_graph *g, int x, int tokens_per_expert, int w, int64_t expected_rows) {
    return gg_add(g, x, tokens_per_expert, w, 1, expected_rows);
}

/* ---- grouped_gemm_wgrad --------------------------------------------------------------------- */

static int infer_wgrad(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    const dg_tensor *a = DG_IN(g, n, 0), *b = DG_IN(g, n, 1), *c = DG_IN(g, n, 2);
    char sa[64], sb[64];
    DG_TRY(check_2d(a, "a", err));
    DG_TRY(check_2d(b, "b", err));
    DG_TRY(check_counts(c, -1, err));
    if (a->shape[0] != b->shape[0])
        return DG_INFER_FAIL(err, "rule 'shape' broken: a %s and b %s differ in rows",
                             dg_shape_str(a, sa), dg_shape_str(b, sb));
    dg_desc_set(o, DG_F32, 3, (int64_t[]){c->shape[0], a->shape[1], b->shape[1]});
    return DG_OK;
}

static void cost_wgrad(const dg_graph *g, const dg_node *n, dg_cost *c) {
    const dg_tensor *a = DG_IN(g, n, 0), *b = DG_IN(g, n, 1);
    double N = (double)a->shape[0], A = (double)a->shape[1], B = (double)b->shape[1];
    c->flops = 2.0 * N * A * B;
    c->bytes = 4.0 * (N * A + N * B + (double)DG_IN(g, n, 2)->shape[0] * A * B);
}

static int k_wgrad(const dg_exec_env *env, const dg_graph *g, const dg_node *n, void *const *in,
                   void *const *out) {
    const dg_tensor *a = DG_IN(g, n, 0), *b = DG_IN(g, n, 1);
    return dg_cpu_grouped_gemm_wgrad(env->team, DG_IN(g, n, 2)->shape[0], in[2], a->shape[0],
                                     a->shape[1], b->shape[1], in[0], in[1], out[0]) == 0
               ? DG_OK
               : DG_EINPUT;
}

/* out_e = a_e^T b_e: da_e = b_e out_e^T, db_e = a_e out_e. */
static int adj_wgrad(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    int a = n->in[0], b = n->in[1], c = n->in[2];
    int64_t rows = n->attrs.i[0];
    if (g->tensors[a].requires_grad) din[0] = gg_add(g, b, c, dout[0], 1, rows);
    if (g->tensors[b].requires_grad) din[1] = gg_add(g, a, c, dout[0], 0, rows);
    return g->status;
}

const dg_op_def dg_op_grouped_gemm_wgrad = {
    .name = "grouped_gemm_wgrad", .min_inputs = 3, .max_inputs = 3, .n_outputs = 1,
    .iattr_names = {"expected_rows"},
    .infer = infer_wgrad, .cost = cost_wgrad, .adjoint = adj_wgrad, .kernel = k_wgrad,
};

static int wgrad_add(dg_graph *g, int a, int b, int c, int64_t rows) {
    dg_attrs at = dg_attrs_zero();
    at.i[0] = rows;
    return dg_add1(g, &dg_op_grouped_gemm_wgrad, &at, (int[]){a, b, c}, 3, NULL);
}

int dg_grouped_gemm_wgrad(dg_graph *g, int a, int b, int tokens_per_expert) {
    return wgrad_add(g, a, b, tokens_per_expert, 0);
}
