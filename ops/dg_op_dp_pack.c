/* dg_op_dp_pack.c — see dg_op_dp_pack.h (moved from train/dg_dist.c). */
#include "dg_op_dp_pack.h"

#include <string.h>

/* ---- the pack op --------------------------------------------------------------- */

static int infer_pack(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    int64_t total = 0;
    for (int i = 0; i < n->n_in; i++) {
        const dg_tensor *t = dg_Tc(g, n->in[i]);
        if (t->dtype != DG_F32) return dg_err_set(err, DG_EINPUT, "input %d is %s, expected f32", i, dg_dtype_name(t->dtype));
        total += dg_tensor_numel(t);
    }
    if (n->attrs.i[0] < total || n->attrs.i[0] < 1)
        return dg_err_set(err, DG_EINPUT, "padded length %lld is less than the inputs' %lld elements",
                          (long long)n->attrs.i[0], (long long)total);
    dg_desc_set(o, DG_F32, 1, (int64_t[]){n->attrs.i[0]});
    return DG_OK;
}

static void cost_pack(const dg_graph *g, const dg_node *n, dg_cost *c) {
    c->flops = 0;
    c->bytes = 2.0 * (double)n->attrs.i[0] * sizeof(float);
    (void)g;
}

static int k_pack(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                  void *const *out) {
    (void)e;
    char *dst = out[0];
    size_t off = 0;
    for (int i = 0; i < n->n_in; i++) {
        size_t b = dg_tensor_bytes(dg_Tc(g, n->in[i]));
        memcpy(dst + off, in[i], b);
        off += b;
    }
    memset(dst + off, 0, (size_t)n->attrs.i[0] * sizeof(float) - off);
    return DG_OK;
}

const dg_op_def dg_op_dp_pack = {
    .name = "dp_pack", .min_inputs = 1, .max_inputs = DG_MAX_INPUTS, .n_outputs = 1,
    .iattr_names = {"padded", NULL}, .stream = DG_STREAM_COMPUTE, .comm = DG_COMM_NONE,
    .infer = infer_pack, .cost = cost_pack, .kernel = k_pack,
};

/* ---- the unpack op: one parameter's slice of a gathered bucket ------------------- */

static int infer_unpack(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    int ndim = (int)n->attrs.i[1];
    if (ndim < 0 || ndim > DG_MAX_DIMS) return dg_err_set(err, DG_EINPUT, "ndim %d", ndim);
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++) numel *= n->attrs.i[2 + d];
    const dg_tensor *x = dg_Tc(g, n->in[0]);
    if (x->dtype != DG_F32 || n->attrs.i[0] < 0 || n->attrs.i[0] + numel > dg_tensor_numel(x))
        return dg_err_set(err, DG_EINPUT, "slice [%lld, %lld) is outside the f32 bucket of %lld",
                          (long long)n->attrs.i[0], (long long)(n->attrs.i[0] + numel),
                          (long long)dg_tensor_numel(x));
    dg_desc_set(o, DG_F32, ndim, &n->attrs.i[2]);
    return DG_OK;
}

static void cost_unpack(const dg_graph *g, const dg_node *n, dg_cost *c) {
    c->flops = 0;
    c->bytes = 2.0 * (double)dg_tensor_bytes(dg_Tc(g, n->out[0]));
}

static int k_unpack(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                    void *const *out) {
    (void)e;
    memcpy(out[0], (const float *)in[0] + n->attrs.i[0], dg_tensor_bytes(dg_Tc(g, n->out[0])));
    return DG_OK;
}

const dg_op_def dg_op_dp_unpack = {
    .name = "dp_unpack", .min_inputs = 1, .max_inputs = 1, .n_outputs = 1,
    .iattr_names = {"offset", "ndim", "d0", "d1", "d2", "d3", NULL}, .stream = DG_STREAM_COMPUTE,
    .comm = DG_COMM_NONE, .infer = infer_unpack, .cost = cost_unpack, .kernel = k_unpack,
};
