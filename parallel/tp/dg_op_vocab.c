/* dg_op_vocab.c — vocab-parallel embedding and cross entropy (dg_op_vocab.h). */
#include "dg_op_vocab.h"

#include "dg_collective.h"
#include "dg_cpu_embedding.h"
#include "dg_cpu_xent.h"
#include "dg_op_shard.h"
#include "dg_ops_util.h"

static int64_t rank_of(void *const *in, int k) { return *(const int32_t *)in[k]; }

static int check_rank(const dg_graph *g, const dg_node *n, int k, dg_err *err) {
    DG_INFER_DTYPE(g, n, k, DG_I32, err);
    if (dg_tensor_numel(DG_IN(g, n, k)) != 1)
        return DG_INFER_FAIL(err, "rule 'shape' broken: rank input '%s' must hold one value", DG_IN(g, n, k)->name);
    if (n->attrs.i[0] <= 0)
        return DG_INFER_FAIL(err, "rule 'attrs' broken: vocab size V is %lld", (long long)n->attrs.i[0]);
    return DG_OK;
}

/* ---- vocab_embedding(table [Vl, H], tokens, rank) -> [..., H] ------------------------------ */

static int infer_vemb(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    DG_INFER_DTYPE(g, n, 1, DG_I32, err);
    DG_TRY(check_rank(g, n, 2, err));
    const dg_tensor *tb = DG_IN(g, n, 0), *tk = DG_IN(g, n, 1);
    char s[64];
    if (tb->ndim != 2 || tk->ndim >= DG_MAX_DIMS)
        return DG_INFER_FAIL(err, "rule 'shape' broken: table %s, expected [Vl, H] and tokens of < %d dims",
                             dg_shape_str(tb, s), DG_MAX_DIMS);
    dg_desc_like(o, tk);
    o->dtype = DG_F32;
    o->ndim = tk->ndim + 1;
    o->shape[tk->ndim] = tb->shape[1];
    return DG_OK;
}

static int k_vemb(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in, void *const *out) {
    const dg_tensor *tb = DG_IN(g, n, 0);
    int64_t vl = tb->shape[0];
    return dg_cpu_vocab_embedding_fwd(e->team, in[0], in[1], out[0], dg_tensor_numel(DG_IN(g, n, 1)), vl,
                                      tb->shape[1], rank_of(in, 2) * vl, n->attrs.i[0], NULL);
}

static int adj_vemb(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    dg_attrs a = dg_attrs_zero();
    a.i[0] = n->attrs.i[0];
    a.i[1] = DG_IN(g, n, 0)->shape[0];
    din[0] = dg_add1(g, &dg_op_vocab_embedding_bwd, &a, (int[]){dout[0], n->in[1], n->in[2]}, 3, NULL);
    return g->status;
}

const dg_op_def dg_op_vocab_embedding = {
    .name = "vocab_embedding", .min_inputs = 3, .max_inputs = 3, .n_outputs = 1,
    .iattr_names = {"vocab"},
    .infer = infer_vemb, .adjoint = adj_vemb, .kernel = k_vemb,
    .shard = dg_shard_embedding, /* the rank input is replicated; the rule reads table and tokens */
};

/* ---- vocab_embedding_bwd(dout [..., H], tokens, rank) -> dtable [Vl, H] -------------------- */

static int infer_vemb_bwd(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    DG_INFER_DTYPE(g, n, 1, DG_I32, err);
    DG_TRY(check_rank(g, n, 2, err));
    const dg_tensor *d = DG_IN(g, n, 0), *tk = DG_IN(g, n, 1);
    char a[64], b[64];
    if (d->ndim != tk->ndim + 1 || dg_rows(d) != dg_tensor_numel(tk) || n->attrs.i[1] <= 0)
        return DG_INFER_FAIL(err, "rule 'shape' broken: dout %s must be tokens %s plus [H], Vl > 0",
                             dg_shape_str(d, a), dg_shape_str(tk, b));
    dg_desc_set(o, DG_F32, 2, (int64_t[]){n->attrs.i[1], dg_cols(d)});
    return DG_OK;
}

static int k_vemb_bwd(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                      void *const *out) {
    const dg_tensor *d = DG_IN(g, n, 0);
    int64_t vl = n->attrs.i[1];
    return dg_cpu_vocab_embedding_bwd(e->team, in[0], in[1], out[0], dg_rows(d), vl, dg_cols(d),
                                      rank_of(in, 2) * vl, n->attrs.i[0], NULL);
}

const dg_op_def dg_op_vocab_embedding_bwd = {
    .name = "vocab_embedding_bwd", .min_inputs = 3, .max_inputs = 3, .n_outputs = 1,
    .iattr_names = {"vocab", "local_vocab"},
    .infer = infer_vemb_bwd, .kernel = k_vemb_bwd,
};

/* ---- vocab_xent_stats(logits [..., Vl], targets, rank) -> [1, N, 2] ------------------------ */

static int infer_stats(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    DG_INFER_DTYPE(g, n, 1, DG_I32, err);
    DG_INFER_DTYPE(g, n, 2, DG_I32, err);
    const dg_tensor *lg = DG_IN(g, n, 0);
    char a[64];
    if (lg->ndim < 2 || dg_tensor_numel(DG_IN(g, n, 1)) != dg_rows(lg))
        return DG_INFER_FAIL(err, "rule 'shape' broken: logits %s need one target per row", dg_shape_str(lg, a));
    dg_desc_set(o, DG_F32, 3, (int64_t[]){1, dg_rows(lg), 2});
    return DG_OK;
}

static int k_stats(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in, void *const *out) {
    const dg_tensor *lg = DG_IN(g, n, 0);
    dg_cpu_vocab_xent_stats(e->team, in[0], in[1], out[0], dg_rows(lg), dg_cols(lg), rank_of(in, 2) * dg_cols(lg));
    return DG_OK;
}

/* The one axis splitting the first nd dims of s (the rows: CP splits the
 * sequence), DG_AXIS_NONE where none does, -1 where two axes do. */
static int rows_axis(const dg_sharding *s, int nd) {
    int b = DG_AXIS_NONE;
    for (int d = 0; d < nd; d++) {
        if (s->split2[d] != DG_AXIS_NONE || (s->split[d] != DG_AXIS_NONE && b != DG_AXIS_NONE && s->split[d] != b))
            return -1;
        if (s->split[d] != DG_AXIS_NONE) b = s->split[d];
    }
    return b;
}

/* Logits split on the vocabulary over axis a -> the stats split on dim 0
 * over a; rows split over another axis (targets alike) -> dim 1 too. */
static int shard_stats(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                       dg_attrs *attrs) {
    (void)attrs;
    dg_axis a = dg_vocab_split_axis(g, n->in[0]);
    int lead = g->tensors[n->in[0]].ndim - 1, b = rows_axis(&in[0], lead);
    if (a == DG_AXIS_NONE || b < 0 || in[1].partial != DG_AXIS_NONE || !dg_layout_is_replicated(&in[2]))
        return DG_SHARD_CANNOT;
    if (b != DG_AXIS_NONE && g->tensors[n->in[1]].ndim != lead) return DG_SHARD_CANNOT;
    for (int d = 0; d < g->tensors[n->in[1]].ndim; d++)
        if (in[1].split[d] != (d < lead ? in[0].split[d] : 0) || in[1].split2[d] != DG_AXIS_NONE)
            return DG_SHARD_CANNOT;
    memset(out, 0, sizeof *out);
    out->split[0] = (uint8_t)a;
    out->split[1] = (uint8_t)b;
    return DG_OK;
}

const dg_op_def dg_op_vocab_xent_stats = {
    .name = "vocab_xent_stats", .min_inputs = 3, .max_inputs = 3, .n_outputs = 1,
    .infer = infer_stats, .kernel = k_stats, .shard = shard_stats,
    .f32_outputs = 1u,
};

/* ---- vocab_xent_combine(stats [P, N, 2], targets) -> lse, tlogit ----------------------------- */

static int infer_combine(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    const dg_tensor *st = DG_IN(g, n, 0), *tg = DG_IN(g, n, 1);
    char a[64];
    if (st->ndim != 3 || st->shape[2] != 2 || st->shape[1] != dg_tensor_numel(tg))
        return DG_INFER_FAIL(err, "rule 'shape' broken: stats %s, expected [P, N, 2] with N targets",
                             dg_shape_str(st, a));
    for (int j = 0; j < 2; j++) {
        dg_desc_like(&o[j], tg);
        o[j].dtype = DG_F32;
    }
    return DG_OK;
}

static int k_combine(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                     void *const *out) {
    (void)e;
    const dg_tensor *st = DG_IN(g, n, 0);
    dg_cpu_vocab_xent_combine(in[0], st->shape[0], st->shape[1], out[0], out[1]);
    return DG_OK;
}

/* The gathered stats, their rows split like the targets' -> lse and the
 * target logits laid out as the targets. */
static int shard_combine(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                         dg_attrs *attrs) {
    (void)attrs;
    int b = rows_axis(&in[1], g->tensors[n->in[1]].ndim);
    if (b < 0 || in[0].partial != DG_AXIS_NONE || in[1].partial != DG_AXIS_NONE || dg_layout_dim_split(&in[0], 0) ||
        dg_layout_dim_split(&in[0], 2) || in[0].split[1] != b || in[0].split2[1] != DG_AXIS_NONE)
        return DG_SHARD_CANNOT;
    out[0] = out[1] = in[1];
    return DG_OK;
}

const dg_op_def dg_op_vocab_xent_combine = {
    .name = "vocab_xent_combine", .min_inputs = 2, .max_inputs = 2, .n_outputs = 2,
    .infer = infer_combine, .kernel = k_combine, .shard = shard_combine,
    .f32_outputs = 3u /* lse, tlogit */,
};

/* ---- vocab_xent(logits, targets, rank, lse, tlogit [, mask]) -> loss ----------------------- */

static int infer_vxent(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_TRY(check_rank(g, n, 2, err));
    for (int k = 3; k < n->n_in; k++) DG_INFER_DTYPE(g, n, k, DG_F32, err);
    const dg_tensor *tg = DG_IN(g, n, 1);
    char a[64];
    if (dg_tensor_numel(tg) != dg_rows(DG_IN(g, n, 0)) || !dg_same_shape(DG_IN(g, n, 3), tg) ||
        !dg_same_shape(DG_IN(g, n, 4), tg) || (n->n_in > 5 && !dg_same_shape(DG_IN(g, n, 5), tg)))
        return DG_INFER_FAIL(err, "rule 'shape' broken: lse, target logits and mask must have targets' shape %s",
                             dg_shape_str(tg, a));
    dg_desc_set(o, DG_F32, 0, NULL);
    return DG_OK;
}

static int k_vxent(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in, void *const *out) {
    (void)e;
    return dg_cpu_vocab_xent_loss(in[1], n->n_in > 5 ? in[5] : NULL, in[3], in[4], out[0],
                                  dg_tensor_numel(DG_IN(g, n, 1)), n->attrs.i[0], NULL);
}

static int adj_vxent(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    if (dout[0] < 0) return DG_OK;
    dg_attrs a = dg_attrs_zero();
    a.i[0] = n->attrs.i[0];
    int in[6] = {n->in[0], n->in[1], n->in[2], n->in[3], dout[0], n->n_in > 5 ? n->in[5] : -1};
    din[0] = dg_add1(g, &dg_op_vocab_xent_bwd, &a, in, n->n_in > 5 ? 6 : 5, NULL);
    return g->status; /* none to lse or the target logits: the statistics are constants here */
}

/* Logits split on the vocabulary, everything else replicated -> a replicated loss. */
static int shard_vxent(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                       dg_attrs *attrs) {
    (void)attrs;
    if (dg_vocab_split_axis(g, n->in[0]) == DG_AXIS_NONE) return DG_SHARD_CANNOT;
    for (int k = 1; k < n->n_in; k++)
        if (!dg_layout_is_replicated(&in[k])) return DG_SHARD_CANNOT;
    memset(out, 0, sizeof *out);
    return DG_OK;
}

const dg_op_def dg_op_vocab_xent = {
    .name = "vocab_xent", .min_inputs = 5, .max_inputs = 6, .n_outputs = 1,
    .iattr_names = {"vocab"},
    .infer = infer_vxent, .adjoint = adj_vxent, .kernel = k_vxent, .shard = shard_vxent,
    .traits = DG_TRAIT_TOKEN_STAT,
    .f32_outputs = 1u,
};

/* ---- vocab_xent_bwd(logits, targets, rank, lse, dloss [, mask]) -> dlogits ------------------ */

static int infer_vxent_bwd(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_TRY(check_rank(g, n, 2, err));
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    char a[64];
    if (dg_tensor_numel(DG_IN(g, n, 4)) != 1 || !dg_same_shape(DG_IN(g, n, 3), DG_IN(g, n, 1)))
        return DG_INFER_FAIL(err, "rule 'shape' broken: dloss %s must be a scalar and lse shaped like targets",
                             dg_shape_str(DG_IN(g, n, 4), a));
    dg_desc_like(o, DG_IN(g, n, 0));
    return DG_OK;
}

static int k_vxent_bwd(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                       void *const *out) {
    const dg_tensor *lg = DG_IN(g, n, 0);
    int64_t vl = dg_cols(lg);
    return dg_cpu_vocab_xent_bwd(e->team, in[0], in[1], n->n_in > 5 ? in[5] : NULL, in[3], *(const float *)in[4],
                                 out[0], dg_rows(lg), vl, rank_of(in, 2) * vl, n->attrs.i[0], NULL);
}

const dg_op_def dg_op_vocab_xent_bwd = {
    .name = "vocab_xent_bwd", .min_inputs = 5, .max_inputs = 6, .n_outputs = 1,
    .iattr_names = {"vocab"},
    .infer = infer_vxent_bwd, .kernel = k_vxent_bwd,
};

/* ---- lowerings --------------------------------------------------------------------------- */

dg_axis dg_vocab_split_axis(const dg_graph *g, int t) {
    const dg_tensor *x = &g->tensors[t];
    int d = x->ndim - 1;
    if (d < 0 || x->sharding.partial != DG_AXIS_NONE || x->sharding.split2[d] != DG_AXIS_NONE ||
        x->sharding.stride[d] > 1)
        return DG_AXIS_NONE;
    /* the rows may be split over another axis (CP's sequence), never this one */
    int b = rows_axis(&x->sharding, d);
    if (b < 0 || (b != DG_AXIS_NONE && b == x->sharding.split[d])) return DG_AXIS_NONE;
    return (dg_axis)x->sharding.split[d];
}
