/* dg_op_cp_a2a.c — the all-to-all (Ulysses) CP attention (see dg_op_cp_a2a.h). */
#include "dg_op_cp_a2a.h"

#include <string.h>

#include "dg_collective.h"
#include "dg_layout.h"
#include "dg_op_attention.h"
#include "dg_op_attn_key.h"
#include "dg_ops_util.h"

static int infer_perm(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    const dg_tensor *x = DG_IN(g, n, 0);
    int64_t cp = n->attrs.i[0], d = n->attrs.i[2];
    if (cp < 1 || d < 0 || d >= x->ndim || x->shape[d] % (2 * cp))
        return DG_INFER_FAIL(err, "rule 'shape' broken: dim %lld of '%s' must split into 2 x cp = %lld chunks",
                             (long long)d, x->name, (long long)(2 * cp));
    dg_desc_like(o, x);
    return DG_OK;
}

static void cost_perm(const dg_graph *g, const dg_node *n, dg_cost *c) {
    c->flops = 0;
    c->bytes = 8.0 * (double)dg_tensor_numel(DG_IN(g, n, 0));
}

static int k_perm(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                  void *const *out) {
    (void)e;
    const dg_tensor *x = DG_IN(g, n, 0);
    int64_t cp = n->attrs.i[0], d = n->attrs.i[2], outer = 1, inner = dg_dtype_size(x->dtype);
    for (int i = 0; i < d; i++) outer *= x->shape[i];
    for (int i = (int)d + 1; i < x->ndim; i++) inner *= x->shape[i];
    int64_t nb = 2 * cp, blk = x->shape[d] / nb * inner; /* bytes of one chunk of one outer row */
    const char *src = in[0];
    char *dst = out[0];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t b = 0; b < nb; b++) {
            int64_t m = dg_cp_chunk_of_block(b, cp); /* rank-order block b is sequence chunk m */
            int64_t from = n->attrs.i[1] ? m : b, to = n->attrs.i[1] ? b : m;
            memcpy(dst + (o * nb + to) * blk, src + (o * nb + from) * blk, (size_t)blk);
        }
    return DG_OK;
}

static int perm_node(dg_graph *g, int x, int64_t cp, int inverse, int64_t dim) {
    dg_attrs a = dg_attrs_zero();
    a.i[0] = cp;
    a.i[1] = inverse;
    a.i[2] = dim;
    return dg_add1(g, &dg_op_cp_seq_permute, &a, &x, 1, NULL);
}

static int adj_perm(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    din[0] = perm_node(g, dout[0], n->attrs.i[0], !n->attrs.i[1], n->attrs.i[2]);
    return g->status;
}

/* A permutation within the dim: any layout whose dim is whole. */
static int shard_perm(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                      dg_attrs *attrs) {
    (void)g;
    (void)n;
    if (dg_layout_dim_split(&in[0], (int)attrs->i[2])) return DG_SHARD_CANNOT;
    out[0] = in[0];
    return DG_OK;
}

const dg_op_def dg_op_cp_seq_permute = {
    .name = "cp_seq_permute", .min_inputs = 1, .max_inputs = 1, .n_outputs = 1,
    .iattr_names = {"cp", "inverse", "dim"},
    .infer = infer_perm, .cost = cost_perm, .adjoint = adj_perm, .kernel = k_perm, .shard = shard_perm,
    .any_dtype = 1, /* moves elements by their size */
};

/* [B, 2c, H, D] this rank's chunks of all heads -> [B, S, H/cp, D] in sequence order. */
static int to_heads(dg_graph *g, int x, int cp) {
    return perm_node(g, dg_all_to_all(g, x, DG_AXIS_CP, cp, 2, 1), cp, 0, 1);
}

int dg_ulysses_attention(dg_graph *g, int q, int k, int v, int cp, const dg_attn_opts *opt, int *lse_out) {
    int lse = -1;
    dg_attn_opts in = *opt;
    in.causal = 1;
    in.softmax = DG_ATTN_SOFTMAX_VANILLA;
    in.sink = -1;
    if (in.dropout > 0) { /* this rank's heads: part cp_rank of cp of the node's */
        int coord = dg_mesh_coord_input(g, DG_AXIS_CP);
        int64_t heads = q >= 0 && q < g->n_tensors ? g->tensors[q].shape[2] / cp : 0;
        in.key = coord < 0 ? -1 : dg_attn_key(g, opt->key, coord, heads);
    }
    int o = dg_attention_opt(g, to_heads(g, q, cp), to_heads(g, k, cp), to_heads(g, v, cp), &in, &lse);
    o = dg_all_to_all(g, perm_node(g, o, cp, 1, 1), DG_AXIS_CP, cp, 1, 2);
    /* lse [B, H/cp, S] -> [B, H, 2c] */
    if (lse_out) *lse_out = o < 0 ? -1 : dg_all_to_all(g, perm_node(g, lse, cp, 1, 2), DG_AXIS_CP, cp, 2, 1);
    return o;
}
