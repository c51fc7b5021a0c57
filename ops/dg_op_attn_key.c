/* dg_op_attn_key.c — attn_key (see dg_op_attn_key.h). */
#include "dg_op_attn_key.h"

#include "dg_cpu_attention.h" /* DG_ATTN_KEY_LEN */
#include "dg_ops_util.h"

static int infer_key(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    for (int i = 0; i < n->n_in; i++) DG_INFER_DTYPE(g, n, i, DG_I32, err);
    int64_t len = dg_tensor_numel(DG_IN(g, n, 0)), ring = n->attrs.i[1];
    if (len != 4 && len != DG_ATTN_KEY_LEN)
        return DG_INFER_FAIL(err, "rule 'shape' broken: key '%s' has %lld ints, expected 4 or %d", DG_IN(g, n, 0)->name,
                             (long long)len, DG_ATTN_KEY_LEN);
    if (n->n_in > 1 && dg_tensor_numel(DG_IN(g, n, 1)) != 1)
        return DG_INFER_FAIL(err, "rule 'shape' broken: coord '%s' must be one int", DG_IN(g, n, 1)->name);
    if (ring && (n->n_in < 2 || len != DG_ATTN_KEY_LEN))
        return DG_INFER_FAIL(err, "rule 'inputs' broken: the ring's key needs an attention key and the cp rank");
    dg_desc_set(o, DG_I32, 1, (int64_t[]){DG_ATTN_KEY_LEN + ring});
    return DG_OK;
}

static void cost_key(const dg_graph *g, const dg_node *n, dg_cost *c) {
    (void)g;
    (void)n;
    c->flops = 0.0; /* a copy of a few ints: no model FLOPs */
    c->bytes = 4.0 * 12;
}

static int k_key(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in, void *const *out) {
    (void)e;
    int32_t coord = n->n_in > 1 ? *(const int32_t *)in[1] : 0;
    dg_attn_key_fill(in[0], dg_tensor_numel(DG_IN(g, n, 0)), coord, n->attrs.i[0], (int)n->attrs.i[1], out[0]);
    return DG_OK;
}

const dg_op_def dg_op_attn_key = {
    .name = "attn_key", .min_inputs = 1, .max_inputs = 2, .n_outputs = 1,
    .iattr_names = {"heads_per_coord", "ring"},
    .infer = infer_key, .cost = cost_key, .kernel = k_key,
};

int dg_attn_key(dg_graph *g, int key, int coord, int64_t heads_per_coord) {
    dg_attrs a = dg_attrs_zero();
    a.i[0] = heads_per_coord;
    return dg_add1(g, &dg_op_attn_key, &a, (int[]){key, coord}, coord >= 0 ? 2 : 1, NULL);
}

int dg_attn_ring_key(dg_graph *g, int key, int cp_rank) {
    dg_attrs a = dg_attrs_zero();
    a.i[1] = 1;
    return dg_add1(g, &dg_op_attn_key, &a, (int[]){key, cp_rank}, 2, NULL);
}
