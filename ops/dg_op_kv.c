/* dg_op_kv.c — kv_append, kv_attention, rope_at, seq_last (see dg_op_kv.h). */
#include "dg_op_kv.h"

#include <math.h>

#include "dg_cpu_kv.h"
#include "dg_cpu_rope.h"
#include "dg_ops_util.h"

/* ---- shared checks ------------------------------------------------------------------ */

static int need_rank(const dg_graph *g, const dg_node *n, int i, const char *what, int ndim,
                     dg_dtype dt, dg_err *err) {
    DG_INFER_DTYPE(g, n, i, dt, err);
    const dg_tensor *t = DG_IN(g, n, i);
    char s[64];
    if (t->ndim != ndim)
        return DG_INFER_FAIL(err, "rule 'shape' broken: %s ('%s') is %s, expected %d dims", what,
                             t->name, dg_shape_str(t, s), ndim);
    return DG_OK;
}

/* pos (input i) must be i32 [B]. */
static int need_pos(const dg_graph *g, const dg_node *n, int i, int64_t B, dg_err *err) {
    DG_TRY(need_rank(g, n, i, "pos", 1, DG_I32, err));
    const dg_tensor *p = DG_IN(g, n, i);
    if (p->shape[0] != B)
        return DG_INFER_FAIL(err, "rule 'shape' broken: pos ('%s') has %lld entries, batch is %lld",
                             p->name, (long long)p->shape[0], (long long)B);
    return DG_OK;
}

/* The kernels' position check, as a node failure with the reason on stderr
 * (kernels return a status only). */
static int check_pos(const dg_node *n, const int32_t *pos, int64_t B, int64_t L, int64_t Smax) {
    int64_t b = dg_cpu_kv_check(pos, B, L, Smax);
    if (b < 0) return DG_OK;
    fprintf(stderr, "dagatron: %s '%s': sequence %lld: positions %d .. %lld outside the cache of %lld\n",
            n->op->name, n->name, (long long)b, pos[b], (long long)pos[b] + L - 1, (long long)Smax);
    return DG_EINPUT;
}

/* ---- kv_append ---------------------------------------------------------------------- */

static int infer_append(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_TRY(need_rank(g, n, 0, "cache", 4, DG_F32, err));
    DG_TRY(need_rank(g, n, 1, "x", 4, DG_F32, err));
    const dg_tensor *c = DG_IN(g, n, 0), *x = DG_IN(g, n, 1);
    char sc[64], sx[64];
    if (c->shape[0] != x->shape[0] || c->shape[2] != x->shape[2] || c->shape[3] != x->shape[3] ||
        x->shape[1] > c->shape[1])
        return DG_INFER_FAIL(err,
                             "rule 'shape' broken: cache %s and x %s must be [B, Smax, H, D] and "
                             "[B, L, H, D] with L <= Smax",
                             dg_shape_str(c, sc), dg_shape_str(x, sx));
    DG_TRY(need_pos(g, n, 2, c->shape[0], err));
    dg_desc_like(o, c);
    return DG_OK;
}

static void cost_append(const dg_graph *g, const dg_node *n, dg_cost *c) {
    /* in place: read and write the new rows only */
    c->flops = 0;
    c->bytes = 2.0 * (double)dg_tensor_bytes(DG_IN(g, n, 1));
}

static int k_append(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                    void *const *out) {
    const dg_tensor *c = DG_IN(g, n, 0), *x = DG_IN(g, n, 1);
    int64_t B = c->shape[0], Smax = c->shape[1], L = x->shape[1], row = c->shape[2] * c->shape[3];
    DG_TRY(check_pos(n, in[2], B, L, Smax));
    dg_cpu_kv_append(e->team, in[0], out[0], in[1], in[2], B, Smax, L, row);
    return DG_OK;
}

const dg_op_def dg_op_kv_append = {
    .name = "kv_append", .min_inputs = 3, .max_inputs = 3, .n_outputs = 1,
    .infer = infer_append, .cost = cost_append, .kernel = k_append,
};

int dg_kv_append(dg_graph *g, int cache, int x, int pos) {
    dg_attrs a = dg_attrs_zero();
    return dg_add1(g, &dg_op_kv_append, &a, (int[]){cache, x, pos}, 3, NULL);
}

/* ---- kv_attention ------------------------------------------------------------------- */

static int infer_kv_attn(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_TRY(need_rank(g, n, 0, "q", 4, DG_F32, err));
    DG_TRY(need_rank(g, n, 1, "k", 4, DG_F32, err));
    DG_TRY(need_rank(g, n, 2, "v", 4, DG_F32, err));
    const dg_tensor *q = DG_IN(g, n, 0), *k = DG_IN(g, n, 1), *v = DG_IN(g, n, 2);
    char sq[64], sk[64], sv[64];
    if (!dg_same_shape(k, v))
        return DG_INFER_FAIL(err, "rule 'shape' broken: k cache %s and v cache %s differ",
                             dg_shape_str(k, sk), dg_shape_str(v, sv));
    if (q->shape[0] != k->shape[0] || q->shape[3] != k->shape[3] || q->shape[1] > k->shape[1] ||
        q->shape[2] % k->shape[2] != 0)
        return DG_INFER_FAIL(err,
                             "rule 'shape' broken: q %s and k cache %s must be [B, L, Hq, D] and "
                             "[B, Smax, Hkv, D] with L <= Smax and Hkv dividing Hq",
                             dg_shape_str(q, sq), dg_shape_str(k, sk));
    DG_TRY(need_pos(g, n, 3, q->shape[0], err));
    if (!(n->attrs.f[0] > 0.0) || !isfinite(n->attrs.f[0]))
        return DG_INFER_FAIL(err, "rule 'attrs' broken: scale must be > 0 and finite, got %g",
                             n->attrs.f[0]);
    dg_desc_like(o, q);
    return DG_OK;
}

static dg_kv_attn_dims kv_dims(const dg_graph *g, const dg_node *n) {
    const dg_tensor *q = DG_IN(g, n, 0), *k = DG_IN(g, n, 1);
    return (dg_kv_attn_dims){q->shape[0], q->shape[1], k->shape[1], q->shape[2],
                             k->shape[2], q->shape[3], (float)n->attrs.f[0]};
}

/* Positions are runtime values: cost as if every query saw the whole cache
 * (an upper bound; decoding steps are memory-bound on reading it anyway). */
static void cost_kv_attn(const dg_graph *g, const dg_node *n, dg_cost *c) {
    dg_kv_attn_dims d = kv_dims(g, n);
    c->flops = 4.0 * (double)d.B * (double)d.L * (double)d.Hq * (double)d.Smax * (double)d.D;
    c->bytes = 2.0 * (double)dg_tensor_bytes(DG_IN(g, n, 0)) +
               2.0 * (double)dg_tensor_bytes(DG_IN(g, n, 1));
}

static int k_kv_attn(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                     void *const *out) {
    dg_kv_attn_dims d = kv_dims(g, n);
    DG_TRY(check_pos(n, in[3], d.B, d.L, d.Smax));
    dg_cpu_kv_attention(e->team, &d, in[0], in[1], in[2], in[3], out[0]);
    return DG_OK;
}

const dg_op_def dg_op_kv_attention = {
    .name = "kv_attention", .min_inputs = 4, .max_inputs = 4, .n_outputs = 1,
    .fattr_names = {"scale"},
    .infer = infer_kv_attn, .cost = cost_kv_attn, .kernel = k_kv_attn,
};

int dg_kv_attention(dg_graph *g, int q, int k_cache, int v_cache, int pos, double scale) {
    dg_attrs a = dg_attrs_zero();
    if (scale <= 0 && q >= 0 && q < g->n_tensors)
        scale = 1.0 / sqrt((double)g->tensors[q].shape[3]);
    a.f[0] = scale;
    return dg_add1(g, &dg_op_kv_attention, &a, (int[]){q, k_cache, v_cache, pos}, 4, NULL);
}

/* ---- rope_at ------------------------------------------------------------------------ */

static int infer_rope_at(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_TRY(need_rank(g, n, 0, "x", 4, DG_F32, err));
    const dg_tensor *x = DG_IN(g, n, 0);
    if (x->shape[3] % 2)
        return DG_INFER_FAIL(err, "rule 'shape' broken: head_dim %lld must be even",
                             (long long)x->shape[3]);
    DG_TRY(need_pos(g, n, 1, x->shape[0], err));
    if (!(n->attrs.f[0] > 0))
        return DG_INFER_FAIL(err, "rule 'attrs' broken: base must be > 0, got %g", n->attrs.f[0]);
    int64_t R = n->attrs.i[0];
    if (R < 0 || R > x->shape[3] || R % 2)
        return DG_INFER_FAIL(err, "rule 'attrs' broken: rotary_dim %lld must be even and in [0, %lld]",
                             (long long)R, (long long)x->shape[3]);
    dg_desc_like(o, x);
    return DG_OK;
}

/* cos and sin tables per (sequence, token): 2 x [B, L, D/2] floats. */
static size_t ws_rope_at(const dg_graph *g, const dg_node *n, int nthreads) {
    (void)nthreads;
    const dg_tensor *x = DG_IN(g, n, 0);
    return sizeof(float) * (size_t)(x->shape[0] * x->shape[1] * x->shape[3]);
}

static void cost_rope_at(const dg_graph *g, const dg_node *n, dg_cost *c) {
    double e = (double)dg_tensor_numel(DG_IN(g, n, 0));
    c->flops = 3.0 * e;
    c->bytes = 8.0 * e;
}

static int k_rope_at(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                     void *const *out) {
    const dg_tensor *x = DG_IN(g, n, 0);
    const int64_t B = x->shape[0], L = x->shape[1], NH = x->shape[2], D = x->shape[3];
    const int64_t R = n->attrs.i[0] > 0 ? n->attrs.i[0] : D;
    const int32_t *pos = in[1];
    DG_ASSERT(e->workspace_bytes >= ws_rope_at(g, n, 1));
    float *cos_t = e->workspace, *sin_t = cos_t + B * L * (R / 2);
    for (int64_t b = 0; b < B; b++) {
        if (pos[b] < 0) {
            fprintf(stderr, "dagatron: rope_at '%s': negative position %d\n", n->name, pos[b]);
            return DG_EINPUT;
        }
        const int64_t t = b * L * (R / 2), xo = b * L * NH * D;
        dg_rope_spec spec = {.base = n->attrs.f[0], .yarn_factor = 1.0, .mscale = 1.0}; /* plain: decoding refuses YaRN */
        dg_cpu_rope_table(e->team, L, R, &spec, pos[b], cos_t + t, sin_t + t);
        dg_cpu_rope_apply(e->team, (const float *)in[0] + xo, (float *)out[0] + xo, cos_t + t,
                          sin_t + t, 1, L, NH, D, R, 0);
    }
    return DG_OK;
}

const dg_op_def dg_op_rope_at = {
    .name = "rope_at", .min_inputs = 2, .max_inputs = 2, .n_outputs = 1,
    .iattr_names = {"rotary_dim"}, .fattr_names = {"base"},
    .infer = infer_rope_at, .cost = cost_rope_at, .workspace = ws_rope_at, .kernel = k_rope_at,
};

int dg_rope_at(dg_graph *g, int x, int pos, double base, int64_t rotary_dim) {
    dg_attrs a = dg_attrs_zero();
    a.i[0] = rotary_dim;
    a.f[0] = base;
    return dg_add1(g, &dg_op_rope_at, &a, (int[]){x, pos}, 2, NULL);
}

/* ---- seq_last ----------------------------------------------------------------------- */

static int infer_seq_last(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_TRY(need_rank(g, n, 0, "x", 3, DG_F32, err));
    const dg_tensor *x = DG_IN(g, n, 0);
    dg_desc_set(o, DG_F32, 3, DG_SHAPE(x->shape[0], 1, x->shape[2]));
    return DG_OK;
}

static void cost_seq_last(const dg_graph *g, const dg_node *n, dg_cost *c) {
    c->flops = 0;
    c->bytes = 2.0 * (double)dg_tensor_bytes(DG_OUT(g, n, 0));
}

static int k_seq_last(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                      void *const *out) {
    (void)e;
    const dg_tensor *x = DG_IN(g, n, 0);
    dg_cpu_seq_last(in[0], out[0], x->shape[0], x->shape[1], x->shape[2]);
    return DG_OK;
}

const dg_op_def dg_op_seq_last = {
    .name = "seq_last", .min_inputs = 1, .max_inputs = 1, .n_outputs = 1,
    .infer = infer_seq_last, .cost = cost_seq_last, .kernel = k_seq_last,
};

int dg_seq_last(dg_graph *g, int x) {
    dg_attrs a = dg_attrs_zero();
    return dg_add1(g, &dg_op_seq_last, &a, &x, 1, NULL);
}
