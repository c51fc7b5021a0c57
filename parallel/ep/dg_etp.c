/* dg_etp.c — the MoE experts under tensor parallelism (see dg_etp.h). */
#include "dg_etp.h"

#include <string.h>

#include "dg_collective.h"
#include "dg_layout.h"
#include "dg_ops_util.h"

/* This tp rank's rows [lo, hi) of T (floor division: any T). */
static void slice_of(int64_t T, int64_t r, int64_t tp, int64_t *lo, int64_t *hi) {
    *lo = r * T / tp;
    *hi = (r + 1) * T / tp;
}

static int infer_mask(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    const dg_tensor *x = DG_IN(g, n, 0), *r = DG_IN(g, n, 1);
    int want_i32 = n->op == &dg_op_moe_tp_mask_indices;
    char s[64];
    if (x->ndim != 2 || (want_i32 ? x->dtype != DG_I32 : !dg_dtype_is_float(x->dtype)))
        return DG_INFER_FAIL(err, "rule 'shape' broken: %s: '%s' is %s %s, expected %s [T, n]", n->op->name, x->name,
                             dg_dtype_name(x->dtype), dg_shape_str(x, s), want_i32 ? "i32" : "f32");
    if (r->dtype != DG_I32 || dg_tensor_numel(r) != 1)
        return DG_INFER_FAIL(err, "rule 'shape' broken: tp_rank '%s' must be one i32", r->name);
    if (n->attrs.i[0] < 1)
        return DG_INFER_FAIL(err, "rule 'attrs' broken: tp size %lld must be >= 1", (long long)n->attrs.i[0]);
    dg_desc_like(o, x);
    return DG_OK;
}

static void cost_mask(const dg_graph *g, const dg_node *n, dg_cost *c) {
    c->flops = 0;
    c->bytes = 2.0 * (double)dg_tensor_bytes(DG_IN(g, n, 0));
}

/* Rows [lo, hi) of x [T, n] copied, the others set to `fill` (elements of
 * `elem` bytes; fill is -1 for i32 slots, 0 for f32 rows). */
static int k_mask(const dg_exec_env *env, const dg_graph *g, const dg_node *n, void *const *in, void *const *out) {
    (void)env;
    const dg_tensor *x = DG_IN(g, n, 0);
    int64_t tp = n->attrs.i[0], r = *(const int32_t *)in[1], T = x->shape[0], cols = x->shape[1], lo, hi;
    if (r < 0 || r >= tp) return DG_EINPUT; /* tp_rank not filled in, or wrong */
    slice_of(T, r, tp, &lo, &hi);
    if (x->dtype == DG_I32) {
        const int32_t *a = in[0];
        int32_t *b = out[0];
        for (int64_t i = 0; i < T * cols; i++) b[i] = i / cols >= lo && i / cols < hi ? a[i] : -1;
    } else {
        const float *a = in[0];
        float *b = out[0];
        for (int64_t i = 0; i < T * cols; i++) b[i] = i / cols >= lo && i / cols < hi ? a[i] : 0.0f;
    }
    return DG_OK;
}

/* The zeroed rows make a replicated y one summand of a sum over tp. The
 * adjoint's input is the all-reduce's gradient, recorded partial(tp) (the
 * all_reduce adjoint keeps the forward input's layout), so that is taken too. */
static int shard_mask_rows(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                           dg_attrs *attrs) {
    (void)g;
    (void)n;
    (void)attrs;
    dg_sharding x = in[0];
    if (x.partial == DG_AXIS_TP) x.partial = DG_AXIS_NONE;
    if (!dg_layout_is_replicated(&x) || !dg_layout_is_replicated(&in[1])) return DG_SHARD_CANNOT;
    memset(out, 0, sizeof *out);
    out[0].partial = DG_AXIS_TP;
    return DG_OK;
}

static int adj_mask_rows(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    if (dout[0] >= 0) din[0] = dg_moe_tp_mask_rows(g, dout[0], n->in[1], (int)n->attrs.i[0]);
    return g->status;
}

const dg_op_def dg_op_moe_tp_mask_indices = {
    .name = "moe_tp_mask_indices", .min_inputs = 2, .max_inputs = 2, .n_outputs = 1,
    .iattr_names = {"tp_size", NULL},
    .infer = infer_mask, .cost = cost_mask, .kernel = k_mask,
};

const dg_op_def dg_op_moe_tp_mask_rows = {
    .name = "moe_tp_mask_rows", .min_inputs = 2, .max_inputs = 2, .n_outputs = 1,
    .iattr_names = {"tp_size", NULL},
    .infer = infer_mask, .cost = cost_mask, .adjoint = adj_mask_rows, .kernel = k_mask,
    .shard = shard_mask_rows,
};

int dg_moe_tp_mask_indices(dg_graph *g, int indices, int tp_rank, int tp) {
    dg_attrs a = dg_attrs_zero();
    a.i[0] = tp;
    return dg_add1(g, &dg_op_moe_tp_mask_indices, &a, (int[]){indices, tp_rank}, 2, "etp_mask_indices");
}

int dg_moe_tp_mask_rows(dg_graph *g, int y, int tp_rank, int tp) {
    dg_attrs a = dg_attrs_zero();
    a.i[0] = tp;
    return dg_add1(g, &dg_op_moe_tp_mask_rows, &a, (int[]){y, tp_rank}, 2, "etp_mask_rows");
}

/* Name the node that produced t (dumps and traces say what it is for). */
static int named(dg_graph *g, int t, const char *name) {
    if (t >= 0 && g->tensors[t].producer >= 0)
        snprintf(dg_N(g, g->tensors[t].producer)->name, DG_NAME_LEN, "%s", name);
    return t;
}

int dg_etp_experts(dg_graph *g, const dg_ep_opts *o, const dg_ep_experts_args *a) {
    if (g->status != DG_OK) return -1;
    int tp = dg_mesh_size(g, DG_AXIS_TP);
    const dg_tensor *w1 = dg_Tc(g, a->w1);
    /* tp 1, or ETP = TP: dg_ep_experts runs the tp-split expert MLP itself */
    if (tp <= 1 || (w1->ndim == 3 && w1->sharding.split[1] == DG_AXIS_TP)) return dg_ep_experts(g, o, a);
    int rank = dg_mesh_coord_input(g, DG_AXIS_TP);
    dg_ep_experts_args b = *a;
    b.x = named(g, dg_copy_to_group(g, a->x, DG_AXIS_TP, tp), "etp_copy_x");
    b.probs = named(g, dg_copy_to_group(g, a->probs, DG_AXIS_TP, tp), "etp_copy_probs");
    b.indices = dg_moe_tp_mask_indices(g, a->indices, rank, tp);
    if (g->status != DG_OK) return -1;
    int y = dg_moe_tp_mask_rows(g, dg_ep_experts(g, o, &b), rank, tp);
    return named(g, y < 0 ? -1 : dg_all_reduce(g, y, DG_AXIS_TP, tp), "etp_all_reduce");
}
