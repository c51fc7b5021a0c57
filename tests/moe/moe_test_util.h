/* moe_test_util.h — helpers shared by the MoE op tests (header-only, static). */
#ifndef MOE_TEST_UTIL_H
#define MOE_TEST_UTIL_H

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "dg_autodiff.h"
#include "dg_exec_serial.h"
#include "dg_gradcheck.h"
#include "dg_op_basic.h"

/* Logits [T, E] with clear margins: row t is a random permutation of the
 * levels spread * (e - E/2), plus noise below spread/4. Adjacent values
 * differ by at least spread/2, so a +-eps finite-difference step (eps <<
 * spread/4) never changes a top-k selection. */
static inline void moe_fill_margin_logits(dg_test_rng *r, float *z, int64_t T, int64_t E,
                                          float spread) {
    int perm[256];
    for (int64_t t = 0; t < T; t++) {
        for (int e = 0; e < E; e++) perm[e] = e;
        for (int e = (int)E - 1; e > 0; e--) {
            int j = (int)(dg_test_rng_next(r) % (uint64_t)(e + 1));
            int tmp = perm[e];
            perm[e] = perm[j];
            perm[j] = tmp;
        }
        for (int64_t e = 0; e < E; e++)
            z[t * E + e] = spread * ((float)perm[e] - 0.5f * (float)E) +
                           0.25f * spread * (float)dg_test_rng_uniform(r);
    }
}

/* Build the backward of sum(out * r) for bitwise comparisons. Returns the
 * loss id or -1. */
static inline int moe_add_backward(dg_graph *g, int out) {
    const dg_tensor *ot = &g->tensors[out];
    int r = dg_input_new(g, "r", DG_F32, ot->ndim, ot->shape);
    int loss = dg_sum(g, dg_mul(g, out, r));
    dg_err err = {{0}};
    if (loss < 0 || dg_autodiff(g, loss, dg_ops_autodiff(), NULL, &err) != DG_OK) {
        fprintf(stderr, "autodiff failed: %s %s\n", err.msg, g->err.msg);
        return -1;
    }
    return loss;
}

/* Run g with 1 thread (NULL team) and with 2 and 3 threads on the same
 * leaves; return the number of produced tensors whose bytes differ. The
 * caller has filled the leaves of b. */
static inline int moe_threads_bitwise(const dg_graph *g, dg_buffers *b) {
    dg_err err = {{0}};
    if (dg_run_serial(g, NULL, b, NULL, &err) != DG_OK) {
        fprintf(stderr, "run failed: %s\n", err.msg);
        return 1;
    }
    void **ref = dg_calloc((size_t)g->n_tensors, sizeof(void *));
    for (int t = 0; t < g->n_tensors; t++) {
        if (g->tensors[t].producer < 0) continue;
        size_t n = dg_tensor_bytes(&g->tensors[t]);
        ref[t] = dg_malloc(n ? n : 1);
        memcpy(ref[t], b->ptr[t], n);
        memset(b->ptr[t], 0x7f, n); /* a kernel that skips an element shows up */
    }
    int diffs = 0;
    for (int nth = 2; nth <= 3; nth++) {
        dg_test_team *tt = dg_test_team_new(nth);
        if (dg_run_serial(g, NULL, b, dg_test_team_get(tt), &err) != DG_OK) {
            fprintf(stderr, "run (%d threads) failed: %s\n", nth, err.msg);
            diffs++;
        }
        dg_test_team_free(tt);
        for (int t = 0; t < g->n_tensors; t++) {
            if (!ref[t]) continue;
            if (memcmp(ref[t], b->ptr[t], dg_tensor_bytes(&g->tensors[t])) != 0) {
                fprintf(stderr, "tensor '%s' differs with %d threads\n", g->tensors[t].name, nth);
                diffs++;
            }
        }
    }
    for (int t = 0; t < g->n_tensors; t++) dg_free(ref[t]);
    dg_free(ref);
    return diffs;
}

/* Fill every f32 leaf of g with seeded normals (like dg_gradcheck). */
static inline void moe_fill_leaves(const dg_graph *g, dg_buffers *b, uint64_t seed) {
    dg_test_rng r = {seed};
    for (int t = 0; t < g->n_tensors; t++) {
        const dg_tensor *x = &g->tensors[t];
        if (x->producer >= 0 || x->dtype != DG_F32) continue;
        dg_test_fill_normal(&r, b->ptr[t], dg_tensor_numel(x), 1.0);
    }
}

static inline bool moe_close(double a, double b, double rtol, double atol) {
    return fabs(a - b) <= atol + rtol * fmax(fabs(a), fabs(b));
}

#endif /* MOE_TEST_UTIL_H */
