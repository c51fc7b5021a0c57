/* test_moe_grouped_gemm.c — per-expert GEMMs over row-grouped tokens: values
 * against a naive double loop (with experts that receive no tokens and
 * padding rows past sum(counts)), gradients w.r.t. x and w for both weight
 * layouts, the weight-gradient op's own gradient, an expert-MLP chain
 * (permute -> fc1 -> scale -> fc2 -> unpermute), and 1 vs 2 vs 3 threads
 * bitwise for forward and backward. Tolerances: dg_gradcheck defaults with
 * atol 1e-4; values 1e-5 relative. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "dg_grouped_gemm.h"
#include "dg_permute.h"
#include "moe_test_util.h"

static void set_counts(int32_t *c, const int *v, int E) {
    for (int e = 0; e < E; e++) c[e] = v[e];
}

static void test_grouped_gemm_values(void **s) {
    (void)s;
    enum { N = 150, E = 5, K = 9, M = 7 };
    const int counts[E] = {70, 0, 3, 66, 0}; /* 139 rows, 11 padding */
    for (int tw = 0; tw < 2; tw++) {
        dg_graph *g = dg_graph_new("gg");
        int x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(N, K));
        int c = dg_input_new(g, "counts", DG_I32, 1, DG_SHAPE(E));
        int w = tw ? dg_input_new(g, "w", DG_F32, 3, DG_SHAPE(E, M, K))
                   : dg_input_new(g, "w", DG_F32, 3, DG_SHAPE(E, K, M));
        int dy = dg_input_new(g, "dy", DG_F32, 2, DG_SHAPE(N, M));
        int y = dg_grouped_gemm(g, x, c, w, tw);
        int dw = dg_grouped_gemm_wgrad(g, dy, x, c); /* [E, M, K] */
        assert_true(y >= 0 && dw >= 0);
        dg_buffers b;
        dg_buffers_alloc(g, &b);
        moe_fill_leaves(g, &b, 8);
        set_counts(b.ptr[c], counts, E);
        dg_err err = {{0}};
        assert_int_equal(dg_run_serial(g, NULL, &b, NULL, &err), DG_OK);
        const float *X = b.ptr[x], *W = b.ptr[w], *Y = b.ptr[y], *DY = b.ptr[dy], *DW = b.ptr[dw];
        int off = 0;
        for (int e = 0; e < E; e++) {
            for (int r = off; r < off + counts[e]; r++)
                for (int m = 0; m < M; m++) {
                    double ref = 0;
                    for (int k = 0; k < K; k++)
                        ref += (double)X[r * K + k] * (tw ? W[(e * M + m) * K + k] : W[(e * K + k) * M + m]);
                    assert_true(moe_close(Y[r * M + m], ref, 1e-5, 1e-6));
                }
            for (int m = 0; m < M; m++)
                for (int k = 0; k < K; k++) {
                    double ref = 0;
                    for (int r = off; r < off + counts[e]; r++) ref += (double)DY[r * M + m] * X[r * K + k];
                    assert_true(moe_close(DW[(e * M + m) * K + k], ref, 1e-5, 1e-6));
                }
            off += counts[e];
        }
        for (int r = off; r < N; r++)
            for (int m = 0; m < M; m++) assert_true(Y[r * M + m] == 0.0f);
        /* counts summing past N are refused at run time */
        int32_t *C = b.ptr[c];
        C[1] = 20;
        assert_int_not_equal(dg_run_serial(g, NULL, &b, NULL, &err), DG_OK);
        dg_buffers_free(&b);
        dg_graph_free(g);
    }
}

typedef struct gg_ctx {
    int tw, which; /* which: 0 grouped_gemm, 1 wgrad, 2 expert MLP chain */
    int counts;    /* tensor id, set by build */
    int ix;
} gg_ctx;

enum { GN = 14, GE = 4, GK = 5, GM = 6, GT = 7, GKTOP = 2 };
static const int g_counts[GE] = {5, 0, 6, 1}; /* 12 of 14 rows, expert 1 empty */

static int build_gg(dg_graph *g, void *p) {
    gg_ctx *c = p;
    c->ix = -1;
    c->counts = dg_input_new(g, "counts", DG_I32, 1, DG_SHAPE(GE));
    if (c->which == 0) {
        int x = dg_param_new(g, "x", 2, DG_SHAPE(GN, GK));
        int w = c->tw ? dg_param_new(g, "w", 3, DG_SHAPE(GE, GM, GK))
                      : dg_param_new(g, "w", 3, DG_SHAPE(GE, GK, GM));
        return dg_grouped_gemm(g, x, c->counts, w, c->tw);
    }
    if (c->which == 1) {
        int a = dg_param_new(g, "a", 2, DG_SHAPE(GN, GK));
        int b = dg_param_new(g, "b", 2, DG_SHAPE(GN, GM));
        return dg_grouped_gemm_wgrad(g, a, b, c->counts);
    }
    /* tokens -> permute -> fc1 [E, 2F, H] -> * m -> fc2 [E, H, F]... with a
     * plain element-wise factor standing in for swiglu -> unpermute */
    int x = dg_param_new(g, "x", 2, DG_SHAPE(GT, GK));
    int probs = dg_param_new(g, "probs", 2, DG_SHAPE(GT, GKTOP));
    int w1 = dg_param_new(g, "w1", 3, DG_SHAPE(GE, GM, GK));
    int w2 = dg_param_new(g, "w2", 3, DG_SHAPE(GE, GK, GM));
    c->ix = dg_input_new(g, "ix", DG_I32, 2, DG_SHAPE(GT, GKTOP));
    int m = dg_input_new(g, "m", DG_F32, 2, DG_SHAPE(GT * GKTOP, GM));
    dg_permute_out po;
    dg_moe_permute(g, x, c->ix, GE, &po);
    int h = dg_mul(g, dg_grouped_linear(g, po.x_perm, po.tokens_per_expert, w1), m);
    int y = dg_grouped_linear(g, h, po.tokens_per_expert, w2);
    return dg_moe_unpermute(g, y, probs, po.row_map);
}

static void init_gg(const dg_graph *g, dg_buffers *b, void *p) {
    (void)g;
    gg_ctx *c = p;
    set_counts(b->ptr[c->counts], g_counts, GE);
    if (c->ix >= 0) {
        int32_t *I = b->ptr[c->ix];
        /* expert 2 gets no token; token 4's second slot dropped */
        const int32_t v[GT * GKTOP] = {0, 1, 3, 0, 1, 3, 0, 3, 1, -1, 3, 1, 0, 1};
        memcpy(I, v, sizeof v);
    }
}

static void test_grouped_gemm_grad(void **s) {
    (void)s;
    dg_gradcheck_opts o = {.atol = 1e-4, .max_checks = 64};
    for (int tw = 0; tw < 2; tw++) {
        gg_ctx c = {.tw = tw, .which = 0};
        assert_int_equal(dg_gradcheck(tw ? "grouped_gemm tw=1" : "grouped_gemm tw=0", build_gg,
                                      init_gg, &c, &o),
                         0);
    }
    gg_ctx c = {.which = 1};
    assert_int_equal(dg_gradcheck("grouped_gemm_wgrad", build_gg, init_gg, &c, &o), 0);
}

static void test_expert_mlp_chain_grad(void **s) {
    (void)s;
    dg_gradcheck_opts o = {.atol = 1e-4, .max_checks = 64};
    gg_ctx c = {.which = 2};
    assert_int_equal(dg_gradcheck("expert mlp chain", build_gg, init_gg, &c, &o), 0);
}

/* Forward, data gradient and weight gradient are bitwise the same for any
 * thread count; sizes span several DG_GG_BLOCK blocks per expert. */
static void test_grouped_gemm_threads(void **s) {
    (void)s;
    enum { N = 400, E = 6, K = 48, M = 40 };
    const int counts[E] = {150, 0, 1, 130, 64, 20}; /* 365 rows */
    for (int tw = 0; tw < 2; tw++) {
        dg_graph *g = dg_graph_new("gg_threads");
        int x = dg_param_new(g, "x", 2, DG_SHAPE(N, K));
        int c = dg_input_new(g, "counts", DG_I32, 1, DG_SHAPE(E));
        int w = tw ? dg_param_new(g, "w", 3, DG_SHAPE(E, M, K)) : dg_param_new(g, "w", 3, DG_SHAPE(E, K, M));
        int y = dg_grouped_gemm(g, x, c, w, tw);
        assert_true(moe_add_backward(g, y) >= 0);
        assert_true(g->tensors[x].grad >= 0 && g->tensors[w].grad >= 0);
        dg_buffers b;
        dg_buffers_alloc(g, &b);
        moe_fill_leaves(g, &b, 17);
        set_counts(b.ptr[c], counts, E);
        assert_int_equal(moe_threads_bitwise(g, &b), 0);
        dg_buffers_free(&b);
        dg_graph_free(g);
    }
}

static void test_grouped_gemm_infer_errors(void **s) {
    (void)s;
    dg_graph *g = dg_graph_new("gg_bad");
    int x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(8, 5));
    int c = dg_input_new(g, "counts", DG_I32, 1, DG_SHAPE(3));
    int w = dg_input_new(g, "w", DG_F32, 3, DG_SHAPE(3, 4, 6));
    assert_int_equal(dg_grouped_gemm(g, x, c, w, 1), -1);
    assert_non_null(strstr(g->err.msg, "rule 'shape' broken: inner dims differ"));
    dg_graph_free(g);
    g = dg_graph_new("gg_bad2");
    x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(8, 5));
    c = dg_input_new(g, "counts", DG_I32, 1, DG_SHAPE(2));
    w = dg_input_new(g, "w", DG_F32, 3, DG_SHAPE(3, 4, 5));
    assert_int_equal(dg_grouped_gemm(g, x, c, w, 1), -1);
    assert_non_null(strstr(g->err.msg, "tokens_per_expert"));
    dg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grouped_gemm_values),   cmocka_unit_test(test_grouped_gemm_grad),
        cmocka_unit_test(test_expert_mlp_chain_grad), cmocka_unit_test(test_grouped_gemm_threads),
        cmocka_unit_test(test_grouped_gemm_infer_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
