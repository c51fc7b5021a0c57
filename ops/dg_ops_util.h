/* dg_ops_util.h — small helpers shared by op definitions (not public API). */
#ifndef DG_OPS_UTIL_H
#define DG_OPS_UTIL_H

#include <string.h>

#include "dg_op.h"

/* Shortcuts inside infer/adjoint/kernel callbacks. */
#define DG_IN(g, n, i) (&(g)->tensors[(n)->in[i]])
#define DG_OUT(g, n, j) (&(g)->tensors[(n)->out[j]])

static inline int dg_same_shape(const dg_tensor *a, const dg_tensor *b) {
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    return 1;
}

/* Product of all dimensions but the last ("rows"), and the last ("cols"). */
static inline int64_t dg_rows(const dg_tensor *t) {
    int64_t r = 1;
    for (int i = 0; i + 1 < t->ndim; i++) r *= t->shape[i];
    return r;
}
static inline int64_t dg_cols(const dg_tensor *t) { return t->ndim ? t->shape[t->ndim - 1] : 1; }

/* Whether a tensor of dtype `have` serves where an op asks for `want`. */
static inline int dg_dtype_fits(dg_dtype have, dg_dtype want) {
    return have == want || (want == DG_F32 && dg_dtype_is_float(have));
}

/* Fail an infer() call: `return DG_INFER_FAIL(err, "expected f32, got %s", ...)`. */
#define DG_INFER_FAIL(err, ...) dg_err_set((err), DG_EINPUT, __VA_ARGS__)

/* Require input i to have dtype dt; f32 means floating: an f32, bf16 or f16
 * tensor (ops compute in f32 whatever the storage: dg_op_infer in dg_op.h). */
#define DG_INFER_DTYPE(g, n, i, dt, err)                                                   \
    do {                                                                                   \
        if (!dg_dtype_fits(DG_IN(g, n, i)->dtype, (dt)))                                   \
            return DG_INFER_FAIL(err, "rule 'dtype' broken: input %d ('%s') is %s, expected %s", \
                                 (i), DG_IN(g, n, i)->name, dg_dtype_name(DG_IN(g, n, i)->dtype), \
                                 dg_dtype_name(dt));                                        \
    } while (0)

/* Start an attrs record: dg_attrs a = dg_attrs_zero(); */
static inline dg_attrs dg_attrs_zero(void) {
    dg_attrs a;
    memset(&a, 0, sizeof a);
    return a;
}

/* Add a node with inputs and get its single output (or -1). */
static inline int dg_add1(dg_graph *g, const dg_op_def *op, const dg_attrs *a, const int *in,
                          int n_in, const char *name) {
    return dg_graph_add(g, op, a, in, n_in, NULL, name);
}

#endif /* DG_OPS_UTIL_H */
