/* test_op_basic.c — add/mul/scale/sum/mean/matmul: finite-difference
 * gradients through autodiff, and the autodiff bookkeeping itself.
 * Tolerances: dg_gradcheck defaults (eps 1e-2, rtol 2e-2, atol 1e-3) unless
 * a test states otherwise. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "dg_autodiff.h"
#include "dg_exec_serial.h"
#include "dg_gradcheck.h"
#include "dg_op_basic.h"
#include "dg_op_matmul.h"

static int build_add_mul_scale(dg_graph *g, void *ctx) {
    (void)ctx;
    int a = dg_param_new(g, "a", 2, DG_SHAPE(3, 5));
    int b = dg_param_new(g, "b", 2, DG_SHAPE(3, 5));
    /* a used three times: gradients must accumulate */
    int y = dg_mul(g, dg_add(g, a, b), dg_scale(g, a, -0.5));
    return dg_add(g, y, a);
}

static void test_elementwise_grad(void **s) {
    (void)s;
    assert_int_equal(dg_gradcheck("add_mul_scale", build_add_mul_scale, NULL, NULL, NULL), 0);
}

static int build_sum_mean(dg_graph *g, void *ctx) {
    (void)ctx;
    int a = dg_param_new(g, "a", 3, DG_SHAPE(2, 3, 4));
    int m = dg_mean(g, dg_mul(g, a, a));
    int s = dg_sum(g, a);
    int64_t one[1] = {1};
    (void)one;
    return dg_add(g, m, s);
}

static void test_reduction_grad(void **s) {
    (void)s;
    assert_int_equal(dg_gradcheck("sum_mean", build_sum_mean, NULL, NULL, NULL), 0);
}

typedef struct mm_case { int ta, tb, nd; } mm_case;

static int build_matmul(dg_graph *g, void *ctx) {
    const mm_case *c = ctx;
    int64_t M = 6, K = 5, N = 7;
    int a = c->ta ? dg_param_new(g, "a", 2, DG_SHAPE(K, M))
                  : (c->nd == 3 ? dg_param_new(g, "a", 3, DG_SHAPE(2, 3, K))
                                : dg_param_new(g, "a", 2, DG_SHAPE(M, K)));
    int b = c->tb ? dg_param_new(g, "b", 2, DG_SHAPE(N, K)) : dg_param_new(g, "b", 2, DG_SHAPE(K, N));
    return dg_matmul(g, a, b, c->ta, c->tb);
}

static void test_matmul_grad(void **s) {
    (void)s;
    const mm_case cases[] = {{0, 0, 2}, {0, 1, 2}, {1, 0, 2}, {1, 1, 2}, {0, 1, 3}, {0, 0, 3}};
    for (size_t i = 0; i < DG_ARRAY_LEN(cases); i++) {
        char what[64];
        snprintf(what, sizeof what, "matmul ta=%d tb=%d nd=%d", cases[i].ta, cases[i].tb, cases[i].nd);
        mm_case c = cases[i];
        assert_int_equal(dg_gradcheck(what, build_matmul, NULL, &c, NULL), 0);
    }
}

/* matmul against a naive triple loop, and 1 vs 2 threads bitwise. */
static void test_matmul_values(void **s) {
    (void)s;
    int64_t M = 201, K = 29, N = 41; /* several row blocks (dg_cpu_gemm_row_block) */
    dg_graph *g = dg_graph_new("mm");
    int a = dg_param_new(g, "a", 2, DG_SHAPE(M, K));
    int b = dg_param_new(g, "b", 2, DG_SHAPE(N, K));
    int y = dg_linear(g, a, b);
    assert_true(y >= 0);
    dg_buffers buf;
    dg_buffers_alloc(g, &buf);
    dg_test_rng rng = {7};
    dg_test_fill_normal(&rng, buf.ptr[a], M * K, 1.0);
    dg_test_fill_normal(&rng, buf.ptr[b], N * K, 1.0);
    dg_err err = {{0}};
    assert_int_equal(dg_run_serial(g, NULL, &buf, NULL, &err), DG_OK);
    const float *A = buf.ptr[a], *B = buf.ptr[b], *Y = buf.ptr[y];
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double ref = 0;
            for (int64_t k = 0; k < K; k++) ref += (double)A[i * K + k] * B[j * K + k];
            assert_true(fabs(ref - Y[i * N + j]) <= 1e-4 * (1 + fabs(ref)));
        }
    float *y1 = dg_malloc(sizeof(float) * (size_t)(M * N));
    memcpy(y1, Y, sizeof(float) * (size_t)(M * N));
    dg_test_team *t2 = dg_test_team_new(2);
    assert_int_equal(dg_run_serial(g, NULL, &buf, dg_test_team_get(t2), &err), DG_OK);
    assert_memory_equal(y1, buf.ptr[y], sizeof(float) * (size_t)(M * N));
    dg_test_team_free(t2);
    dg_free(y1);
    dg_buffers_free(&buf);
    dg_graph_free(g);
}

/* A parameter added straight into the output shares its gradient with the
 * other summand; autodiff must give it a tensor of its own. */
static void test_autodiff_shared_grad(void **s) {
    (void)s;
    dg_graph *g = dg_graph_new("shared");
    int p = dg_param_new(g, "p", 1, DG_SHAPE(4));
    int q = dg_param_new(g, "q", 1, DG_SHAPE(4));
    int loss = dg_sum(g, dg_add(g, p, q));
    dg_err err = {{0}};
    assert_int_equal(dg_autodiff(g, loss, dg_ops_autodiff(), NULL, &err), DG_OK);
    int gp = g->tensors[p].grad, gq = g->tensors[q].grad;
    assert_true(gp >= 0 && gq >= 0);
    assert_int_not_equal(gp, gq);
    assert_int_equal(g->tensors[gp].role, DG_ROLE_GRADIENT);
    assert_string_equal(g->tensors[gp].name, "grad/p");
    assert_int_equal(g->nodes[g->tensors[gp].producer].phase, DG_PHASE_BACKWARD);
    dg_graph_free(g);
}

/* Autodiff refuses an op without an adjoint on the gradient path, naming it. */
static void test_autodiff_no_adjoint(void **s) {
    (void)s;
    dg_graph *g = dg_graph_new("noadj");
    int p = dg_param_new(g, "p", 1, DG_SHAPE(4));
    int z = dg_fill(g, 1, DG_SHAPE(4), 2.0);
    /* fill has no adjoint, but it takes no gradient input: fine */
    int loss = dg_sum(g, dg_mul(g, p, z));
    dg_err err = {{0}};
    assert_int_equal(dg_autodiff(g, loss, dg_ops_autodiff(), NULL, &err), DG_OK);
    dg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_elementwise_grad),   cmocka_unit_test(test_reduction_grad),
        cmocka_unit_test(test_matmul_grad),        cmocka_unit_test(test_matmul_values),
        cmocka_unit_test(test_autodiff_shared_grad), cmocka_unit_test(test_autodiff_no_adjoint),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
