/* dg_op_dropout.c — the dropout op and its other counter-based draws; the
 * adjoint of dropout and jitter is the op itself on dy, that of the
 * normal draw the identity (straight through). */
#include "dg_op_dropout.h"

#include "dg_cpu_dropout.h"
#include "dg_layout.h"
#include "dg_ops_util.h"

static int infer_dropout(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    DG_INFER_DTYPE(g, n, 1, DG_I32, err);
    if (n->n_in > 2) DG_INFER_DTYPE(g, n, 2, DG_I32, err);
    if (n->n_in > 3) DG_INFER_DTYPE(g, n, 3, DG_I32, err);
    const dg_tensor *x = DG_IN(g, n, 0), *k = DG_IN(g, n, 1);
    char s[64];
    if (x->ndim < 1 || dg_tensor_numel(k) != 4)
        return DG_INFER_FAIL(err, "rule 'shape' broken: x %s needs a sample dim and key 4 ints",
                             dg_shape_str(x, s));
    if (!(n->attrs.f[0] >= 0 && n->attrs.f[0] < 1))
        return DG_INFER_FAIL(err, "rule 'attrs' broken: p is %g, expected [0, 1)", n->attrs.f[0]);
    if (n->attrs.i[5] < 0 || n->attrs.i[5] >= DG_NOISE_KINDS)
        return DG_INFER_FAIL(err, "rule 'attrs' broken: kind %lld, expected 0..%d (dg_noise_kind)",
                             (long long)n->attrs.i[5], DG_NOISE_KINDS - 1);
    dg_desc_like(o, x);
    return DG_OK;
}

static void cost_dropout(const dg_graph *g, const dg_node *n, dg_cost *c) {
    double e = (double)dg_tensor_numel(DG_IN(g, n, 0));
    c->flops = 10.0 * e; /* the hash */
    c->bytes = 8.0 * e;
}

/* CP's row: chunks r and 2cp-1-r of each sample, half the rank's row each;
 * with an inner split (SP's over tp, attrs i[4] parts, coord in[3]) x holds
 * part t of that row, which may lie in either chunk or straddle them. */
static void dropout_cp(const dg_exec_env *e, const dg_node *n, const float *xs, float *ys, const int32_t *key,
                       int64_t B, int64_t per, int64_t r, int64_t t, int64_t parts) {
    int64_t cp = n->attrs.i[2], half = per * parts / 2, start = t * per;
    for (int64_t b = 0; b < B; b++) {
        int32_t kb[4] = {key[0], key[1], key[2] + (int32_t)b, key[3]}; /* sample b's index */
        for (int64_t h = 0; h < 2; h++) {
            int64_t lo = DG_MAX(start, h * half), hi = DG_MIN(start + per, (h + 1) * half);
            if (lo < hi)
                dg_cpu_noise_at(e->team, (int)n->attrs.i[5], xs + b * per + lo - start, ys + b * per + lo - start,
                                kb, n->attrs.i[0], n->attrs.f[0], 1, hi - lo,
                                (h ? 2 * cp - 1 - r : r) * half + lo - h * half);
        }
    }
}

static int k_dropout(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                     void *const *out) {
    const dg_tensor *x = DG_IN(g, n, 0);
    int64_t B = x->shape[0], per = dg_tensor_numel(x) / (B > 0 ? B : 1), cp = n->attrs.i[2];
    int64_t r = n->n_in > 2 ? (int64_t)*(const int32_t *)in[2] : 0;
    if (n->n_in > 2 && cp > 1) {
        int inner = n->n_in > 3;
        dropout_cp(e, n, in[0], out[0], in[1], B, per, r, inner ? (int64_t)*(const int32_t *)in[3] : 0,
                   inner ? n->attrs.i[4] : 1);
        return DG_OK;
    }
    /* with the coordinate: x is this rank's run of each sample (dim 1 split) */
    dg_cpu_noise_at(e->team, (int)n->attrs.i[5], in[0], out[0], in[1], n->attrs.i[0], n->attrs.f[0], B, per, r * per);
    return DG_OK;
}

static int adj_dropout(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    for (int k = 1; k < n->n_in; k++) din[k] = -1;
    if (n->attrs.i[5] == DG_NOISE_NORMAL) { /* the draw ignores x: straight through, as Megatron's RandomSTE */
        din[0] = dout[0];
        return DG_OK;
    }
    int nin = n->n_in, ins[4] = {dout[0], n->in[1], nin > 2 ? n->in[2] : -1, nin > 3 ? n->in[3] : -1};
    dg_attrs a = n->attrs; /* adding a node may move g->nodes */
    din[0] = dg_add1(g, &dg_op_dropout, &a, ins, nin, NULL);
    return g->status;
}

static int shard_dropout(const dg_graph *g, const dg_node *n, const dg_sharding *in,
                         dg_sharding *out, dg_attrs *attrs) {
    (void)g;
    (void)n;
    (void)attrs;
    /* the mask hashes each element's index within its whole sample: a
     * slice of the sample draws the right mask only when the kernel knows
     * where the slice starts, from the coordinate of the axis that splits
     * dim 1 (input 2, attr axis) */
    for (int k = 1; k < n->n_in; k++)
        if (!dg_layout_is_replicated(&in[k])) return DG_SHARD_CANNOT;
    int nd = g->tensors[n->in[0]].ndim;
    dg_sharding rest = in[0];
    int inner = n->n_in > 3 ? (int)attrs->i[3] : DG_AXIS_NONE; /* the split inside CP's (dg_op_dropout.h) */
    if (n->n_in > 2 && nd > 1 && rest.split[1] == attrs->i[1] && rest.split2[1] == inner) {
        rest.split[1] = DG_AXIS_NONE;
        rest.split2[1] = DG_AXIS_NONE;
    }
    if (!dg_layout_is_replicated(&rest)) return DG_SHARD_CANNOT;
    out[0] = in[0];
    return DG_OK;
}

const dg_op_def dg_op_dropout = {
    .name = "dropout", .min_inputs = 2, .max_inputs = 4, .n_outputs = 1,
    .iattr_names = {"site", "axis", "cp", "inner_axis", "inner", "kind"}, .fattr_names = {"p"}, .traits = DG_TRAIT_RANDOM,
    .infer = infer_dropout, .cost = cost_dropout, .adjoint = adj_dropout, .kernel = k_dropout,
    .shard = shard_dropout,
};

int dg_dropout(dg_graph *g, int x, int key, double p, int site) { return dg_noise(g, x, key, DG_NOISE_DROPOUT, p, site); }

int dg_noise(dg_graph *g, int x, int key, int kind, double p, int site) {
    dg_attrs a = dg_attrs_zero();
    a.f[0] = p;
    a.i[0] = site;
    a.i[5] = kind;
    return dg_add1(g, &dg_op_dropout, &a, (int[]){x, key}, 2, NULL);
}

int dg_dropout_slice(dg_graph *g, int x, int key, int coord, dg_axis axis, double p, int site) {
    dg_attrs a = dg_attrs_zero();
    a.f[0] = p;
    a.i[0] = site;
    a.i[1] = axis;
    return dg_add1(g, &dg_op_dropout, &a, (int[]){x, key, coord}, 3, NULL);
}
