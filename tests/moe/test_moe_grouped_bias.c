/* test_moe_grouped_bias.c — the experts' biases over row-grouped tokens
 * (moe/dg_grouped_bias.h): values against a naive loop (an expert without
 * rows, padding rows past sum(counts) left as they are, the gradient's
 * per-expert row sums, zeros for the empty expert), counts past N refused
 * at run time; gradients by finite differences of the add and of a biased
 * expert MLP chain (permute -> fc1 + b1 -> GeLU / quick GeGLU with offset
 * -> fc2 + b2 -> unpermute with probs, as the EP lowering builds it); 1 vs
 * 2 vs 3 threads bitwise. Tolerances: dg_gradcheck defaults with atol 1e-4;
 * values 1e-6. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "dg_grouped_bias.h"
#include "dg_grouped_gemm.h"
#include "dg_op_glu.h"
#include "dg_ops_util.h"
#include "dg_permute.h"
#include "moe_test_util.h"

enum { N = 14, E = 4, M = 6, T = 7, K = 2, H = 5, F = 3 };
static const int g_counts[E] = {5, 0, 6, 1}; /* 12 of 14 rows, expert 1 empty */

static void set_counts(int32_t *c, const int *v, int n) {
    for (int e = 0; e < n; e++) c[e] = v[e];
}

static void test_grouped_bias_values(void **s) {
    (void)s;
    dg_graph *g = dg_graph_new("gb");
    int x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(N, M));
    int c = dg_input_new(g, "counts", DG_I32, 1, DG_SHAPE(E));
    int bias = dg_input_new(g, "b", DG_F32, 2, DG_SHAPE(E, M));
    int y = dg_grouped_bias_add(g, x, c, bias);
    int db = dg_add1(g, &dg_op_grouped_bias_grad, NULL, (int[]){x, c}, 2, NULL); /* x as dy */
    assert_true(y >= 0 && db >= 0);
    dg_buffers b;
    dg_buffers_alloc(g, &b);
    moe_fill_leaves(g, &b, 3);
    set_counts(b.ptr[c], g_counts, E);
    dg_err err = {{0}};
    assert_int_equal(dg_run_serial(g, NULL, &b, NULL, &err), DG_OK);
    const float *X = b.ptr[x], *B = b.ptr[bias], *Y = b.ptr[y], *DB = b.ptr[db];
    int off = 0;
    for (int e = 0; e < E; e++) {
        for (int m = 0; m < M; m++) {
            double sum = 0;
            for (int r = off; r < off + g_counts[e]; r++) {
                assert_true(moe_close(Y[r * M + m], (double)X[r * M + m] + B[e * M + m], 1e-6, 1e-7));
                sum += X[r * M + m];
            }
            assert_true(moe_close(DB[e * M + m], sum, 1e-6, 1e-7)); /* 0 for the empty expert */
        }
        off += g_counts[e];
    }
    for (int r = off; r < N; r++)
        for (int m = 0; m < M; m++) assert_true(Y[r * M + m] == X[r * M + m]);
    int32_t *C = b.ptr[c];
    C[1] = 20; /* past N */
    assert_int_not_equal(dg_run_serial(g, NULL, &b, NULL, &err), DG_OK);
    dg_buffers_free(&b);
    dg_graph_free(g);
}

typedef struct gb_ctx {
    int which; /* 0 the add alone, 1 chain with GeLU, 2 chain with quick GeGLU */
    int counts, ix;
} gb_ctx;

static int build_gb(dg_graph *g, void *p) {
    gb_ctx *c = p;
    c->ix = c->counts = -1;
    if (c->which == 0) {
        c->counts = dg_input_new(g, "counts", DG_I32, 1, DG_SHAPE(E));
        int x = dg_param_new(g, "x", 2, DG_SHAPE(N, M));
        int bias = dg_param_new(g, "b", 2, DG_SHAPE(E, M));
        /* nonlinear in the sum, so dx and db are not just constants */
        int y = dg_grouped_bias_add(g, x, c->counts, bias);
        return dg_mul(g, y, y);
    }
    int gated = c->which == 2, W = gated ? 2 : 1;
    int x = dg_param_new(g, "x", 2, DG_SHAPE(T, H));
    int probs = dg_param_new(g, "probs", 2, DG_SHAPE(T, K));
    int w1 = dg_param_new(g, "w1", 3, DG_SHAPE(E, W * F, H));
    int b1 = dg_param_new(g, "b1", 2, DG_SHAPE(E, W * F));
    int w2 = dg_param_new(g, "w2", 3, DG_SHAPE(E, H, F));
    int b2 = dg_param_new(g, "b2", 2, DG_SHAPE(E, H));
    c->ix = dg_input_new(g, "ix", DG_I32, 2, DG_SHAPE(T, K));
    dg_permute_out po;
    dg_moe_permute(g, x, c->ix, E, &po);
    int u = dg_grouped_bias_add(g, dg_grouped_linear(g, po.x_perm, po.tokens_per_expert, w1), po.tokens_per_expert, b1);
    int a = dg_mlp_activation(g, u, gated ? DG_MLP_QUICK_GEGLU : DG_MLP_GELU, gated ? 1.0 : 0.0, 0.0);
    int d = dg_grouped_bias_add(g, dg_grouped_linear(g, a, po.tokens_per_expert, w2), po.tokens_per_expert, b2);
    return dg_moe_unpermute(g, d, probs, po.row_map);
}

static void init_gb(const dg_graph *g, dg_buffers *b, void *p) {
    (void)g;
    gb_ctx *c = p;
    if (c->counts >= 0) set_counts(b->ptr[c->counts], g_counts, E);
    if (c->ix >= 0) {
        /* expert 2 gets no token; token 4's second slot dropped */
        const int32_t v[T * K] = {0, 1, 3, 0, 1, 3, 0, 3, 1, -1, 3, 1, 0, 1};
        memcpy(b->ptr[c->ix], v, sizeof v);
    }
}

static void test_grouped_bias_grad(void **s) {
    (void)s;
    dg_gradcheck_opts o = {.atol = 1e-4, .max_checks = 64};
    const char *what[3] = {"grouped_bias_add", "biased expert mlp, gelu", "biased expert mlp, quick geglu"};
    for (int w = 0; w < 3; w++) {
        gb_ctx c = {.which = w};
        assert_int_equal(dg_gradcheck(what[w], build_gb, init_gb, &c, &o), 0);
    }
}

/* Forward and backward are bitwise the same for any thread count. */
static void test_grouped_bias_threads(void **s) {
    (void)s;
    enum { BN = 400, BE = 6, BM = 40 };
    const int counts[BE] = {150, 0, 1, 130, 64, 20}; /* 365 rows */
    dg_graph *g = dg_graph_new("gb_threads");
    int x = dg_param_new(g, "x", 2, DG_SHAPE(BN, BM));
    int c = dg_input_new(g, "counts", DG_I32, 1, DG_SHAPE(BE));
    int bias = dg_param_new(g, "b", 2, DG_SHAPE(BE, BM));
    int y = dg_grouped_bias_add(g, x, c, bias);
    assert_true(moe_add_backward(g, dg_mul(g, y, y)) >= 0);
    assert_true(g->tensors[bias].grad >= 0);
    dg_buffers b;
    dg_buffers_alloc(g, &b);
    moe_fill_leaves(g, &b, 17);
    set_counts(b.ptr[c], counts, BE);
    assert_int_equal(moe_threads_bitwise(g, &b), 0);
    dg_buffers_free(&b);
    dg_graph_free(g);
}

static void test_grouped_bias_infer_errors(void **s) {
    (void)s;
    dg_graph *g = dg_graph_new("gb_bad");
    int x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(8, 5));
    int c = dg_input_new(g, "counts", DG_I32, 1, DG_SHAPE(3));
    int bias = dg_input_new(g, "b", DG_F32, 2, DG_SHAPE(3, 4));
    assert_int_equal(dg_grouped_bias_add(g, x, c, bias), -1);
    assert_non_null(strstr(g->err.msg, "rule 'shape' broken: bias 'b'"));
    dg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grouped_bias_values),  cmocka_unit_test(test_grouped_bias_grad),
        cmocka_unit_test(test_grouped_bias_threads), cmocka_unit_test(test_grouped_bias_infer_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
