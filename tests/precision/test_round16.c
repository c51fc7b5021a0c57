/* test_round16.c — rounding to bf16 / fp16 (ops/dg_op_round16.h), and the
 * precision pass's rounding nodes on a small graph. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "dg_op_round16.h"
#include "dg_ops.h"
#include "dg_pass_precision.h"

static void test_bf16(void **s) {
    (void)s;
    assert_true(dg_round_bf16(1.0f) == 1.0f);
    assert_true(dg_round_bf16(1.0f + 0x1p-8f) == 1.0f);                  /* a tie: to even (down) */
    assert_true(dg_round_bf16(1.0f + 3 * 0x1p-8f) == 1.0f + 0x1p-6f);    /* a tie: to even (up) */
    assert_true(dg_round_bf16(1.0f + 0x1p-8f + 0x1p-12f) == 1.0f + 0x1p-7f); /* past the tie: up */
    assert_true(dg_round_bf16(-3.14159265f) == -3.140625f);
    assert_true(isfinite(dg_round_bf16(3e38f)) && fabsf(dg_round_bf16(3e38f) / 3e38f - 1) < 0x1p-8f); /* fp32 range */
    assert_true(isinf(dg_round_bf16(INFINITY)) && isnan(dg_round_bf16(NAN)));
}

static void test_fp16(void **s) {
    (void)s;
    assert_true(dg_round_fp16(1.0f + 0x1p-11f) == 1.0f);               /* tie: to even */
    assert_true(dg_round_fp16(1.0f + 3 * 0x1p-11f) == 1.0f + 0x1p-9f);
    assert_true(dg_round_fp16(65504.0f) == 65504.0f);                   /* the largest */
    assert_true(dg_round_fp16(65519.0f) == 65504.0f);
    assert_true(isinf(dg_round_fp16(65520.0f)) && dg_round_fp16(-1e6f) < 0);  /* overflow */
    assert_true(dg_round_fp16(0x1p-24f) == 0x1p-24f);                   /* the smallest subnormal */
    assert_true(dg_round_fp16(0x1p-26f) == 0.0f);
    assert_true(dg_round_fp16(3 * 0x1p-25f) == 0x1p-23f);               /* subnormal tie: to even */
}

/* y = x W on a parameter: the pass rounds x (gradient rounded) and W (its
 * gradient passed through), not the scalar loss. */
static void test_pass(void **s) {
    (void)s;
    dg_graph *g = dg_graph_new("t");
    int x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(4, 8));
    int w = dg_param_new(g, "w", 2, DG_SHAPE(3, 8));
    int y = dg_linear(g, x, w);
    int loss = dg_sum(g, y);
    assert_true(loss >= 0);
    dg_pass_precision_opts o = {DG_ROUND16_BF16, &dg_op_round16, NULL, -1};
    dg_graph *out = NULL;
    int tmap[16];
    dg_err err = {{0}};
    assert_int_equal(dg_pass_precision(g, &o, &out, tmap, &err), DG_OK);
    int n_round = 0, grad_rounded = 0;
    for (int i = 0; i < out->n_nodes; i++) {
        const dg_node *n = &out->nodes[i];
        if (n->op != &dg_op_round16) continue;
        n_round++;
        const dg_tensor *in = &out->tensors[n->in[0]];
        assert_true(dg_tensor_numel(in) > 1);
        grad_rounded += n->attrs.i[1];
        assert_int_equal(n->attrs.i[1], in->role != DG_ROLE_PARAMETER);
    }
    assert_int_equal(n_round, 3); /* x, w, y (the sum's input); not the loss */
    assert_int_equal(grad_rounded, 2);
    dg_graph_free(out);
    dg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_bf16), cmocka_unit_test(test_fp16),
                                       cmocka_unit_test(test_pass)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
