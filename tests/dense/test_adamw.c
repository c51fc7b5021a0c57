/* test_adamw.c — the fused AdamW op against a straightforward double
 * implementation of torch.optim.AdamW's formula over several steps (with a
 * changing learning rate, as a schedule rewrites the node's attrs), the
 * decoupled weight decay on its own, in-place aliasing, thread-count
 * independence, and the attribute rules; and the optimizer's sum of
 * squares (dg_cpu_sumsq) across thread counts.
 *
 * Tolerance: |got - ref| <= 1e-6 + 1e-5 * |ref| (fp32 kernel vs double). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "dg_exec_serial.h"
#include "dg_gradcheck.h"
#include "dg_ops.h"

enum { N = 103, STEPS = 6 };

/* torch.optim.AdamW, single tensor, in double. */
static void ref_adamw(const dg_adamw_hparams *h, double *p, const float *g, double *m, double *v) {
    double bc1 = 1 - pow(h->beta1, (double)h->step), bc2 = 1 - pow(h->beta2, (double)h->step);
    for (int i = 0; i < N; i++) {
        p[i] *= 1 - h->lr * h->weight_decay;
        m[i] = h->beta1 * m[i] + (1 - h->beta1) * g[i];
        v[i] = h->beta2 * v[i] + (1 - h->beta2) * (double)g[i] * g[i];
        double denom = sqrt(v[i]) / sqrt(bc2) + h->eps;
        p[i] -= h->lr / bc1 * m[i] / denom;
    }
}

static void check(const char *what, const float *got, const double *ref) {
    for (int i = 0; i < N; i++)
        if (!(fabs(got[i] - ref[i]) <= 1e-6 + 1e-5 * fabs(ref[i])))
            fail_msg("%s[%d]: got %.9g, expected %.9g", what, i, got[i], ref[i]);
}

static void test_adamw_steps(void **s) {
    (void)s;
    dg_graph *g = dg_graph_new("opt");
    dg_graph_set_phase(g, DG_PHASE_OPTIMIZER);
    int p = dg_param_new(g, "p", 1, DG_SHAPE(N));
    int gr = dg_tensor_new(g, "grad/p", DG_F32, 1, DG_SHAPE(N), DG_ROLE_GRADIENT);
    int m = dg_tensor_new(g, "m", DG_F32, 1, DG_SHAPE(N), DG_ROLE_OPTIMIZER);
    int v = dg_tensor_new(g, "v", DG_F32, 1, DG_SHAPE(N), DG_ROLE_OPTIMIZER);
    dg_adamw_hparams h = {.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8,
                          .weight_decay = 0.1, .step = 1};
    int out[3];
    int np = dg_adamw(g, p, gr, m, v, &h, out);
    assert_true(np >= 0);
    assert_int_equal(np, out[0]);
    dg_node *node = &g->nodes[g->tensors[np].producer];
    assert_int_equal(node->phase, DG_PHASE_OPTIMIZER);
    assert_null(node->op->adjoint);
    for (int j = 0; j < 3; j++) assert_int_equal(g->tensors[out[j]].shape[0], N);

    dg_buffers b;
    dg_buffers_alloc(g, &b);
    dg_test_rng r = {31};
    dg_test_fill_normal(&r, b.ptr[p], N, 1.0);
    double rp[N], rm[N] = {0}, rv[N] = {0};
    for (int i = 0; i < N; i++) rp[i] = dg_buf_f32(&b, p)[i];
    dg_err err = {{0}};
    for (int t = 1; t <= STEPS; t++) {
        /* what a schedule and the training loop do between steps */
        h.step = t;
        h.lr = 1e-2 * (1.0 - 0.1 * t);
        node->attrs.i[0] = t;
        node->attrs.f[0] = h.lr;
        dg_test_fill_normal(&r, b.ptr[gr], N, t == 3 ? 1e-3 : 1.0); /* one tiny-gradient step */
        assert_int_equal(dg_run_serial(g, NULL, &b, NULL, &err), DG_OK);
        ref_adamw(&h, rp, dg_buf_f32(&b, gr), rm, rv);
        check("param", b.ptr[out[0]], rp);
        check("m", b.ptr[out[1]], rm);
        check("v", b.ptr[out[2]], rv);
        /* alias the new state back (SSA outputs -> persistent tensors) */
        memcpy(b.ptr[p], b.ptr[out[0]], sizeof(float) * N);
        memcpy(b.ptr[m], b.ptr[out[1]], sizeof(float) * N);
        memcpy(b.ptr[v], b.ptr[out[2]], sizeof(float) * N);
    }
    dg_buffers_free(&b);
    dg_graph_free(g);
}

/* Weight decay is decoupled: with zero gradient and state it is the whole
 * update, p * (1 - lr * wd), and it touches neither moment. */
static void test_adamw_decoupled_decay(void **s) {
    (void)s;
    dg_adamw_hparams h = {.lr = 3e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                          .weight_decay = 0.5, .step = 1};
    float p[N], z[N] = {0}, po[N], mo[N], vo[N];
    dg_test_rng r = {32};
    dg_test_fill_normal(&r, p, N, 1.0);
    dg_cpu_adamw(NULL, &h, p, z, z, z, po, mo, vo, N);
    const float decay = (float)(1.0 - h.lr * h.weight_decay);
    for (int i = 0; i < N; i++) {
        assert_true(po[i] == p[i] * decay);
        assert_true(mo[i] == 0.0f && vo[i] == 0.0f);
    }
}

/* In place (outputs alias inputs) and 1 vs 2 threads: bitwise the same. */
static void test_adamw_inplace_threads(void **s) {
    (void)s;
    dg_adamw_hparams h = {.lr = 1e-3, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6,
                          .weight_decay = 0.01, .step = 4};
    float p[N], gr[N], m[N], v[N], po[N], mo[N], vo[N];
    dg_test_rng r = {33};
    dg_test_fill_normal(&r, p, N, 1.0);
    dg_test_fill_normal(&r, gr, N, 1.0);
    dg_test_fill_normal(&r, m, N, 0.1);
    for (int i = 0; i < N; i++) v[i] = m[i] * m[i];
    dg_cpu_adamw(NULL, &h, p, gr, m, v, po, mo, vo, N);
    dg_test_team *t2 = dg_test_team_new(2);
    dg_cpu_adamw(dg_test_team_get(t2), &h, p, gr, m, v, p, m, v, N);
    dg_test_team_free(t2);
    assert_memory_equal(p, po, sizeof p);
    assert_memory_equal(m, mo, sizeof m);
    assert_memory_equal(v, vo, sizeof v);
}

/* The optimizer's sum of squares: the same bits for 1, 2 and 3 threads over
 * many blocks, the scale applied in float before squaring, and a double
 * reference within 1e-12. */
static void test_sumsq_threads(void **s) {
    (void)s;
    enum { M = 300007 }; /* five blocks, the last one short */
    float *x = dg_malloc(sizeof(float) * M);
    dg_test_rng r = {44};
    dg_test_fill_normal(&r, x, M, 1.0);
    double want = 0;
    for (int i = 0; i < M; i++) {
        float y = x[i] * 0.25f;
        want += (double)y * y;
    }
    double one = dg_cpu_sumsq(NULL, x, M, 0.25f);
    assert_true(fabs(one - want) <= 1e-12 * want);
    for (int nth = 2; nth <= 3; nth++) {
        dg_test_team *t = dg_test_team_new(nth);
        double got = dg_cpu_sumsq(dg_test_team_get(t), x, M, 0.25f);
        dg_test_team_free(t);
        assert_memory_equal(&got, &one, sizeof got);
    }
    dg_free(x);
}

static void test_adamw_attr_rules(void **s) {
    (void)s;
    dg_adamw_hparams bad[] = {
        {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .step = 0},
        {.lr = 1e-3, .beta1 = 1.0, .beta2 = 0.99, .eps = 1e-8, .step = 1},
        {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.99, .eps = 0.0, .step = 1},
    };
    for (size_t k = 0; k < DG_ARRAY_LEN(bad); k++) {
        dg_graph *g = dg_graph_new("bad");
        int p = dg_param_new(g, "p", 1, DG_SHAPE(4));
        assert_int_equal(dg_adamw(g, p, p, p, p, &bad[k], NULL), -1);
        assert_non_null(strstr(g->err.msg, "rule 'attrs' broken"));
        dg_graph_free(g);
    }
    dg_graph *g = dg_graph_new("shape");
    int p = dg_param_new(g, "p", 1, DG_SHAPE(4));
    int q = dg_param_new(g, "q", 1, DG_SHAPE(5));
    dg_adamw_hparams h = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .step = 1};
    assert_int_equal(dg_adamw(g, p, p, q, p, &h, NULL), -1);
    assert_non_null(strstr(g->err.msg, "rule 'shape' broken"));
    dg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_adamw_steps),
        cmocka_unit_test(test_adamw_decoupled_decay),
        cmocka_unit_test(test_adamw_inplace_threads),
        cmocka_unit_test(test_adamw_attr_rules),
        cmocka_unit_test(test_sumsq_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
