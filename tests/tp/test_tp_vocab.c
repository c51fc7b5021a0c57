/* test_tp_vocab.c — the vocab-parallel kernels against the whole-vocabulary
 * ones (kernels/cpu/dg_cpu_embedding.h, dg_cpu_xent.h): the tp slices'
 * masked lookups sum to the whole lookup and their gradients are the whole
 * gradient's rows; the combined statistics give the whole loss and lse,
 * and the slices' dlogits are the whole dlogits' columns, with masked rows
 * whose target is -100 and targets on either side of a slice boundary; a
 * target outside the whole vocabulary is still an input error. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "dg_base.h"
#include "dg_cpu_embedding.h"
#include "dg_cpu_xent.h"

enum { N = 6, V = 12, H = 3, TP = 3, VL = V / TP };

static float val(int i) { return (float)sin(0.7 * i + 0.3) * 2.0f; }

static void test_embedding_slices_sum_to_whole(void **state) {
    (void)state;
    float table[V * H], dout[N * H], whole[N * H], dwhole[V * H], sum[N * H] = {0};
    int32_t tok[N] = {0, 3, 4, 11, 4, 8};
    for (int i = 0; i < V * H; i++) table[i] = val(i);
    for (int i = 0; i < N * H; i++) dout[i] = val(100 + i);
    assert_int_equal(dg_cpu_embedding_fwd(NULL, table, tok, whole, N, V, H, NULL), DG_OK);
    assert_int_equal(dg_cpu_embedding_bwd(NULL, dout, tok, dwhole, N, V, H, NULL), DG_OK);
    for (int r = 0; r < TP; r++) {
        float part[N * H], dpart[VL * H];
        assert_int_equal(dg_cpu_vocab_embedding_fwd(NULL, table + r * VL * H, tok, part, N, VL, H, r * VL, V, NULL),
                         DG_OK);
        for (int i = 0; i < N * H; i++) sum[i] += part[i];
        assert_int_equal(dg_cpu_vocab_embedding_bwd(NULL, dout, tok, dpart, N, VL, H, r * VL, V, NULL), DG_OK);
        assert_memory_equal(dpart, dwhole + r * VL * H, sizeof dpart);
    }
    assert_memory_equal(sum, whole, sizeof sum); /* one slice adds the row, the others zeros */
    int32_t bad[N] = {0, 3, 4, 12, 4, 8};
    float part[N * H];
    assert_int_equal(dg_cpu_vocab_embedding_fwd(NULL, table, bad, part, N, VL, H, 0, V, NULL), DG_EINPUT);
}

static void test_xent_slices_match_whole(void **state) {
    (void)state;
    float logits[N * V], mask[N] = {1, 1, 0, 1, 0.5f, 1}, lse[N], loss, dwhole[N * V];
    int32_t tg[N] = {0, 3, -100, 4, 11, 7}; /* 3 | 4 and 7 | 8 are slice boundaries */
    for (int i = 0; i < N * V; i++) logits[i] = val(i) * 3.0f;
    assert_int_equal(dg_cpu_xent_fwd(NULL, logits, tg, mask, &loss, lse, N, V, NULL), DG_OK);
    assert_int_equal(dg_cpu_xent_bwd(NULL, logits, tg, mask, lse, 0.5f, dwhole, N, V, NULL), DG_OK);
    float slice[TP][N * VL], stats[TP * N * 2], vlse[N], tl[N], vloss;
    for (int r = 0; r < TP; r++) {
        for (int i = 0; i < N; i++) memcpy(slice[r] + i * VL, logits + i * V + r * VL, sizeof(float) * VL);
        dg_cpu_vocab_xent_stats(NULL, slice[r], tg, stats + r * N * 2, N, VL, r * VL);
    }
    dg_cpu_vocab_xent_combine(stats, TP, N, vlse, tl);
    assert_int_equal(dg_cpu_vocab_xent_loss(tg, mask, vlse, tl, &vloss, N, V, NULL), DG_OK);
    assert_float_equal(vloss, loss, 1e-5 * fabsf(loss));
    for (int i = 0; i < N; i++) {
        assert_float_equal(vlse[i], lse[i], 1e-5 * fabsf(lse[i]));
        if (mask[i] != 0.0f) assert_float_equal(tl[i], logits[i * V + tg[i]], 0);
    }
    for (int r = 0; r < TP; r++) {
        float d[N * VL];
        assert_int_equal(dg_cpu_vocab_xent_bwd(NULL, slice[r], tg, mask, vlse, 0.5f, d, N, VL, r * VL, V, NULL), DG_OK);
        for (int i = 0; i < N; i++)
            for (int j = 0; j < VL; j++) assert_float_equal(d[i * VL + j], dwhole[i * V + r * VL + j], 1e-6);
    }
    int32_t bad[N] = {0, 3, -100, 12, 11, 7};
    assert_int_equal(dg_cpu_vocab_xent_loss(bad, mask, vlse, tl, &vloss, N, V, NULL), DG_EINPUT);
    float d[N * VL];
    assert_int_equal(dg_cpu_vocab_xent_bwd(NULL, slice[0], bad, mask, vlse, 1.0f, d, N, VL, 0, V, NULL), DG_EINPUT);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_embedding_slices_sum_to_whole),
        cmocka_unit_test(test_xent_slices_match_whole),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
