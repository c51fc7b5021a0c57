/* test_tp_chunk_ops.c — the ops --sequence-parallel and --tp-comm-overlap
 * add: slice_dim, unslice_dim and concat_dim (values: the chunks of x
 * concatenate back to x, unslice pads with zeros; gradients by finite
 * differences through a chain of all three and a gelu), and dropout over a
 * slice of each sample (dg_cpu_dropout_at), which must draw the whole
 * sample's mask at the slice's place. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "dg_cpu_dropout.h"
#include "dg_gradcheck.h"
#include "dg_op_chunk.h"
#include "dg_ops.h"

/* x [2, 6, 4]: chunks 2, 0, 1 of 3 along dim 1, concatenated (a
 * permutation), then chunk 1 of 2 of dim 2 padded back to 4 columns. */
static int build_chain(dg_graph *g, void *ctx) {
    (void)ctx;
    int x = dg_param_new(g, "x", 3, DG_SHAPE(2, 6, 4));
    int parts[3] = {dg_slice_dim(g, x, 1, 2, 3), dg_slice_dim(g, x, 1, 0, 3), dg_slice_dim(g, x, 1, 1, 3)};
    int y = dg_gelu_tanh(g, dg_concat_dim(g, parts, 3, 1));
    return dg_unslice_dim(g, dg_slice_dim(g, y, 2, 1, 2), 2, 1, 2);
}

static void test_chunk_grad(void **state) {
    (void)state;
    dg_gradcheck_opts o = {0};
    assert_int_equal(dg_gradcheck("slice/concat/unslice", build_chain, NULL, NULL, &o), 0);
}

static void test_chunk_shapes(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("chunks");
    int x = dg_param_new(g, "x", 3, DG_SHAPE(2, 6, 4));
    int s = dg_slice_dim(g, x, 1, 1, 3);
    assert_int_equal(g->tensors[s].shape[1], 2);
    int parts[3] = {s, s, s};
    int c = dg_concat_dim(g, parts, 3, 2);
    assert_int_equal(g->tensors[c].shape[2], 12);
    int u = dg_unslice_dim(g, s, 1, 2, 3);
    assert_int_equal(g->tensors[u].shape[1], 6);
    assert_int_equal(g->status, DG_OK);
    dg_slice_dim(g, x, 1, 0, 4); /* 6 rows are not 4 equal chunks */
    assert_int_equal(g->status, DG_EINPUT);
    dg_graph_free(g);
}

/* A slice of each sample at offset k draws the whole sample's mask there. */
static void test_dropout_slice_mask(void **state) {
    (void)state;
    enum { B = 3, N = 40, K = 10 };
    float x[B * N], whole[B * N], part[B * K];
    for (int i = 0; i < B * N; i++) x[i] = 1.0f + (float)i;
    const int32_t key[4] = {7, 2, 5, 1};
    dg_cpu_dropout(NULL, x, whole, key, 3, 0.3, B, N);
    int dropped = 0;
    for (int off = 0; off < N; off += K) {
        float xs[B * K];
        for (int b = 0; b < B; b++) memcpy(xs + b * K, x + b * N + off, sizeof(float) * K);
        dg_cpu_dropout_at(NULL, xs, part, key, 3, 0.3, B, K, off);
        for (int b = 0; b < B; b++)
            for (int i = 0; i < K; i++) {
                assert_true(part[b * K + i] == whole[b * N + off + i]);
                dropped += part[b * K + i] == 0.0f;
            }
    }
    assert_true(dropped > 0 && dropped < B * N); /* a mask, neither all nor nothing */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chunk_grad),
        cmocka_unit_test(test_chunk_shapes),
        cmocka_unit_test(test_dropout_slice_mask),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
