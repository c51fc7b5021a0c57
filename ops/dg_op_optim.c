/* dg_op_optim.c — see dg_op_optim.h. */
#include "dg_op_optim.h"

#include <math.h>

#include "dg_cpu_adamw.h"
#include "dg_ops_util.h"

static int is_vec(const dg_tensor *t, dg_dtype dt, int64_t n) {
    return t->dtype == dt && t->ndim == 1 && t->shape[0] == n;
}

/* ---- optim_sumsq ------------------------------------------------------------------ */

static int infer_sumsq(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    for (int i = 0; i < n->n_in; i++) DG_INFER_DTYPE(g, n, i, DG_F32, err);
    dg_desc_set(o, DG_F64, 1, DG_SHAPE(1));
    return DG_OK;
}

static void cost_sumsq(const dg_graph *g, const dg_node *n, dg_cost *c) {
    double e = 0;
    for (int i = 0; i < n->n_in; i++) e += (double)dg_tensor_numel(DG_IN(g, n, i));
    c->flops = 3.0 * e;
    c->bytes = 4.0 * e;
}

static int k_sumsq(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                   void *const *out) {
    double s = 0;
    for (int i = 0; i < n->n_in; i++)
        s += dg_cpu_sumsq(e->team, in[i], dg_tensor_numel(DG_IN(g, n, i)), (float)n->attrs.f[0]);
    *(double *)out[0] = s;
    return DG_OK;
}

const dg_op_def dg_op_optim_sumsq = {
    .name = "optim_sumsq", .min_inputs = 1, .max_inputs = DG_MAX_INPUTS, .n_outputs = 1,
    .fattr_names = {"scale", NULL}, .infer = infer_sumsq, .cost = cost_sumsq, .kernel = k_sumsq,
};

/* ---- optim_sum -------------------------------------------------------------------- */

static int infer_sum(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    for (int i = 0; i < n->n_in; i++) DG_INFER_DTYPE(g, n, i, DG_F64, err);
    dg_desc_set(o, DG_F64, 1, DG_SHAPE(1));
    return DG_OK;
}

static int k_sum(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                 void *const *out) {
    (void)e;
    double s = 0;
    for (int i = 0; i < n->n_in; i++) {
        const double *x = in[i];
        for (int64_t k = 0; k < dg_tensor_numel(DG_IN(g, n, i)); k++) s += x[k];
    }
    *(double *)out[0] = s;
    return DG_OK;
}

const dg_op_def dg_op_optim_sum = {
    .name = "optim_sum", .min_inputs = 1, .max_inputs = DG_MAX_INPUTS, .n_outputs = 1,
    .infer = infer_sum, .kernel = k_sum,
};

/* ---- optim_clip ------------------------------------------------------------------- */

static int infer_clip(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    if (!is_vec(DG_IN(g, n, 0), DG_F64, 1) || !is_vec(DG_IN(g, n, 1), DG_F64, DG_OPTIM_NHPARAMS))
        return DG_INFER_FAIL(err, "rule 'shape' broken: expected sumsq f64 [1] and hparams f64 [%d]",
                             DG_OPTIM_NHPARAMS);
    dg_desc_set(o, DG_F64, 1, DG_SHAPE(DG_OPTIM_NSTATUS));
    return DG_OK;
}

static int k_clip(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                  void *const *out) {
    (void)e, (void)g;
    const double *hp = in[1];
    double *st = out[0], norm = sqrt(*(const double *)in[0]), max_norm = n->attrs.f[0];
    double coef = max_norm > 0 ? max_norm / (norm + 1e-6) : 1.0;
    st[DG_OPTIM_NORM] = norm;
    st[DG_OPTIM_CLIP] = coef < 1.0 ? coef : 1.0;
    st[DG_OPTIM_OK] = isfinite(norm) && hp[DG_OPTIM_APPLY] != 0 ? 1.0 : 0.0;
    return DG_OK;
}

const dg_op_def dg_op_optim_clip = {
    .name = "optim_clip", .min_inputs = 2, .max_inputs = 2, .n_outputs = 1,
    .fattr_names = {"max_norm", NULL}, .infer = infer_clip, .kernel = k_clip,
};

/* ---- optim_adamw ------------------------------------------------------------------ */

typedef struct slice {
    int64_t p0, numel, shard, lo, a, z; /* [a, z): the elements updated here */
} slice;

static slice slice_of(const dg_node *n, const int32_t *group_rank) {
    slice s = {n->attrs.i[0], n->attrs.i[1], n->attrs.i[2], 0, 0, 0};
    int axis = (int)n->attrs.i[3];
    s.lo = axis != DG_AXIS_NONE ? (int64_t)group_rank[axis] * s.shard : 0;
    s.a = DG_MAX(s.p0, s.lo);
    s.z = DG_MIN(s.p0 + s.numel, s.lo + s.shard);
    return s;
}

static int infer_adamw(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    int64_t numel = n->attrs.i[1], shard = n->attrs.i[2];
    int64_t want[4] = {n->attrs.i[4] ? shard : numel, n->attrs.i[5] ? shard : numel, shard, shard};
    static const char *const what[4] = {"grad", "target", "exp_avg", "exp_avg_sq"};
    for (int i = 0; i < 4; i++) {
        DG_INFER_DTYPE(g, n, i, DG_F32, err);
        if (dg_tensor_numel(DG_IN(g, n, i)) != want[i])
            return DG_INFER_FAIL(err, "rule 'shape' broken: %s has %lld elements, expected %lld", what[i],
                                 (long long)dg_tensor_numel(DG_IN(g, n, i)), (long long)want[i]);
    }
    if (!is_vec(DG_IN(g, n, 4), DG_F64, DG_OPTIM_NSTATUS) || !is_vec(DG_IN(g, n, 5), DG_F64, DG_OPTIM_NHPARAMS) ||
        !is_vec(DG_IN(g, n, 6), DG_I32, DG_AXIS_COUNT))
        return DG_INFER_FAIL(err, "rule 'shape' broken: expected status f64 [%d], hparams f64 [%d], "
                                  "group_rank i32 [%d]", DG_OPTIM_NSTATUS, DG_OPTIM_NHPARAMS, DG_AXIS_COUNT);
    if (n->attrs.i[0] < 0 || numel < 1 || shard < 1 || (unsigned)n->attrs.i[3] >= DG_AXIS_COUNT)
        return DG_INFER_FAIL(err, "rule 'attrs' broken: p0 %lld, numel %lld, shard %lld, axis %lld",
                             (long long)n->attrs.i[0], (long long)numel, (long long)shard,
                             (long long)n->attrs.i[3]);
    dg_desc_set(o, DG_I32, 1, DG_SHAPE(1));
    return DG_OK;
}

static void cost_adamw(const dg_graph *g, const dg_node *n, dg_cost *c) {
    (void)g;
    double e = (double)n->attrs.i[1];
    c->flops = 14.0 * e;
    c->bytes = 4.0 * 7.0 * e;
}

static int k_adamw(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                   void *const *out) {
    (void)g;
    const double *st = in[4], *hp = in[5];
    slice s = slice_of(n, in[6]);
    int32_t *done = out[0];
    *done = 0;
    if (st[DG_OPTIM_OK] == 0 || s.a >= s.z) return DG_OK;
    dg_adamw_hparams h = {hp[DG_OPTIM_LR], n->attrs.f[1], n->attrs.f[2], n->attrs.f[3], n->attrs.f[4],
                          (int64_t)hp[DG_OPTIM_STEP]};
    if (h.step < 1) return DG_EINTERNAL;
    /* Element x of the bucket sits at x - lo in shard-sized buffers and at
     * x - p0 in the parameter's own ones. */
    float *grad = (float *)in[0] + (s.a - (n->attrs.i[4] ? s.lo : s.p0));
    float *target = (float *)in[1] + (s.a - (n->attrs.i[5] ? s.lo : s.p0));
    float *m = (float *)in[2] + (s.a - s.lo), *v = (float *)in[3] + (s.a - s.lo);
    dg_cpu_adamw_scaled(e->team, &h, (float)n->attrs.f[0], (float)st[DG_OPTIM_CLIP], target, grad, m, v,
                        target, m, v, s.z - s.a);
    *done = 1;
    return DG_OK;
}

const dg_op_def dg_op_optim_adamw = {
    .name = "optim_adamw", .min_inputs = 7, .max_inputs = 8, .n_outputs = 1,
    .iattr_names = {"p0", "numel", "shard", "axis", "grad_shard", "target_shard", NULL},
    .fattr_names = {"grad_scale", "beta1", "beta2", "eps", "weight_decay", NULL},
    .infer = infer_adamw, .cost = cost_adamw, .kernel = k_adamw,
};

/* ---- optim_commit ------------------------------------------------------------------ */

static int infer_commit(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    dg_desc_like(o, DG_IN(g, n, 0));
    return DG_OK;
}

static void cost_copy(const dg_graph *g, const dg_node *n, dg_cost *c) {
    c->flops = 0;
    c->bytes = 2.0 * (double)dg_tensor_bytes(DG_IN(g, n, n->op == &dg_op_optim_commit ? 0 : 1));
}

static int k_commit(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                    void *const *out) {
    (void)e;
    memcpy(out[0], in[0], dg_tensor_bytes(DG_IN(g, n, 0)));
    return DG_OK;
}

const dg_op_def dg_op_optim_commit = {
    .name = "optim_commit", .min_inputs = 1, .max_inputs = DG_MAX_INPUTS, .n_outputs = 1,
    .infer = infer_commit, .cost = cost_copy, .kernel = k_commit,
};

/* ---- optim_param_store --------------------------------------------------------------- */

static int infer_store(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    DG_INFER_DTYPE(g, n, 1, DG_F32, err);
    int64_t off = n->attrs.i[0], cnt = dg_tensor_numel(DG_IN(g, n, 1));
    if (off < 0 || off + cnt > dg_tensor_numel(DG_IN(g, n, 0)))
        return DG_INFER_FAIL(err, "rule 'attrs' broken: slice [%lld, %lld) is outside the source of %lld",
                             (long long)off, (long long)(off + cnt), (long long)dg_tensor_numel(DG_IN(g, n, 0)));
    dg_desc_set(o, DG_I32, 1, DG_SHAPE(1));
    return DG_OK;
}

static int k_store(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                   void *const *out) {
    (void)e;
    memcpy(in[1], (const float *)in[0] + n->attrs.i[0], dg_tensor_bytes(DG_IN(g, n, 1)));
    *(int32_t *)out[0] = 1;
    return DG_OK;
}

const dg_op_def dg_op_optim_param_store = {
    .name = "optim_param_store", .min_inputs = 2, .max_inputs = 3, .n_outputs = 1,
    .iattr_names = {"offset", NULL}, .infer = infer_store, .cost = cost_copy, .kernel = k_store,
};

dg_optim_ops dg_optim_ops_get(void) {
    return (dg_optim_ops){&dg_op_optim_sumsq, &dg_op_optim_sum, &dg_op_optim_clip,
                          &dg_op_optim_adamw, &dg_op_optim_commit, &dg_op_optim_param_store};
}
