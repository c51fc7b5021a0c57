/* t_ops.c — test-only ops (see t_ops.h). */
#include "t_ops.h"

#include <string.h>

#include "dg_collective.h"
#include "dg_layout.h"

static int infer_matmul(const dg_graph *g, const dg_node *n, dg_tensor_desc *outs, dg_err *err) {
    const dg_tensor *a = dg_Tc(g, n->in[0]), *b = dg_Tc(g, n->in[1]);
    if (a->ndim != 2 || b->ndim != 2)
        return dg_err_set(err, DG_EINPUT, "t_matmul needs 2-d inputs");
    if (a->shape[1] != b->shape[0])
        return dg_err_set(err, DG_EINPUT, "inner dims %lld and %lld differ",
                          (long long)a->shape[1], (long long)b->shape[0]);
    if (a->dtype != b->dtype) return dg_err_set(err, DG_EINPUT, "dtypes differ");
    dg_desc_set(&outs[0], a->dtype, 2, (int64_t[]){a->shape[0], b->shape[1]});
    return DG_OK;
}

static void cost_matmul(const dg_graph *g, const dg_node *n, dg_cost *c) {
    const dg_tensor *a = dg_Tc(g, n->in[0]), *b = dg_Tc(g, n->in[1]);
    c->flops = 2.0 * (double)a->shape[0] * (double)a->shape[1] * (double)b->shape[1];
    c->bytes = (double)(dg_tensor_bytes(a) + dg_tensor_bytes(b));
}

static int infer_same_all(const dg_graph *g, const dg_node *n, dg_tensor_desc *outs,
                          dg_err *err) {
    const dg_tensor *a = dg_Tc(g, n->in[0]);
    for (int k = 1; k < n->n_in; k++) {
        const dg_tensor *b = dg_Tc(g, n->in[k]);
        char sa[64], sb[64];
        bool same = a->ndim == b->ndim && a->dtype == b->dtype;
        for (int d = 0; same && d < a->ndim; d++) same = a->shape[d] == b->shape[d];
        if (!same)
            return dg_err_set(err, DG_EINPUT, "inputs %s %s and %s %s differ",
                              dg_dtype_name(a->dtype), dg_shape_str(a, sa),
                              dg_dtype_name(b->dtype), dg_shape_str(b, sb));
    }
    dg_desc_like(&outs[0], a);
    return DG_OK;
}

static int infer_loss(const dg_graph *g, const dg_node *n, dg_tensor_desc *outs, dg_err *err) {
    (void)g;
    (void)n;
    (void)err;
    dg_desc_set(&outs[0], DG_F32, 0, NULL);
    return DG_OK;
}

static int infer_shape_attr(const dg_graph *g, const dg_node *n, dg_tensor_desc *outs,
                            dg_err *err) {
    (void)g;
    int64_t nd = n->attrs.i[0];
    if (nd < 0 || nd > DG_MAX_DIMS) return dg_err_set(err, DG_EINPUT, "bad ndim");
    dg_desc_set(&outs[0], DG_F32, (int)nd, &n->attrs.i[1]);
    return DG_OK;
}

static int adj_add(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    (void)g;
    (void)n;
    din[0] = din[1] = dout[0];
    return DG_OK;
}

static int adj_loss(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    const dg_tensor *x = dg_Tc(g, n->in[0]);
    dg_attrs a;
    memset(&a, 0, sizeof a);
    a.i[0] = x->ndim;
    for (int d = 0; d < x->ndim; d++) a.i[1 + d] = x->shape[d];
    din[0] = dg_graph_add(g, &t_op_bcast, &a, &dout[0], 1, NULL, NULL);
    return din[0] < 0 ? g->status : DG_OK;
}

/* x [T, K] @ w [K, N]: column parallel (w split on N) or row parallel (both
 * split on K over one axis -> partial sum). */
static int shard_matmul(const dg_graph *g, const dg_node *n, const dg_sharding *in,
                        dg_sharding *out, dg_attrs *attrs) {
    (void)g;
    (void)n;
    (void)attrs;
    memset(out, 0, sizeof *out);
    out->split[0] = in[0].split[0];
    if (in[0].split[1] || in[1].split[0]) {
        if (in[0].split[1] != in[1].split[0] || in[1].split[1]) return DG_SHARD_CANNOT;
        out->partial = in[0].split[1];
    } else {
        out->split[1] = in[1].split[1];
    }
    return DG_OK;
}

const dg_op_def t_op_fill = {.name = "t_fill", .min_inputs = 0, .max_inputs = 0, .n_outputs = 1,
                             .infer = infer_shape_attr};
const dg_op_def t_op_bcast = {.name = "t_bcast", .min_inputs = 1, .max_inputs = 1,
                              .n_outputs = 1, .infer = infer_shape_attr};

const dg_op_def t_op_matmul = {.name = "t_matmul", .min_inputs = 2, .max_inputs = 2,
                               .n_outputs = 1, .infer = infer_matmul, .cost = cost_matmul,
                               .shard = shard_matmul};
const dg_op_def t_op_add = {.name = "t_add", .min_inputs = 2, .max_inputs = 2, .n_outputs = 1,
                            .infer = infer_same_all, .adjoint = adj_add,
                            .shard = dg_shard_elementwise};
const dg_op_def t_op_relu = {.name = "t_relu", .min_inputs = 1, .max_inputs = 1, .n_outputs = 1,
                             .infer = infer_same_all, .shard = dg_shard_elementwise};
const dg_op_def t_op_sum = {.name = "t_sum", .min_inputs = 1, .max_inputs = 4, .n_outputs = 1,
                            .infer = infer_same_all};
const dg_op_def t_op_scale = {.name = "t_scale", .min_inputs = 1, .max_inputs = 1,
                              .n_outputs = 1, .iattr_names = {"repeat", NULL},
                              .fattr_names = {"alpha", NULL}, .infer = infer_same_all,
                              .shard = dg_shard_linear_unary};
const dg_op_def t_op_loss = {.name = "t_loss", .min_inputs = 1, .max_inputs = 1, .n_outputs = 1,
                             .infer = infer_loss, .adjoint = adj_loss};

int t_matmul(dg_graph *g, int a, int b, const char *name) {
    return dg_graph_add(g, &t_op_matmul, NULL, (int[]){a, b}, 2, NULL, name);
}
int t_add(dg_graph *g, int a, int b, const char *name) {
    return dg_graph_add(g, &t_op_add, NULL, (int[]){a, b}, 2, NULL, name);
}
int t_relu(dg_graph *g, int x, const char *name) {
    return dg_graph_add(g, &t_op_relu, NULL, &x, 1, NULL, name);
}
int t_scale(dg_graph *g, int x, double alpha, const char *name) {
    dg_attrs a;
    memset(&a, 0, sizeof a);
    a.i[0] = 1;
    a.f[0] = alpha;
    return dg_graph_add(g, &t_op_scale, &a, &x, 1, NULL, name);
}
int t_loss(dg_graph *g, int x, const char *name) {
    return dg_graph_add(g, &t_op_loss, NULL, &x, 1, NULL, name);
}

dg_graph *t_build_sample(int n_layers, int hidden, int tp) {
    dg_graph *g = dg_graph_new("sample");
    const int T = 16, H = hidden, F = 4 * hidden / tp;
    char nm[DG_NAME_LEN];
    dg_graph_set_microbatch(g, 0);
    int x = dg_input_new(g, "tokens_emb", DG_F32, 2, DG_SHAPE(T, H));
    /* as if an earlier pipeline stage handed over a residual */
    int from_prev = dg_recv(g, DG_AXIS_PP, 2, -1, DG_F32, 2, DG_SHAPE(T, H));
    x = t_add(g, x, from_prev, "embed_plus_prev");
    int *w1 = calloc((size_t)n_layers, sizeof(int)), *w2 = calloc((size_t)n_layers, sizeof(int));
    int *acts = calloc((size_t)n_layers * 4, sizeof(int));
    for (int l = 0; l < n_layers; l++) {
        dg_graph_set_layer(g, l);
        snprintf(nm, sizeof nm, "l%d.w1", l);
        w1[l] = dg_param(g, nm, 2, DG_SHAPE(H, F), NULL);
        dg_T(g, w1[l])->sharding.split[1] = DG_AXIS_TP;
        snprintf(nm, sizeof nm, "l%d.w2", l);
        w2[l] = dg_param(g, nm, 2, DG_SHAPE(F, H), NULL);
        dg_T(g, w2[l])->sharding.split[0] = DG_AXIS_TP;
        int xc = dg_copy_to_group(g, x, DG_AXIS_TP, tp);
        snprintf(nm, sizeof nm, "l%d.fc1", l);
        int h = t_matmul(g, xc, w1[l], nm);
        dg_T(g, h)->sharding.split[1] = DG_AXIS_TP;
        snprintf(nm, sizeof nm, "l%d.act", l);
        int a = t_relu(g, h, nm);
        /* an expert-parallel dispatch and combine around nothing: shapes
         * unchanged, but the dump shows all_to_all nodes */
        int disp = dg_all_to_all(g, a, DG_AXIS_EP, 2, 0, 0);
        int comb = dg_all_to_all(g, disp, DG_AXIS_EP, 2, 0, 0);
        snprintf(nm, sizeof nm, "l%d.fc2", l);
        int o = t_matmul(g, comb, w2[l], nm);
        dg_T(g, o)->sharding.partial = DG_AXIS_TP;
        int r = dg_all_reduce(g, o, DG_AXIS_TP, tp);
        snprintf(nm, sizeof nm, "l%d.scale", l);
        int s = t_scale(g, r, 0.5, nm);
        snprintf(nm, sizeof nm, "l%d.residual", l);
        x = t_add(g, x, s, nm);
        acts[4 * l + 0] = xc;
        acts[4 * l + 1] = a;
        acts[4 * l + 2] = h;
        acts[4 * l + 3] = x;
    }
    dg_graph_set_layer(g, -1);
    int loss = t_loss(g, x, "loss");
    (void)loss;
    dg_send(g, x, DG_AXIS_PP, 2, +1);

    /* Backward by hand, shaped like what autodiff emits: enough nodes of the
     * right kinds to exercise phases, collectives and clusters in dumps. */
    dg_graph_set_phase(g, DG_PHASE_BACKWARD);
    int dx = dg_tensor_new(g, "d.loss_seed", DG_F32, 2, DG_SHAPE(T, H), DG_ROLE_GRADIENT);
    for (int l = n_layers - 1; l >= 0; l--) {
        dg_graph_set_layer(g, l);
        snprintf(nm, sizeof nm, "l%d.w2^T", l);
        int w2t = dg_param(g, nm, 2, DG_SHAPE(H, F), NULL);
        snprintf(nm, sizeof nm, "l%d.w1^T", l);
        int w1t = dg_param(g, nm, 2, DG_SHAPE(F, H), NULL);
        snprintf(nm, sizeof nm, "l%d.d_scale", l);
        int ds = t_scale(g, dx, 0.5, nm);
        snprintf(nm, sizeof nm, "l%d.d_a", l);
        int da = t_matmul(g, ds, w2t, nm);
        snprintf(nm, sizeof nm, "l%d.d_h", l);
        int dh = dg_graph_add(g, &t_op_sum, NULL, (int[]){da, acts[4 * l + 2]}, 2, NULL, nm);
        snprintf(nm, sizeof nm, "l%d.d_xc", l);
        int dxc = t_matmul(g, dh, w1t, nm);
        int dxr = dg_all_reduce(g, dxc, DG_AXIS_TP, tp);
        snprintf(nm, sizeof nm, "l%d.d_x", l);
        dx = t_add(g, dx, dxr, nm);
        /* weight gradients: the optimizer reads them */
        dg_graph_set_phase(g, DG_PHASE_RECOMPUTE);
        snprintf(nm, sizeof nm, "l%d.recompute_act", l);
        int ra = t_relu(g, acts[4 * l + 2], nm);
        dg_graph_set_phase(g, DG_PHASE_OPTIMIZER);
        snprintf(nm, sizeof nm, "l%d.opt_step", l);
        int gsum = dg_graph_add(g, &t_op_sum, NULL, (int[]){ra, acts[4 * l + 1]}, 2, NULL, nm);
        int gathered = dg_all_gather(g, gsum, DG_AXIS_DP, 2, 0);
        (void)gathered;
        dg_graph_set_phase(g, DG_PHASE_BACKWARD);
    }
    free(w1);
    free(w2);
    free(acts);
    return g;
}
