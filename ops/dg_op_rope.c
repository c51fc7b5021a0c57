/* dg_op_rope.c — rope; its own adjoint with the inverse flag flipped. */
#include "dg_op_rope.h"

#include "dg_cpu_rope.h"
#include "dg_op_shard.h"
#include "dg_ops_util.h"

static int rope_node(dg_graph *g, int x, double base, int64_t pos_offset, int inverse,
                     int64_t rotary_dim, const dg_rope_yarn_opts *y) {
    dg_attrs a = dg_attrs_zero();
    a.i[0] = pos_offset;
    a.i[1] = inverse;
    a.i[2] = rotary_dim;
    a.f[0] = base;
    if (y && y->factor > 1.0) {
        a.f[1] = y->factor;
        a.f[2] = y->beta_fast;
        a.f[3] = y->beta_slow;
        a.f[4] = y->mscale;
        a.i[3] = y->original_max_position_embeddings;
        a.i[5] = y->unrounded;
    }
    if (y) a.i[4] = y->interleaved;
    return dg_add1(g, &dg_op_rope, &a, &x, 1, NULL);
}

dg_rope_spec dg_rope_spec_of(const dg_attrs *a) {
    dg_rope_spec s = {.base = a->f[0], .yarn_factor = 1.0, .mscale = 1.0};
    if (a->f[1] > 1.0) {
        s.yarn_factor = a->f[1];
        s.beta_fast = a->f[2];
        s.beta_slow = a->f[3];
        s.mscale = a->f[4];
        s.orig_max_pos = (double)a->i[3];
        s.unrounded = a->i[5] != 0;
    }
    return s;
}

/* The adjoint's node: n's attrs with the inverse flag flipped. */
static int rope_flip(dg_graph *g, const dg_node *n, int x) {
    dg_attrs a = n->attrs;
    a.i[1] = !a.i[1];
    return dg_add1(g, &dg_op_rope, &a, &x, 1, NULL);
}

static int infer_rope(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    const dg_tensor *x = DG_IN(g, n, 0);
    char s[64];
    if (x->ndim != 4)
        return DG_INFER_FAIL(err, "rule 'shape' broken: x is %s, expected [B, S, heads, head_dim]",
                             dg_shape_str(x, s));
    if (x->shape[3] % 2)
        return DG_INFER_FAIL(err, "rule 'shape' broken: head_dim %lld must be even",
                             (long long)x->shape[3]);
    if (!(n->attrs.f[0] > 0))
        return DG_INFER_FAIL(err, "rule 'attrs' broken: base must be > 0, got %g", n->attrs.f[0]);
    if (n->attrs.i[0] < 0)
        return DG_INFER_FAIL(err, "rule 'attrs' broken: pos_offset must be >= 0, got %lld",
                             (long long)n->attrs.i[0]);
    if (n->attrs.f[1] > 1.0 && !(n->attrs.f[2] > 0 && n->attrs.f[3] > 0 && n->attrs.i[3] > 0 && n->attrs.f[4] > 0))
        return DG_INFER_FAIL(err, "rule 'attrs' broken: yarn needs beta_fast, beta_slow, mscale and "
                             "original_max_position_embeddings > 0");
    int64_t R = n->attrs.i[2];
    if (R < 0 || R > x->shape[3] || R % 2)
        return DG_INFER_FAIL(err, "rule 'attrs' broken: rotary_dim %lld must be even and in [0, %lld]",
                             (long long)R, (long long)x->shape[3]);
    dg_desc_like(o, x);
    return DG_OK;
}

/* The cos/sin tables: 2 x [S, D/2] floats. */
static size_t ws_rope(const dg_graph *g, const dg_node *n, int nthreads) {
    (void)nthreads;
    const dg_tensor *x = DG_IN(g, n, 0);
    return sizeof(float) * (size_t)(x->shape[1] * x->shape[3]);
}

static void cost_rope(const dg_graph *g, const dg_node *n, dg_cost *c) {
    const dg_tensor *x = DG_IN(g, n, 0);
    double e = (double)dg_tensor_numel(x);
    c->flops = 3.0 * e;
    c->bytes = 4.0 * (2.0 * e + (double)(x->shape[1] * x->shape[3]));
}

static int k_rope(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                  void *const *out) {
    const dg_tensor *x = DG_IN(g, n, 0);
    int64_t B = x->shape[0], S = x->shape[1], NH = x->shape[2], D = x->shape[3];
    DG_ASSERT(e->workspace_bytes >= ws_rope(g, n, 1));
    int64_t R = n->attrs.i[2] > 0 ? n->attrs.i[2] : D;
    float *cos_t = e->workspace, *sin_t = cos_t + S * (R / 2);
    dg_rope_spec spec = dg_rope_spec_of(&n->attrs);
    dg_cpu_rope_table(e->team, S, R, &spec, n->attrs.i[0], cos_t, sin_t);
    dg_cpu_rope_apply2(e->team, in[0], out[0], cos_t, sin_t, B, S, NH, D, R, (int)n->attrs.i[1],
                       (int)n->attrs.i[4]);
    return DG_OK;
}

static int adj_rope(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    din[0] = rope_flip(g, n, dout[0]);
    return g->status;
}

const dg_op_def dg_op_rope = {
    .name = "rope", .min_inputs = 1, .max_inputs = 1, .n_outputs = 1,
    .iattr_names = {"pos_offset", "inverse", "rotary_dim", "yarn_original_max_pos", "interleaved",
                    "yarn_unrounded"},
    .fattr_names = {"base", "yarn_factor", "yarn_beta_fast", "yarn_beta_slow", "yarn_mscale"},
    .infer = infer_rope, .cost = cost_rope, .adjoint = adj_rope, .workspace = ws_rope,
    .kernel = k_rope,
    .shard = dg_shard_rope,
    .traits = DG_TRAIT_POSITIONS,
};

int dg_rope(dg_graph *g, int x, double base, int64_t pos_offset) {
    return rope_node(g, x, base, pos_offset, 0, 0, NULL);
}

int dg_rope_partial(dg_graph *g, int x, double base, int64_t pos_offset, int64_t rotary_dim) {
    return rope_node(g, x, base, pos_offset, 0, rotary_dim, NULL);
}

int dg_rope_yarn(dg_graph *g, int x, double base, int64_t rotary_dim, const dg_rope_yarn_opts *y) {
    return rope_node(g, x, base, 0, 0, rotary_dim, y);
}
