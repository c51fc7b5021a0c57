/* test_mla_ops.c — multi-latent attention's ops (issue 29): finite-difference
 * gradients through autodiff of rope with YaRN's frequencies and
 * concentration factor (rotate-half and interleaved pairs, whole and partial
 * rotary dim), of narrow, pad_last, expand_heads and heads_sum; with 1 and 2
 * threads. Their forward values against PyTorch: yarn_rope_ref.py on
 * mla_ops_dump's output (test_yarn_rope_torch). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "dg_gradcheck.h"
#include "dg_op_mla.h"
#include "dg_ops.h"

static void gc(const char *what, dg_gc_build_fn build, void *ctx) {
    for (int nth = 1; nth <= 2; nth++) {
        dg_gradcheck_opts o = {0};
        o.nthreads = nth;
        assert_int_equal(dg_gradcheck(what, build, NULL, ctx, &o), 0);
    }
}

typedef struct rope_case {
    int interleaved;
    int64_t rotary_dim;
    double factor; /* <= 1: plain */
} rope_case;

/* x [2, 6, 3, 8], positions 0..5: the correction range of dim 8 at base 10000
 * and 4096 positions is pairs 1..3, so the blend's three regions all show. */
static int build_yarn(dg_graph *g, void *ctx) {
    const rope_case *rc = ctx;
    int x = dg_param_new(g, "x", 4, DG_SHAPE(2, 6, 3, 8));
    dg_rope_yarn_opts y = {rc->factor, 32.0, 1.0, dg_rope_yarn_mscale(rc->factor, 1.0, 0.5), 4096, rc->interleaved, 0};
    return dg_rope_yarn(g, x, 10000.0, rc->rotary_dim, &y);
}

static void test_yarn_rope_grad(void **s) {
    (void)s;
    rope_case c1 = {0, 0, 40.0};
    gc("yarn rope", build_yarn, &c1);
    rope_case c2 = {1, 0, 40.0};
    gc("yarn rope interleaved", build_yarn, &c2);
    rope_case c3 = {1, 4, 1.0};
    gc("rope interleaved rotary_dim 4", build_yarn, &c3);
}

/* The concentration factor scales the rotation: |rope(x)| = mscale |x| per pair. */
static void test_yarn_mscale(void **s) {
    (void)s;
    assert_true(dg_rope_yarn_mscale(40.0, 1.0, 0.5) > 1.0);
    assert_true(dg_rope_yarn_mscale(40.0, 0.707, 0.707) == 1.0);
    assert_true(dg_rope_yarn_mscale(1.0, 1.0, 0.0) == 1.0);
}

static int build_narrow_pad(dg_graph *g, void *ctx) {
    (void)ctx;
    int x = dg_param_new(g, "x", 3, DG_SHAPE(2, 3, 7));
    int a = dg_narrow(g, x, 2, 4);              /* [2, 3, 4] */
    int b = dg_pad_last(g, a, 1, 6);            /* [2, 3, 6] */
    int w = dg_param_new(g, "w", 3, DG_SHAPE(2, 3, 6));
    return dg_mul(g, b, w);
}

static int build_expand(dg_graph *g, void *ctx) {
    (void)ctx;
    int x = dg_param_new(g, "x", 4, DG_SHAPE(2, 3, 1, 5));
    int like = dg_input_new(g, "like", DG_F32, 4, DG_SHAPE(2, 3, 4, 2)); /* shape only: no gradient */
    int e = dg_expand_heads(g, x, like);        /* [2, 3, 4, 5] */
    int w = dg_param_new(g, "w", 4, DG_SHAPE(2, 3, 4, 5));
    return dg_heads_sum(g, dg_mul(g, e, w));    /* [2, 3, 1, 5] */
}

static void test_shape_ops_grad(void **s) {
    (void)s;
    gc("narrow + pad_last", build_narrow_pad, NULL);
    gc("expand_heads + heads_sum", build_expand, NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_yarn_rope_grad),
        cmocka_unit_test(test_yarn_mscale),
        cmocka_unit_test(test_shape_ops_grad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
