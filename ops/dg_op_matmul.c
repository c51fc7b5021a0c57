/* dg_op_matmul.c — matmul over OpenBLAS, with its adjoint. */
#include "dg_op_matmul.h"

#include "dg_cpu_gemm.h"
#include "dg_op_shard.h"
#include "dg_ops_util.h"

/* op(a) is [M, K], op(b) is [K, N]. */
static void mm_dims(const dg_tensor *a, const dg_tensor *b, int ta, int tb, int64_t *M,
                    int64_t *K, int64_t *Kb, int64_t *N) {
    int64_t ar = dg_rows(a), ac = dg_cols(a), br = dg_rows(b), bc = dg_cols(b);
    *M = ta ? ac : ar;
    *K = ta ? ar : ac;
    *Kb = tb ? bc : br;
    *N = tb ? br : bc;
}

static int infer_matmul(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    DG_INFER_DTYPE(g, n, 0, DG_F32, err);
    DG_INFER_DTYPE(g, n, 1, DG_F32, err);
    const dg_tensor *a = DG_IN(g, n, 0), *b = DG_IN(g, n, 1);
    if (a->ndim < 2 || b->ndim < 2)
        return DG_INFER_FAIL(err, "rule 'shape' broken: inputs must have at least 2 dims");
    int ta = (int)n->attrs.i[0], tb = (int)n->attrs.i[1];
    int64_t M, K, Kb, N;
    mm_dims(a, b, ta, tb, &M, &K, &Kb, &N);
    char sa[64], sb[64];
    if (K != Kb)
        return DG_INFER_FAIL(err, "rule 'shape' broken: inner dims differ: %s%s x %s%s",
                             dg_shape_str(a, sa), ta ? "^T" : "", dg_shape_str(b, sb),
                             tb ? "^T" : "");
    if (!ta && a->ndim > 2) {
        dg_desc_like(o, a);
        o->shape[a->ndim - 1] = N;
    } else {
        dg_desc_set(o, DG_F32, 2, (int64_t[]){M, N});
    }
    return DG_OK;
}

static void cost_matmul(const dg_graph *g, const dg_node *n, dg_cost *c) {
    int64_t M, K, Kb, N;
    mm_dims(DG_IN(g, n, 0), DG_IN(g, n, 1), (int)n->attrs.i[0], (int)n->attrs.i[1], &M, &K, &Kb, &N);
    c->flops = 2.0 * (double)M * (double)N * (double)K;
    c->bytes = 4.0 * ((double)M * K + (double)K * N + (double)M * N);
}

static int k_matmul(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                    void *const *out) {
    const dg_tensor *a = DG_IN(g, n, 0), *b = DG_IN(g, n, 1);
    int ta = (int)n->attrs.i[0], tb = (int)n->attrs.i[1];
    int64_t M, K, Kb, N;
    mm_dims(a, b, ta, tb, &M, &K, &Kb, &N);
    dg_cpu_sgemm(e->team, ta, tb, M, N, K, 1.0f, in[0], dg_cols(a), in[1], dg_cols(b), 0.0f,
                 out[0], N);
    return DG_OK;
}

/* C = op(A) op(B). With A' = op(A), B' = op(B):
 *   dA' = dC B'^T, dB' = A'^T dC; and dA = dA' (or its transpose when ta). */
static int adj_matmul(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    int a = n->in[0], b = n->in[1], dc = dout[0];
    int ta = (int)n->attrs.i[0], tb = (int)n->attrs.i[1];
    if (g->tensors[a].requires_grad) {
        /* ta=0: dA = dC op(B)^T;  ta=1: dA = op(B) dC^T */
        int da = ta ? dg_matmul(g, b, dc, tb, 1) : dg_matmul(g, dc, b, 0, !tb);
        /* dA must have a's shape; a 2-D result for an N-D a is reshaped by
         * construction only when ta=0 (dc keeps a's leading dims). */
        din[0] = da;
    }
    if (g->tensors[b].requires_grad) {
        /* tb=0: dB = op(A)^T dC;  tb=1: dB = dC^T op(A) */
        din[1] = tb ? dg_matmul(g, dc, a, 1, ta) : dg_matmul(g, a, dc, !ta, 0);
    }
    return g->status;
}

const dg_op_def dg_op_matmul = {
    .name = "matmul", .min_inputs = 2, .max_inputs = 2, .n_outputs = 1,
    .iattr_names = {"ta", "tb"},
    .infer = infer_matmul, .cost = cost_matmul, .adjoint = adj_matmul, .kernel = k_matmul,
    .shard = dg_shard_matmul, .traits = DG_TRAIT_LINEAR,
};

int dg_matmul(dg_graph *g, int a, int b, int ta, int tb) {
    dg_attrs at = dg_attrs_zero();
    at.i[0] = ta;
    at.i[1] = tb;
    return dg_add1(g, &dg_op_matmul, &at, (int[]){a, b}, 2, NULL);
}

int dg_linear(dg_graph *g, int x, int w) { return dg_matmul(g, x, w, 0, 1); }
