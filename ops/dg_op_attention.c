/* dg_op_attention.c — attention and attention_bwd (see dg_op_attention.h). */
#include "dg_op_attention.h"

#include <math.h>

#include "dg_cpu_attention.h"
#include "dg_op_attn_key.h"
#include "dg_op_basic.h"
#include "dg_op_shard.h"
#include "dg_ops_util.h"

/* ---- shape rules ------------------------------------------------------------------ */

static dg_attn_dims node_dims(const dg_graph *g, const dg_node *n);

/* Check q, k, v (inputs 0..2) and the attrs; fill d. */
static int check_qkv(const dg_graph *g, const dg_node *n, dg_attn_dims *d, dg_err *err) {
    for (int i = 0; i < 3; i++) {
        DG_INFER_DTYPE(g, n, i, DG_F32, err);
        if (DG_IN(g, n, i)->ndim != 4)
            return DG_INFER_FAIL(err, "rule 'shape' broken: %s ('%s') must be [B, S, H, D], got %d dims",
                                 i == 0 ? "q" : i == 1 ? "k" : "v", DG_IN(g, n, i)->name,
                                 DG_IN(g, n, i)->ndim);
    }
    const dg_tensor *q = DG_IN(g, n, 0), *k = DG_IN(g, n, 1), *v = DG_IN(g, n, 2);
    char sq[64], sk[64], sv[64];
    if (!dg_same_shape(k, v))
        return DG_INFER_FAIL(err, "rule 'shape' broken: k %s and v %s differ", dg_shape_str(k, sk),
                             dg_shape_str(v, sv));
    if (q->shape[0] != k->shape[0] || q->shape[1] != k->shape[1] || q->shape[3] != k->shape[3])
        return DG_INFER_FAIL(err,
                             "rule 'shape' broken: q %s and k %s must agree on B, S and D "
                             "(q [B, S, Hq, D], k [B, S, Hkv, D])",
                             dg_shape_str(q, sq), dg_shape_str(k, sk));
    if (q->shape[2] % k->shape[2] != 0)
        return DG_INFER_FAIL(err,
                             "rule 'shape' broken: query heads (%lld) must be a multiple of kv heads "
                             "(%lld)",
                             (long long)q->shape[2], (long long)k->shape[2]);
    if (n->attrs.i[0] != 0 && n->attrs.i[0] != 1)
        return DG_INFER_FAIL(err, "rule 'attrs' broken: causal must be 0 or 1, got %lld",
                             (long long)n->attrs.i[0]);
    if (!(n->attrs.f[0] > 0.0) || !isfinite(n->attrs.f[0]))
        return DG_INFER_FAIL(err, "rule 'attrs' broken: scale must be > 0 and finite, got %g",
                             n->attrs.f[0]);
    if (n->attrs.i[1] < 0 || (n->attrs.i[1] > 0 && n->attrs.i[0] != 1))
        return DG_INFER_FAIL(err, "rule 'attrs' broken: window must be >= 0, and > 0 only when causal, got %lld",
                             (long long)n->attrs.i[1]);
    if (n->attrs.i[2] < DG_ATTN_SOFTMAX_VANILLA || n->attrs.i[2] > DG_ATTN_SOFTMAX_LEARNABLE)
        return DG_INFER_FAIL(err, "rule 'attrs' broken: softmax must be 0, 1 or 2, got %lld",
                             (long long)n->attrs.i[2]);
    if (!(n->attrs.f[1] >= 0 && n->attrs.f[1] < 1))
        return DG_INFER_FAIL(err, "rule 'attrs' broken: dropout must be in [0, 1), got %g", n->attrs.f[1]);
    *d = node_dims(g, n);
    return DG_OK;
}

/* Dims of a node already added (its shapes were checked by infer). */
static dg_attn_dims node_dims(const dg_graph *g, const dg_node *n) {
    const dg_tensor *q = DG_IN(g, n, 0), *k = DG_IN(g, n, 1);
    return (dg_attn_dims){q->shape[0], q->shape[1], q->shape[2], k->shape[2], q->shape[3],
                          (int)n->attrs.i[0], (float)n->attrs.f[0], n->attrs.i[1], (int)n->attrs.i[2], 0, {.p = 0.0f}};
}

/* Where the attention key is among the inputs (-1: no dropout): after q,
 * k, v and the sink in the forward, after q, k, v, o, do, lse in the
 * backward (dlse, if any, follows it). */
static int fwd_key_index(const dg_node *n) {
    return n->attrs.f[1] > 0 ? 3 + (n->attrs.i[2] == DG_ATTN_SOFTMAX_LEARNABLE) : -1;
}
static int bwd_key_index(const dg_node *n) { return n->attrs.f[1] > 0 ? 6 : -1; }
static int bwd_dlse_index(const dg_node *n) {
    int i = n->attrs.f[1] > 0 ? 7 : 6;
    return n->n_in > i ? i : -1;
}

/* The attention key input i: i32 [DG_ATTN_KEY_LEN]. */
static int check_key(const dg_graph *g, const dg_node *n, int i, dg_err *err) {
    DG_INFER_DTYPE(g, n, i, DG_I32, err);
    if (dg_tensor_numel(DG_IN(g, n, i)) != DG_ATTN_KEY_LEN)
        return DG_INFER_FAIL(err, "rule 'shape' broken: the attention key ('%s') must be %d ints (dg_op_attn_key.h)",
                             DG_IN(g, n, i)->name, DG_ATTN_KEY_LEN);
    return DG_OK;
}

/* The node's dims with dropout's draw from the key buffer (NULL: none). */
static dg_attn_dims run_dims(const dg_graph *g, const dg_node *n, const void *key) {
    dg_attn_dims d = node_dims(g, n);
    if (key) d.drop = dg_attn_drop_make(key, n->attrs.i[3], n->attrs.f[1]);
    return d;
}

static void lse_shape(const dg_attn_dims *d, int64_t *shape) {
    shape[0] = d->B;
    shape[1] = d->Hq;
    shape[2] = d->S;
}

/* Input i must have shape (ndim, shape): named for the message. */
static int expect_shape(const dg_graph *g, const dg_node *n, int i, const char *what, int ndim,
                        const int64_t *shape, dg_err *err) {
    const dg_tensor *t = DG_IN(g, n, i);
    DG_INFER_DTYPE(g, n, i, DG_F32, err);
    dg_tensor want = {.ndim = ndim};
    for (int k = 0; k < ndim; k++) want.shape[k] = shape[k];
    if (!dg_same_shape(t, &want)) {
        char a[64], b[64];
        return DG_INFER_FAIL(err, "rule 'shape' broken: %s ('%s') is %s, expected %s", what, t->name,
                             dg_shape_str(t, a), dg_shape_str(&want, b));
    }
    return DG_OK;
}

/* (query, key) pairs a head computes: S^2, or S (S + 1) / 2 when causal;
 * in a window of W < S, row i sees min(i + 1, W) keys: W (W + 1) / 2 over
 * the first W rows, W each after. */
static double attn_pairs(const dg_attn_dims *d) {
    double s = (double)d->S, w = (double)d->window;
    double per = !d->causal                 ? s * s
                 : d->window > 0 && w < s ? w * (w + 1.0) / 2.0 + (s - w) * w
                                          : s * (s + 1.0) / 2.0;
    return (double)d->B * (double)d->Hq * per;
}

/* ---- attention (forward) ----------------------------------------------------------- */

static int infer_attn(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    dg_attn_dims d;
    DG_TRY(check_qkv(g, n, &d, err));
    int sink = d.sink == DG_ATTN_SOFTMAX_LEARNABLE, key = fwd_key_index(n), want = 3 + sink + (key >= 0);
    if (n->n_in != want)
        return DG_INFER_FAIL(err, "rule 'inputs' broken: softmax %d, dropout %g take %d inputs (q, k, v%s%s), got %d",
                             d.sink, n->attrs.f[1], want, sink ? ", sink" : "", key >= 0 ? ", key" : "", n->n_in);
    if (sink) DG_TRY(expect_shape(g, n, 3, "sink", 1, (int64_t[]){d.Hq}, err));
    if (key >= 0) DG_TRY(check_key(g, n, key, err));
    dg_desc_like(&o[0], DG_IN(g, n, 0));
    int64_t ls[3];
    lse_shape(&d, ls);
    dg_desc_set(&o[1], DG_F32, 3, ls);
    return DG_OK;
}

static void cost_attn(const dg_graph *g, const dg_node *n, dg_cost *c) {
    dg_attn_dims d = node_dims(g, n);
    c->flops = 4.0 * attn_pairs(&d) * (double)d.D;
    double qo = (double)(d.B * d.S * d.Hq * d.D), kv = (double)(d.B * d.S * d.Hkv * d.D);
    c->bytes = 4.0 * (2.0 * qo + 2.0 * kv + (double)(d.B * d.Hq * d.S));
}

static size_t ws_attn(const dg_graph *g, const dg_node *n, int nthreads) {
    dg_attn_dims d = node_dims(g, n);
    return dg_cpu_attention_fwd_workspace(&d, nthreads);
}

static int k_attn(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                  void *const *out) {
    int key = fwd_key_index(n);
    dg_attn_dims d = run_dims(g, n, key >= 0 ? in[key] : NULL);
    int nth = e->team && e->team->nthreads > 1 ? e->team->nthreads : 1;
    if (e->workspace_bytes < dg_cpu_attention_fwd_workspace(&d, nth)) return DG_EINTERNAL;
    dg_cpu_attention_fwd_ex(e->team, &d, in[0], in[1], in[2], d.sink == DG_ATTN_SOFTMAX_LEARNABLE ? in[3] : NULL,
                            out[0], out[1], e->workspace);
    return DG_OK;
}

/* The backward node reads the forward's inputs and both outputs; a missing
 * gradient of o is a zero tensor, a missing gradient of lse is left out. */
static int adj_attn(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    if (dout[0] < 0 && dout[1] < 0) return DG_OK;
    int d_o = dout[0];
    if (d_o < 0) {
        const dg_tensor *o = DG_OUT(g, n, 0);
        int64_t shape[DG_MAX_DIMS];
        for (int i = 0; i < o->ndim; i++) shape[i] = o->shape[i];
        d_o = dg_fill(g, o->ndim, shape, 0.0);
    }
    int key = fwd_key_index(n), nin = 6;
    int in[8] = {n->in[0], n->in[1], n->in[2], n->out[0], d_o, n->out[1]};
    if (key >= 0) in[nin++] = n->in[key]; /* the same mask: the draw is recomputed from the key */
    if (dout[1] >= 0) in[nin++] = dout[1];
    for (int i = 3; i < n->n_in; i++) din[i] = -1;
    int outs[3] = {-1, -1, -1};
    char name[DG_NAME_LEN];
    snprintf(name, sizeof name, "%.*s_bwd", DG_NAME_LEN - 5, n->name);
    if (dg_graph_add(g, &dg_op_attention_bwd, &n->attrs, in, nin, outs, name) < 0)
        return g->status;
    for (int i = 0; i < 3; i++) din[i] = g->tensors[n->in[i]].requires_grad ? outs[i] : -1;
    if (n->attrs.i[2] == DG_ATTN_SOFTMAX_LEARNABLE && g->tensors[n->in[3]].requires_grad) {
        /* the learnable sink's gradient: its own node, from o, do and lse */
        int sin[5] = {n->out[0], d_o, n->out[1], n->in[3], dout[1]};
        int ds = -1;
        snprintf(name, sizeof name, "%.*s_dsink", DG_NAME_LEN - 7, n->name);
        if (dg_graph_add(g, &dg_op_attention_sink_bwd, &n->attrs, sin, dout[1] >= 0 ? 5 : 4, &ds, name) < 0)
            return g->status;
        din[3] = ds;
    }
    return g->status;
}

const dg_op_def dg_op_attention = {
    .name = "attention", .min_inputs = 3, .max_inputs = 5, .n_outputs = 2,
    .iattr_names = {"causal", "window", "softmax", "site"}, .fattr_names = {"scale", "dropout"},
    .infer = infer_attn, .cost = cost_attn, .adjoint = adj_attn, .workspace = ws_attn,
    .kernel = k_attn,
    .shard = dg_shard_attention,
    .traits = DG_TRAIT_SEQUENCE | DG_TRAIT_RANDOM, /* dropout: TP adds its head offset (parallel/tp) */
    .f32_outputs = 2u /* lse */,
};

int dg_attention_ex(dg_graph *g, int q, int k, int v, int causal, double scale, int *lse_out) {
    return dg_attention_var(g, q, k, v, causal, scale, 0, DG_ATTN_SOFTMAX_VANILLA, -1, lse_out);
}

int dg_attention_var(dg_graph *g, int q, int k, int v, int causal, double scale, int64_t window, int softmax,
                     int sink, int *lse_out) {
    dg_attn_opts o = {.causal = causal, .scale = scale, .window = window, .softmax = softmax, .sink = sink,
                      .key = -1};
    return dg_attention_opt(g, q, k, v, &o, lse_out);
}

int dg_attention_opt(dg_graph *g, int q, int k, int v, const dg_attn_opts *opt, int *lse_out) {
    if (g->status != DG_OK) return -1;
    double scale = opt->scale;
    if (scale <= 0.0 && q >= 0 && q < g->n_tensors && g->tensors[q].ndim == 4)
        scale = 1.0 / sqrt((double)g->tensors[q].shape[3]);
    dg_attrs a = dg_attrs_zero();
    a.i[0] = opt->causal;
    a.i[1] = opt->window;
    a.i[2] = opt->softmax;
    a.f[0] = scale;
    int in[5] = {q, k, v}, nin = 3;
    if (opt->softmax == DG_ATTN_SOFTMAX_LEARNABLE) in[nin++] = opt->sink;
    if (opt->dropout > 0) {
        a.f[1] = opt->dropout;
        a.i[3] = opt->site;
        in[nin++] = opt->key;
    }
    int outs[2] = {-1, -1};
    int o = dg_graph_add(g, &dg_op_attention, &a, in, nin, outs, NULL);
    if (lse_out) *lse_out = o < 0 ? -1 : outs[1];
    return o;
}

int dg_attention(dg_graph *g, int q, int k, int v, double scale, int *lse_out) {
    return dg_attention_ex(g, q, k, v, 1, scale, lse_out);
}

/* ---- attention_bwd ------------------------------------------------------------------ */

static int infer_attn_bwd(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    dg_attn_dims d;
    DG_TRY(check_qkv(g, n, &d, err));
    const dg_tensor *q = DG_IN(g, n, 0);
    int64_t ls[3];
    lse_shape(&d, ls);
    DG_TRY(expect_shape(g, n, 3, "o", 4, q->shape, err));
    DG_TRY(expect_shape(g, n, 4, "do", 4, q->shape, err));
    DG_TRY(expect_shape(g, n, 5, "lse", 3, ls, err));
    if (bwd_key_index(n) >= 0) {
        if (n->n_in < 7) return DG_INFER_FAIL(err, "rule 'inputs' broken: dropout %g needs the key", n->attrs.f[1]);
        DG_TRY(check_key(g, n, bwd_key_index(n), err));
    }
    if (bwd_dlse_index(n) >= 0) DG_TRY(expect_shape(g, n, bwd_dlse_index(n), "dlse", 3, ls, err));
    for (int i = 0; i < 3; i++) dg_desc_like(&o[i], DG_IN(g, n, i));
    return DG_OK;
}

static void cost_attn_bwd(const dg_graph *g, const dg_node *n, dg_cost *c) {
    dg_attn_dims d = node_dims(g, n);
    c->flops = 14.0 * attn_pairs(&d) * (double)d.D;
    double qo = (double)(d.B * d.S * d.Hq * d.D), kv = (double)(d.B * d.S * d.Hkv * d.D);
    c->bytes = 4.0 * (4.0 * qo + 4.0 * kv + (double)(d.B * d.Hq * d.S) * (bwd_dlse_index(n) >= 0 ? 2 : 1));
}

static size_t ws_attn_bwd(const dg_graph *g, const dg_node *n, int nthreads) {
    dg_attn_dims d = node_dims(g, n);
    return dg_cpu_attention_bwd_workspace(&d, nthreads);
}

static int k_attn_bwd(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                      void *const *out) {
    int key = bwd_key_index(n), dl = bwd_dlse_index(n);
    dg_attn_dims d = run_dims(g, n, key >= 0 ? in[key] : NULL);
    int nth = e->team && e->team->nthreads > 1 ? e->team->nthreads : 1;
    if (e->workspace_bytes < dg_cpu_attention_bwd_workspace(&d, nth)) return DG_EINTERNAL;
    dg_cpu_attention_bwd(e->team, &d, in[0], in[1], in[2], in[3], in[4], in[5], dl >= 0 ? in[dl] : NULL, out[0],
                         out[1], out[2], e->workspace);
    return DG_OK;
}

const dg_op_def dg_op_attention_bwd = {
    .name = "attention_bwd", .min_inputs = 6, .max_inputs = 8, .n_outputs = 3,
    .iattr_names = {"causal", "window", "softmax", "site"}, .fattr_names = {"scale", "dropout"},
    .infer = infer_attn_bwd, .cost = cost_attn_bwd, .workspace = ws_attn_bwd,
    .kernel = k_attn_bwd,
};

/* ---- attention_sink_bwd ------------------------------------------------------------- */

/* Inputs o, do [B, S, Hq, D], lse [B, Hq, S], sink [Hq] [, dlse]; the
 * forward's attrs. */
static int infer_sink_bwd(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    const dg_tensor *t = DG_IN(g, n, 0);
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    if (t->ndim != 4)
        return DG_INFER_FAIL(err, "rule 'shape' broken: o ('%s') must be [B, S, Hq, D], got %d dims", t->name, t->ndim);
    int64_t ls[3] = {t->shape[0], t->shape[2], t->shape[1]};
    DG_TRY(expect_shape(g, n, 1, "do", 4, t->shape, err));
    DG_TRY(expect_shape(g, n, 2, "lse", 3, ls, err));
    DG_TRY(expect_shape(g, n, 3, "sink", 1, (int64_t[]){t->shape[2]}, err));
    if (n->n_in > 4) DG_TRY(expect_shape(g, n, 4, "dlse", 3, ls, err));
    dg_desc_like(&o[0], DG_IN(g, n, 3));
    return DG_OK;
}

static dg_attn_dims sink_dims(const dg_graph *g, const dg_node *n) {
    const dg_tensor *t = DG_IN(g, n, 0);
    return (dg_attn_dims){t->shape[0], t->shape[1], t->shape[2], t->shape[2], t->shape[3],
                          (int)n->attrs.i[0], (float)n->attrs.f[0], n->attrs.i[1], (int)n->attrs.i[2], 0, {.p = 0.0f}};
}

static void cost_sink_bwd(const dg_graph *g, const dg_node *n, dg_cost *c) {
    dg_attn_dims d = sink_dims(g, n);
    double od = (double)(d.B * d.S * d.Hq * d.D);
    c->flops = 2.0 * od + 4.0 * (double)(d.B * d.S * d.Hq);
    c->bytes = 4.0 * (2.0 * od + 2.0 * (double)(d.B * d.S * d.Hq));
}

static int k_sink_bwd(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                      void *const *out) {
    (void)e;
    dg_attn_dims d = sink_dims(g, n);
    dg_cpu_attention_sink_grad(&d, in[3], in[0], in[1], in[2], n->n_in > 4 ? in[4] : NULL, out[0]);
    return DG_OK;
}

const dg_op_def dg_op_attention_sink_bwd = {
    .name = "attention_sink_bwd", .min_inputs = 4, .max_inputs = 5, .n_outputs = 1,
    .iattr_names = {"causal", "window", "softmax", "site"}, .fattr_names = {"scale", "dropout"},
    .infer = infer_sink_bwd, .cost = cost_sink_bwd, .kernel = k_sink_bwd,
    .shard = dg_shard_attention_sink_bwd,
};
