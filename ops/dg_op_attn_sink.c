/* dg_op_attn_sink.c — attn_sink and attn_sink_bwd (see dg_op_attn_sink.h). */
#include "dg_op_attn_sink.h"

#include <math.h>
#include <string.h>

#include "dg_cpu_attention.h"
#include "dg_layout.h"
#include "dg_op_attention.h"
#include "dg_op_basic.h"
#include "dg_ops_util.h"

/* o [B, S, H, D] at input 0; lse [B, H, S] at input li; the sink [H] at si
 * (< 0: none). */
static int check_io(const dg_graph *g, const dg_node *n, int oi, int li, int si, dg_err *err) {
    const dg_tensor *o = DG_IN(g, n, oi), *l = DG_IN(g, n, li);
    DG_INFER_DTYPE(g, n, oi, DG_F32, err);
    DG_INFER_DTYPE(g, n, li, DG_F32, err);
    if (o->ndim != 4 || l->ndim != 3 || l->shape[0] != o->shape[0] || l->shape[1] != o->shape[2] ||
        l->shape[2] != o->shape[1])
        return DG_INFER_FAIL(err, "rule 'shape' broken: o '%s' must be [B, S, H, D] and lse '%s' [B, H, S]", o->name,
                             l->name);
    if (si >= 0) {
        const dg_tensor *s = DG_IN(g, n, si);
        DG_INFER_DTYPE(g, n, si, DG_F32, err);
        if (s->ndim != 1 || s->shape[0] != o->shape[2])
            return DG_INFER_FAIL(err, "rule 'shape' broken: sink '%s' must be [H] = [%lld]", s->name,
                                 (long long)o->shape[2]);
    }
    return DG_OK;
}

static int learnable(const dg_node *n) { return n->attrs.i[0] == DG_ATTN_SOFTMAX_LEARNABLE; }

static void dims(const dg_graph *g, const dg_node *n, int64_t d[4]) {
    for (int k = 0; k < 4; k++) d[k] = DG_IN(g, n, 0)->shape[k];
}

/* ---- attn_sink ------------------------------------------------------------------------- */

static int infer_sink(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    if (n->attrs.i[0] != DG_ATTN_SOFTMAX_OFF_BY_ONE && !learnable(n))
        return DG_INFER_FAIL(err, "rule 'attrs' broken: softmax must be 1 or 2, got %lld", (long long)n->attrs.i[0]);
    if (n->n_in != (learnable(n) ? 3 : 2))
        return DG_INFER_FAIL(err, "rule 'inputs' broken: o, lse%s expected", learnable(n) ? ", sink" : "");
    DG_TRY(check_io(g, n, 0, 1, learnable(n) ? 2 : -1, err));
    dg_desc_like(&o[0], DG_IN(g, n, 0));
    dg_desc_like(&o[1], DG_IN(g, n, 1));
    return DG_OK;
}

static void cost_sink(const dg_graph *g, const dg_node *n, dg_cost *c) {
    int64_t d[4];
    dims(g, n, d);
    double od = (double)(d[0] * d[1] * d[2] * d[3]), rows = (double)(d[0] * d[1] * d[2]);
    c->flops = od + 4.0 * rows;
    c->bytes = 4.0 * (2.0 * od + 2.0 * rows);
}

static int k_sink(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in, void *const *out) {
    (void)e;
    int64_t d[4];
    dims(g, n, d);
    dg_cpu_attn_sink_fwd(d[0], d[1], d[2], d[3], in[0], in[1], learnable(n) ? in[2] : NULL, out[0], out[1]);
    return DG_OK;
}

static int adj_sink(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    if (dout[0] < 0 && dout[1] < 0) return DG_OK;
    int d_o = dout[0];
    if (d_o < 0) {
        const dg_tensor *o = DG_OUT(g, n, 0);
        d_o = dg_fill(g, o->ndim, o->shape, 0.0);
    }
    dg_attrs a = n->attrs;
    a.i[1] = dout[1] >= 0;
    int in[6], k = 0;
    in[k++] = n->out[0];
    in[k++] = d_o;
    in[k++] = n->in[1];
    in[k++] = n->out[1];
    if (dout[1] >= 0) in[k++] = dout[1];
    if (learnable(n)) in[k++] = n->in[2];
    int outs[3] = {-1, -1, -1};
    char name[DG_NAME_LEN];
    snprintf(name, sizeof name, "%.*s_bwd", DG_NAME_LEN - 5, n->name);
    if (dg_graph_add(g, &dg_op_attn_sink_bwd, &a, in, k, outs, name) < 0) return g->status;
    din[0] = outs[0];
    din[1] = outs[1];
    if (learnable(n)) din[2] = g->tensors[n->in[2]].requires_grad ? outs[2] : -1;
    return g->status;
}

/* Rows split alike: o's B, S, H as lse's B, S (dim 2), H (dim 1); D whole. */
static int shard_sink(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                      dg_attrs *attrs) {
    (void)g, (void)attrs;
    const dg_sharding *o = &in[0], *l = &in[1];
    if (o->partial != DG_AXIS_NONE || l->partial != DG_AXIS_NONE || dg_layout_dim_split(o, 3)) return DG_SHARD_CANNOT;
    const int lo[3][2] = {{0, 0}, {1, 2}, {2, 1}}; /* o's dim, lse's dim */
    for (int k = 0; k < 3; k++) {
        int a = lo[k][0], b = lo[k][1];
        if (o->split[a] != l->split[b] || o->split2[a] != l->split2[b] || o->stride[a] != l->stride[b])
            return DG_SHARD_CANNOT;
    }
    if (n->n_in > 2 && (in[2].partial != DG_AXIS_NONE || in[2].split[0] != o->split[2] ||
                        in[2].split2[0] != o->split2[2] || in[2].stride[0] != o->stride[2]))
        return DG_SHARD_CANNOT;
    out[0] = in[0];
    out[1] = in[1];
    return DG_OK;
}

const dg_op_def dg_op_attn_sink = {
    .name = "attn_sink", .min_inputs = 2, .max_inputs = 3, .n_outputs = 2,
    .iattr_names = {"softmax"},
    .infer = infer_sink, .cost = cost_sink, .adjoint = adj_sink, .kernel = k_sink, .shard = shard_sink,
    .f32_outputs = 2u /* lse */,
};

int dg_attn_sink(dg_graph *g, int o, int lse, int softmax, int sink, int *lse_out) {
    if (g->status != DG_OK) return -1;
    dg_attrs a = dg_attrs_zero();
    a.i[0] = softmax;
    int outs[2] = {-1, -1};
    int r = dg_graph_add(g, &dg_op_attn_sink, &a, (int[]){o, lse, sink}, softmax == DG_ATTN_SOFTMAX_LEARNABLE ? 3 : 2,
                         outs, NULL);
    if (lse_out) *lse_out = r < 0 ? -1 : outs[1];
    return r;
}

/* ---- attn_sink_bwd ------------------------------------------------------------------------ */

static int infer_sink_bwd(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    int has_dl = n->attrs.i[1] != 0, want = 4 + has_dl + learnable(n);
    if (n->n_in != want)
        return DG_INFER_FAIL(err, "rule 'inputs' broken: %d inputs expected, got %d", want, n->n_in);
    DG_TRY(check_io(g, n, 0, 2, learnable(n) ? want - 1 : -1, err));
    DG_TRY(check_io(g, n, 1, 3, -1, err));
    if (has_dl) DG_TRY(check_io(g, n, 0, 4, -1, err));
    dg_desc_like(&o[0], DG_IN(g, n, 0));
    dg_desc_like(&o[1], DG_IN(g, n, 2));
    if (learnable(n)) dg_desc_like(&o[2], DG_IN(g, n, want - 1));
    else dg_desc_set(&o[2], DG_F32, 1, (int64_t[]){1});
    return DG_OK;
}

static void cost_sink_bwd(const dg_graph *g, const dg_node *n, dg_cost *c) {
    int64_t d[4];
    dims(g, n, d);
    double od = (double)(d[0] * d[1] * d[2] * d[3]), rows = (double)(d[0] * d[1] * d[2]);
    c->flops = 3.0 * od + 8.0 * rows;
    c->bytes = 4.0 * (3.0 * od + 5.0 * rows);
}

static int k_sink_bwd(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                      void *const *out) {
    (void)e;
    int64_t d[4];
    dims(g, n, d);
    int has_dl = n->attrs.i[1] != 0;
    const float *sink = learnable(n) ? in[4 + has_dl] : NULL;
    dg_cpu_attn_sink_bwd(d[0], d[1], d[2], d[3], in[0], in[1], in[2], in[3], has_dl ? in[4] : NULL, out[0], out[1],
                         sink ? out[2] : NULL);
    if (!sink) ((float *)out[2])[0] = 0.0f;
    return DG_OK;
}

const dg_op_def dg_op_attn_sink_bwd = {
    .name = "attn_sink_bwd", .min_inputs = 4, .max_inputs = 6, .n_outputs = 3,
    .iattr_names = {"softmax", "has_dlse"},
    .infer = infer_sink_bwd, .cost = cost_sink_bwd, .kernel = k_sink_bwd,
    .f32_outputs = 6u /* dlse, dsink */,
};
