/* test_moe_permute.c — token permutation: the grouping, counts and row map
 * against a naive reference, unpermute values, gradients of the
 * permute -> (per-row scaling) -> unpermute chain w.r.t. x and probs, and
 * 1 vs 2 vs 3 threads bitwise. Indices are fixed inputs here (no top-k), so
 * gradchecks have no selection boundary to cross. Tolerances: dg_gradcheck
 * defaults with atol 1e-4. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "dg_permute.h"
#include "moe_test_util.h"

/* Indices [T, k] over E experts: expert `empty` never chosen; every 5th
 * slot dropped (-1) when `drops`. Distinct experts within a token. */
static void fill_indices(int32_t *ix, int T, int k, int E, int empty, int drops) {
    for (int t = 0; t < T; t++) {
        int e = (t * 7 + 3) % E;
        for (int j = 0; j < k; j++) {
            while (e == empty) e = (e + 1) % E;
            ix[t * k + j] = drops && (t * k + j) % 5 == 2 ? -1 : e;
            e = (e + 1) % E;
            if (e == empty) e = (e + 1) % E;
        }
    }
}

static void test_permute_values(void **s) {
    (void)s;
    enum { T = 13, K = 2, E = 5, H = 3 };
    for (int drops = 0; drops < 2; drops++) {
        dg_graph *g = dg_graph_new("perm");
        int x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(T, H));
        int ix = dg_input_new(g, "ix", DG_I32, 2, DG_SHAPE(T, K));
        int p = dg_input_new(g, "probs", DG_F32, 2, DG_SHAPE(T, K));
        dg_permute_out po;
        assert_true(dg_moe_permute(g, x, ix, E, &po) >= 0);
        int y = dg_moe_unpermute(g, po.x_perm, p, po.row_map);
        assert_true(y >= 0);
        assert_int_equal(g->tensors[po.x_perm].shape[0], T * K);
        dg_buffers b;
        dg_buffers_alloc(g, &b);
        moe_fill_leaves(g, &b, 1);
        int32_t *I = b.ptr[ix];
        fill_indices(I, T, K, E, 2, drops);
        dg_err err = {{0}};
        assert_int_equal(dg_run_serial(g, NULL, &b, NULL, &err), DG_OK);

        /* reference: for e ascending, for t ascending, for j: slot routed to e */
        const float *X = b.ptr[x], *XP = b.ptr[po.x_perm], *P = b.ptr[p], *Y = b.ptr[y];
        const int32_t *cnt = b.ptr[po.tokens_per_expert], *map = b.ptr[po.row_map];
        int r = 0;
        for (int e = 0; e < E; e++) {
            int n = 0;
            for (int t = 0; t < T; t++)
                for (int j = 0; j < K; j++) {
                    if (I[t * K + j] != e) continue;
                    assert_int_equal(map[r], t * K + j);
                    assert_memory_equal(XP + r * H, X + t * H, sizeof(float) * H);
                    r++;
                    n++;
                }
            assert_int_equal(cnt[e], n);
        }
        assert_int_equal(cnt[2], 0);
        for (; r < T * K; r++) {
            assert_int_equal(map[r], -1);
            for (int h = 0; h < H; h++) assert_true(XP[r * H + h] == 0.0f);
        }
        /* unpermute: y[t] = sum_j p[t,j] x[t] over kept slots */
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++) {
                double want = 0;
                for (int j = 0; j < K; j++)
                    if (I[t * K + j] >= 0) want += (double)P[t * K + j] * X[t * H + h];
                assert_true(moe_close(Y[t * H + h], want, 1e-6, 1e-7));
            }
        dg_buffers_free(&b);
        dg_graph_free(g);
    }
}

typedef struct pc_ctx {
    int T, K, E, H, drops;
    int ix;
} pc_ctx;

static int build_chain(dg_graph *g, void *p) {
    pc_ctx *c = p;
    int x = dg_param_new(g, "x", 2, DG_SHAPE(c->T, c->H));
    int probs = dg_param_new(g, "probs", 2, DG_SHAPE(c->T, c->K));
    c->ix = dg_input_new(g, "ix", DG_I32, 2, DG_SHAPE(c->T, c->K));
    /* a fixed per-row factor, so each permuted copy carries a different
     * value back and the scatter-add must route it to the right token */
    int m = dg_input_new(g, "m", DG_F32, 2, DG_SHAPE(c->T * c->K, c->H));
    dg_permute_out po;
    dg_moe_permute(g, x, c->ix, c->E, &po);
    int yp = dg_mul(g, po.x_perm, m);
    return dg_moe_unpermute(g, yp, probs, po.row_map);
}

static void init_chain(const dg_graph *g, dg_buffers *b, void *p) {
    (void)g;
    pc_ctx *c = p;
    fill_indices(b->ptr[c->ix], c->T, c->K, c->E, 1, c->drops);
}

static void test_permute_chain_grad(void **s) {
    (void)s;
    dg_gradcheck_opts o = {.atol = 1e-4, .max_checks = 64};
    for (int drops = 0; drops < 2; drops++) {
        pc_ctx c = {.T = 9, .K = 3, .E = 5, .H = 4, .drops = drops};
        assert_int_equal(dg_gradcheck(drops ? "permute chain (drops)" : "permute chain",
                                      build_chain, init_chain, &c, &o),
                         0);
    }
}

/* The backward ops themselves are differentiable (gather <-> unpermute). */
static int build_gather(dg_graph *g, void *p) {
    pc_ctx *c = p;
    int x = dg_param_new(g, "x", 2, DG_SHAPE(c->T, c->H));
    int probs = dg_input_new(g, "probs", DG_F32, 2, DG_SHAPE(c->T, c->K));
    c->ix = dg_input_new(g, "ix", DG_I32, 2, DG_SHAPE(c->T, c->K));
    dg_permute_out po;
    dg_moe_permute(g, dg_scale(g, x, 1.0), c->ix, c->E, &po);
    int gx = dg_moe_gather(g, x, po.row_map, probs, c->K);
    return dg_mul(g, gx, po.x_perm);
}

static void test_gather_grad(void **s) {
    (void)s;
    dg_gradcheck_opts o = {.atol = 1e-4, .max_checks = 64};
    pc_ctx c = {.T = 7, .K = 2, .E = 4, .H = 3, .drops = 1};
    assert_int_equal(dg_gradcheck("gather", build_gather, init_chain, &c, &o), 0);
}

static void test_permute_threads(void **s) {
    (void)s;
    pc_ctx c = {.T = 203, .K = 2, .E = 8, .H = 33, .drops = 1};
    for (int drops = 0; drops < 2; drops++) {
        c.drops = drops;
        dg_graph *g = dg_graph_new("perm_threads");
        int out = build_chain(g, &c);
        assert_true(moe_add_backward(g, out) >= 0);
        dg_buffers b;
        dg_buffers_alloc(g, &b);
        moe_fill_leaves(g, &b, 42);
        init_chain(g, &b, &c);
        assert_int_equal(moe_threads_bitwise(g, &b), 0);
        dg_buffers_free(&b);
        dg_graph_free(g);
    }
}

/* A bad expert index is a kernel error, not a crash; bad shapes are
 * rejected at build time. */
static void test_permute_errors(void **s) {
    (void)s;
    dg_graph *g = dg_graph_new("perm_bad");
    int x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(3, 2));
    int ix = dg_input_new(g, "ix", DG_I32, 2, DG_SHAPE(3, 1));
    int bad = dg_input_new(g, "bad", DG_I32, 2, DG_SHAPE(4, 1));
    assert_true(dg_moe_permute(g, x, ix, 2, NULL) >= 0);
    dg_buffers b;
    dg_buffers_alloc(g, &b);
    int32_t *I = b.ptr[ix];
    I[0] = 0;
    I[1] = 2; /* >= E */
    I[2] = 1;
    dg_err err = {{0}};
    assert_int_not_equal(dg_run_serial(g, NULL, &b, NULL, &err), DG_OK);
    dg_buffers_free(&b);
    assert_int_equal(dg_moe_permute(g, x, bad, 2, NULL), -1);
    assert_non_null(strstr(g->err.msg, "rule 'shape' broken"));
    dg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_permute_values),  cmocka_unit_test(test_permute_chain_grad),
        cmocka_unit_test(test_gather_grad),     cmocka_unit_test(test_permute_threads),
        cmocka_unit_test(test_permute_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
