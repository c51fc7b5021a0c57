/* test_router_noise.c — the router's counter-based draws (issue 29): the
 * dropout op's kinds jitter (--moe-input-jitter-eps) and normal
 * (--moe-router-force-load-balancing), kernels/cpu/dg_cpu_dropout.h.
 *
 *  - jitter: every factor y / x in [1 - eps, 1 + eps), their mean 1 and
 *    variance eps^2 / 3 (a uniform's) within 4 standard errors; any thread
 *    count and any slice of a sample draws the whole sample's numbers at
 *    their places; evaluation is the identity; the backward matches finite
 *    differences;
 *  - normal: mean 0 and variance 1 within 4 standard errors, the share
 *    within one sigma 0.6827 +- 0.01; the numbers ignore x and are drawn in
 *    evaluation too; the backward passes dy straight through. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "dg_cpu_dropout.h"
#include "dg_gradcheck.h"
#include "dg_ops.h"

enum { B = 4, N = 8192 };
static float x[B * N], ya[B * N], yb[B * N], part[B * 1000];

static void fill_x(void) {
    for (int i = 0; i < B * N; i++) x[i] = 0.5f + (float)(i % 5);
}

/* ya from 1 thread, yb from 2, equal; a slice [off, off + 1000) of each
 * sample equals the whole's there. */
static void draw_checked(int kind, double p, const int32_t *key) {
    dg_test_team *t1 = dg_test_team_new(1), *t2 = dg_test_team_new(2);
    dg_cpu_noise_at(dg_test_team_get(t1), kind, x, ya, key, 9, p, B, N, 0);
    dg_cpu_noise_at(dg_test_team_get(t2), kind, x, yb, key, 9, p, B, N, 0);
    assert_memory_equal(ya, yb, sizeof ya);
    static float xs[B * 1000];
    for (int b = 0; b < B; b++) memcpy(xs + b * 1000, x + b * N + 3000, sizeof(float) * 1000);
    dg_cpu_noise_at(dg_test_team_get(t1), kind, xs, part, key, 9, p, B, 1000, 3000);
    for (int b = 0; b < B; b++) assert_memory_equal(part + b * 1000, ya + b * N + 3000, sizeof(float) * 1000);
    dg_test_team_free(t1);
    dg_test_team_free(t2);
}

static void test_jitter(void **s) {
    (void)s;
    fill_x();
    const double eps = 0.1;
    int32_t key[4] = {1234, 7, 100, 1};
    draw_checked(DG_NOISE_JITTER, eps, key);
    double sum = 0, sq = 0;
    for (int i = 0; i < B * N; i++) {
        double f = (double)ya[i] / (double)x[i];
        assert_true(f >= 1 - eps - 1e-6 && f < 1 + eps + 1e-6);
        sum += f;
        sq += (f - 1) * (f - 1);
    }
    double n = B * N, var = eps * eps / 3, se = sqrt(var / n);
    assert_true(fabs(sum / n - 1) < 4 * se);
    assert_true(fabs(sq / n - var) < 4 * var * sqrt(0.8 / n)); /* var of (f-1)^2: 4/45 eps^4 = 0.8 var^2 */
    int32_t eval[4] = {1234, 7, 100, 0};
    dg_cpu_noise_at(NULL, DG_NOISE_JITTER, x, yb, eval, 9, eps, B, N, 0);
    assert_memory_equal(x, yb, sizeof x);
}

static void test_normal(void **s) {
    (void)s;
    fill_x();
    int32_t key[4] = {1234, 7, 100, 1};
    draw_checked(DG_NOISE_NORMAL, 0.0, key);
    double sum = 0, sq = 0, within = 0, n = B * N;
    for (int i = 0; i < B * N; i++) {
        assert_true(isfinite(ya[i]));
        sum += ya[i];
        sq += (double)ya[i] * ya[i];
        within += fabs(ya[i]) < 1.0;
    }
    assert_true(fabs(sum / n) < 4 / sqrt(n));
    assert_true(fabs(sq / n - 1) < 4 * sqrt(2 / n));
    assert_true(fabs(within / n - 0.6827) < 0.01);
    /* x does not enter; evaluation draws the same numbers */
    for (int i = 0; i < B * N; i++) x[i] = -x[i];
    int32_t eval[4] = {1234, 7, 100, 0};
    dg_cpu_noise_at(NULL, DG_NOISE_NORMAL, x, yb, eval, 9, 0.0, B, N, 0);
    assert_memory_equal(ya, yb, sizeof ya);
}

static int build_jitter(dg_graph *g, void *ctx) {
    (void)ctx;
    int xp = dg_param_new(g, "x", 3, DG_SHAPE(3, 4, 5));
    int key = dg_input_new(g, "key", DG_I32, 1, DG_SHAPE(4));
    int y = dg_noise(g, xp, key, DG_NOISE_JITTER, 0.2, 5);
    return dg_mul(g, y, y);
}

static void test_jitter_grad(void **s) {
    (void)s;
    for (int nth = 1; nth <= 2; nth++) {
        dg_gradcheck_opts o = {0};
        o.nthreads = nth;
        assert_int_equal(dg_gradcheck("jitter", build_jitter, dg_gc_init_key, NULL, &o), 0);
    }
}

/* The normal draw's adjoint is dy itself (no node), the other kinds' a node. */
static void test_normal_straight_through(void **s) {
    (void)s;
    dg_graph *g = dg_graph_new("t");
    int xp = dg_param_new(g, "x", 2, DG_SHAPE(4, 6));
    int key = dg_input_new(g, "key", DG_I32, 1, DG_SHAPE(4));
    int y = dg_noise(g, xp, key, DG_NOISE_NORMAL, 0.0, 3);
    int dy = dg_input_new(g, "dy", DG_F32, 2, DG_SHAPE(4, 6));
    const dg_node *n = &g->nodes[g->tensors[y].producer];
    int din[2] = {-2, -2}, nodes = g->n_nodes;
    assert_int_equal(dg_op_dropout.adjoint(g, n, &dy, din), DG_OK);
    assert_int_equal(din[0], dy);
    assert_int_equal(din[1], -1);
    assert_int_equal(g->n_nodes, nodes);
    int j = dg_noise(g, xp, key, DG_NOISE_JITTER, 0.1, 3);
    assert_int_equal(dg_op_dropout.adjoint(g, &g->nodes[g->tensors[j].producer], &dy, din), DG_OK);
    assert_true(din[0] >= 0 && din[0] != dy);
    dg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jitter),
        cmocka_unit_test(test_normal),
        cmocka_unit_test(test_jitter_grad),
        cmocka_unit_test(test_normal_straight_through),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
