/* dg_ep_sort.c — chunk sorting, count sums and row chunking ops (see dg_ep_sort.h). */
#include "dg_ep_sort.h"

#include "dg_cpu_ep.h"
#include "dg_ops_util.h"

static size_t row_bytes(const dg_tensor *t) {
    return t->shape[0] > 0 ? dg_tensor_bytes(t) / (size_t)t->shape[0] : 0;
}

static int check_grid(const dg_tensor *c, int64_t P, dg_err *err) {
    char s[64];
    if (P < 1 || c->dtype != DG_I32 || c->ndim != 1 || c->shape[0] % P != 0)
        return DG_INFER_FAIL(err, "rule 'shape' broken: counts '%s' is %s %s, expected i32 [P*G] "
                                  "with P = %lld",
                             c->name, dg_dtype_name(c->dtype), dg_shape_str(c, s), (long long)P);
    return DG_OK;
}

/* ---- sort chunks ---------------------------------------------------------------- */

static int infer_sort(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    const dg_tensor *x = DG_IN(g, n, 0);
    DG_TRY(check_grid(DG_IN(g, n, 1), n->attrs.i[0], err));
    if (x->ndim < 1) return DG_INFER_FAIL(err, "rule 'shape' broken: x '%s' has no rows", x->name);
    dg_desc_like(o, x);
    return DG_OK;
}

static void cost_sort(const dg_graph *g, const dg_node *n, dg_cost *c) {
    c->flops = 0;
    c->bytes = 2.0 * (double)dg_tensor_bytes(DG_IN(g, n, 0));
}

static int k_sort(const dg_exec_env *env, const dg_graph *g, const dg_node *n, void *const *in,
                  void *const *out) {
    (void)env;
    const dg_tensor *x = DG_IN(g, n, 0);
    int64_t P = n->attrs.i[0], G = DG_IN(g, n, 1)->shape[0] / P;
    return dg_cpu_ep_sort_chunks(in[0], in[1], P, G, (int)n->attrs.i[1], x->shape[0], row_bytes(x),
                                 out[0]) == 0
               ? DG_OK
               : DG_EINPUT;
}

static int adj_sort(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    if (dout[0] >= 0)
        din[0] = dg_moe_ep_sort_chunks(g, dout[0], n->in[1], (int)n->attrs.i[0], !n->attrs.i[1]);
    return g->status;
}

const dg_op_def dg_op_moe_ep_sort_chunks = {
    .name = "moe_ep_sort_chunks", .min_inputs = 2, .max_inputs = 2, .n_outputs = 1,
    .iattr_names = {"num_ranks", "inverse", NULL},
    .infer = infer_sort, .cost = cost_sort, .adjoint = adj_sort, .kernel = k_sort,
    .any_dtype = 1, /* moves elements by their size */
};

int dg_moe_ep_sort_chunks(dg_graph *g, int x, int counts, int P, int inverse) {
    dg_attrs a = dg_attrs_zero();
    a.i[0] = P;
    a.i[1] = inverse ? 1 : 0;
    return dg_add1(g, &dg_op_moe_ep_sort_chunks, &a, (int[]){x, counts}, 2,
                   inverse ? "moe_ep_unsort" : "moe_ep_sort");
}

/* ---- count sums ----------------------------------------------------------------- */

static int infer_count_sum(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    const dg_tensor *c = DG_IN(g, n, 0);
    int64_t P = n->attrs.i[0];
    DG_TRY(check_grid(c, P, err));
    dg_desc_set(o, DG_I32, 1, (int64_t[]){n->attrs.i[1] ? c->shape[0] / P : P});
    return DG_OK;
}

static int k_count_sum(const dg_exec_env *env, const dg_graph *g, const dg_node *n,
                       void *const *in, void *const *out) {
    (void)env;
    int64_t P = n->attrs.i[0], G = DG_IN(g, n, 0)->shape[0] / P;
    dg_cpu_ep_count_sum(in[0], P, G, (int)n->attrs.i[1], out[0]);
    return DG_OK;
}

const dg_op_def dg_op_moe_ep_count_sum = {
    .name = "moe_ep_count_sum", .min_inputs = 1, .max_inputs = 1, .n_outputs = 1,
    .iattr_names = {"num_ranks", "over_ranks", NULL},
    .infer = infer_count_sum, .kernel = k_count_sum,
};

int dg_moe_ep_count_sum(dg_graph *g, int counts, int P, int over_ranks) {
    dg_attrs a = dg_attrs_zero();
    a.i[0] = P;
    a.i[1] = over_ranks ? 1 : 0;
    return dg_add1(g, &dg_op_moe_ep_count_sum, &a, &counts, 1, "moe_ep_count_sum");
}

/* ---- transpose ----------------------------------------------------------------- */

static int infer_transpose(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    const dg_tensor *x = DG_IN(g, n, 0);
    int64_t A = n->attrs.i[0], B = n->attrs.i[1];
    if (A < 1 || B < 1 || x->ndim != 1 || x->shape[0] % (A * B) != 0)
        return DG_INFER_FAIL(err, "rule 'shape' broken: '%s' must be 1-D with a multiple of A*B = "
                                  "%lld elements",
                             x->name, (long long)(A * B));
    dg_desc_like(o, x);
    return DG_OK;
}

static int k_transpose(const dg_exec_env *env, const dg_graph *g, const dg_node *n,
                       void *const *in, void *const *out) {
    (void)env;
    const dg_tensor *x = DG_IN(g, n, 0);
    int64_t A = n->attrs.i[0], B = n->attrs.i[1];
    dg_cpu_ep_transpose(in[0], A, B, x->shape[0] / (A * B), dg_dtype_size(x->dtype), out[0]);
    return DG_OK;
}

const dg_op_def dg_op_moe_ep_transpose = {
    .name = "moe_ep_transpose", .min_inputs = 1, .max_inputs = 1, .n_outputs = 1,
    .iattr_names = {"a", "b", NULL},
    .infer = infer_transpose, .kernel = k_transpose,
    .any_dtype = 1, /* moves elements by their size */
};

int dg_moe_ep_transpose(dg_graph *g, int x, int A, int B) {
    dg_attrs a = dg_attrs_zero();
    a.i[0] = A;
    a.i[1] = B;
    return dg_add1(g, &dg_op_moe_ep_transpose, &a, &x, 1, "moe_ep_transpose");
}

/* ---- split and concat rows -------------------------------------------------------- */

static int infer_split(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    const dg_tensor *x = DG_IN(g, n, 0);
    int C = n->op->n_outputs;
    if (x->ndim < 1 || x->shape[0] % C != 0)
        return DG_INFER_FAIL(err, "rule 'shape' broken: '%s' has %lld rows, not divisible into %d "
                                  "chunks",
                             x->name, (long long)(x->ndim ? x->shape[0] : 0), C);
    for (int c = 0; c < C; c++) {
        dg_desc_like(&o[c], x);
        o[c].shape[0] = x->shape[0] / C;
    }
    return DG_OK;
}

static void cost_copy(const dg_graph *g, const dg_node *n, dg_cost *c) {
    c->flops = 0;
    c->bytes = 2.0 * (double)dg_tensor_bytes(DG_OUT(g, n, 0)) * (double)n->n_out;
}

static int k_split(const dg_exec_env *env, const dg_graph *g, const dg_node *n, void *const *in,
                   void *const *out) {
    (void)env;
    const dg_tensor *o = DG_OUT(g, n, 0);
    for (int c = 0; c < n->n_out; c++)
        dg_cpu_ep_copy_rows(in[0], c * o->shape[0], o->shape[0], row_bytes(o), out[c]);
    return DG_OK;
}

static int adj_split(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    for (int c = 0; c < n->n_out; c++)
        if (dout[c] < 0) { /* every chunk of a token batch reaches the loss in the EP block */
            dg_graph_fail(g, "moe_ep_split_rows: chunk %d of '%s' has no gradient", c,
                          DG_IN(g, n, 0)->name);
            return g->status;
        }
    din[0] = dg_moe_ep_concat_rows(g, dout, n->n_out);
    return g->status;
}

#define SPLIT_DEF(C)                                                                      \
    {.name = "moe_ep_split_rows", .min_inputs = 1, .max_inputs = 1, .n_outputs = (C),      \
     .infer = infer_split, .cost = cost_copy, .adjoint = adj_split, .kernel = k_split,      \
     .any_dtype = 1 /* moves rows by their size */}
const dg_op_def dg_op_moe_ep_split_rows[DG_EP_MAX_CHUNKS + 1] = {
    SPLIT_DEF(1), SPLIT_DEF(1), SPLIT_DEF(2), SPLIT_DEF(3), SPLIT_DEF(4)};

int dg_moe_ep_split_rows(dg_graph *g, int x, int C, int *out) {
    if (g->status != DG_OK) return g->status;
    if (C == 1) {
        out[0] = x;
        return DG_OK;
    }
    if (C < 2 || C > DG_EP_MAX_CHUNKS) {
        dg_graph_fail(g, "moe_ep_split_rows: %d chunks, expected 1..%d", C, DG_EP_MAX_CHUNKS);
        return g->status;
    }
    dg_graph_add(g, &dg_op_moe_ep_split_rows[C], NULL, &x, 1, out, "moe_ep_split");
    return g->status;
}

static int infer_concat(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    const dg_tensor *x0 = DG_IN(g, n, 0);
    char a[64], b[64];
    if (x0->ndim < 1) return DG_INFER_FAIL(err, "rule 'shape' broken: '%s' has no rows", x0->name);
    dg_desc_like(o, x0);
    for (int i = 1; i < n->n_in; i++) {
        const dg_tensor *x = DG_IN(g, n, i);
        int same = x->dtype == x0->dtype && x->ndim == x0->ndim;
        for (int d = 1; same && d < x->ndim; d++) same = x->shape[d] == x0->shape[d];
        if (!same)
            return DG_INFER_FAIL(err, "rule 'shape' broken: input %d %s %s differs from input 0 %s %s "
                                      "beyond the rows",
                                 i, dg_dtype_name(x->dtype), dg_shape_str(x, a),
                                 dg_dtype_name(x0->dtype), dg_shape_str(x0, b));
        o->shape[0] += x->shape[0];
    }
    return DG_OK;
}

static int k_concat(const dg_exec_env *env, const dg_graph *g, const dg_node *n, void *const *in,
                    void *const *out) {
    (void)env;
    int64_t r = 0;
    size_t row = row_bytes(DG_OUT(g, n, 0));
    for (int i = 0; i < n->n_in; i++) {
        int64_t rows = DG_IN(g, n, i)->shape[0];
        dg_cpu_ep_copy_rows(in[i], 0, rows, row, (char *)out[0] + (size_t)r * row);
        r += rows;
    }
    return DG_OK;
}

/* The concat's inputs are equal chunks in the EP block; unequal ones would
 * need a general slice op, which no caller needs yet. */
static int adj_concat(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    if (dout[0] < 0) return DG_OK;
    int C = n->n_in;
    for (int i = 1; i < C; i++)
        if (DG_IN(g, n, i)->shape[0] != DG_IN(g, n, 0)->shape[0]) {
            dg_graph_fail(g, "moe_ep_concat_rows: adjoint needs equal chunks");
            return g->status;
        }
    int parts[DG_EP_MAX_CHUNKS];
    DG_TRY(dg_moe_ep_split_rows(g, dout[0], C, parts));
    for (int i = 0; i < C; i++) din[i] = parts[i];
    return g->status;
}

const dg_op_def dg_op_moe_ep_concat_rows = {
    .name = "moe_ep_concat_rows", .min_inputs = 1, .max_inputs = DG_MAX_INPUTS, .n_outputs = 1,
    .infer = infer_concat, .cost = cost_copy, .adjoint = adj_concat, .kernel = k_concat,
    .any_dtype = 1, /* moves elements by their size */
};

int dg_moe_ep_concat_rows(dg_graph *g, const int *xs, int n) {
    if (n == 1) return xs[0];
    return dg_add1(g, &dg_op_moe_ep_concat_rows, NULL, xs, n, "moe_ep_concat");
}

/* ---- local indices -------------------------------------------------------------------- */

static int infer_local(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    const dg_tensor *ix = DG_IN(g, n, 0), *r = DG_IN(g, n, 1);
    char s[64];
    if (ix->dtype != DG_I32 || ix->ndim != 2)
        return DG_INFER_FAIL(err, "rule 'shape' broken: indices '%s' is %s %s, expected i32 [N, k]",
                             ix->name, dg_dtype_name(ix->dtype), dg_shape_str(ix, s));
    if (r->dtype != DG_I32 || dg_tensor_numel(r) != 1)
        return DG_INFER_FAIL(err, "rule 'shape' broken: ep_rank '%s' must be one i32", r->name);
    if (n->attrs.i[0] < 1 || n->attrs.i[1] < 1)
        return DG_INFER_FAIL(err, "rule 'attrs' broken: experts per rank %lld and ranks %lld must "
                                  "be >= 1",
                             (long long)n->attrs.i[0], (long long)n->attrs.i[1]);
    dg_desc_like(o, ix);
    return DG_OK;
}

static int k_local(const dg_exec_env *env, const dg_graph *g, const dg_node *n, void *const *in,
                   void *const *out) {
    (void)env;
    const int32_t *ix = in[0];
    int32_t *o = out[0];
    int64_t G = n->attrs.i[0], r = *(const int32_t *)in[1], lo = r * G;
    if (r < 0 || r >= n->attrs.i[1]) return DG_EINPUT; /* ep_rank not filled in, or wrong */
    for (int64_t i = 0; i < dg_tensor_numel(DG_IN(g, n, 0)); i++)
        o[i] = ix[i] >= lo && ix[i] < lo + G ? (int32_t)(ix[i] - lo) : -1;
    return DG_OK;
}

const dg_op_def dg_op_moe_ep_local_indices = {
    .name = "moe_ep_local_indices", .min_inputs = 2, .max_inputs = 2, .n_outputs = 1,
    .iattr_names = {"experts_per_rank", "num_ranks", NULL},
    .infer = infer_local, .kernel = k_local,
};

int dg_moe_ep_local_indices(dg_graph *g, int indices, int ep_rank, int G, int P) {
    dg_attrs a = dg_attrs_zero();
    a.i[0] = G;
    a.i[1] = P;
    return dg_add1(g, &dg_op_moe_ep_local_indices, &a, (int[]){indices, ep_rank}, 2,
                   "moe_ep_local_indices");
}
