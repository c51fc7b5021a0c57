/* test_cp_shard.c — the sharding rules CP stacks on (issue 14: CP x TP,
 * CP x EP), called directly on a graph whose mesh has tp = cp = 2:
 *
 *  - reshape with dims local over tp and global over cp (what the CP pass
 *    re-emits after the TP pass): [B, S/2, Hq/2 * D] -> [B, S, Hq/2, D]
 *    keeps the cp split on the sequence and the tp split on the heads and
 *    rewrites S to S/2; and back [B, S/2, Hq/2, D] -> [B, S, Hq/2 * D];
 *    dims global over both, or local over both, still work as before;
 *  - the MoE layer's token flatten [B, S/2, H] -> [B S, H] keeps the cp
 *    split on the rows and writes B S/2; the unflatten puts it back on the
 *    sequence (dim 1), not the batch;
 *  - a split the dims cannot carry (tp on the sequence, merged into heads
 *    behind another dim) is refused, not guessed;
 *  - the Ulysses all-to-all over cp moves cp inside a tp split of the heads;
 *  - SP's scatter over tp of a sequence split over cp (CP x TP x SP: the
 *    MoE layer's output, the learned positions' sum) splits each rank's
 *    chunks over tp inside cp, as the reduce-scatter does, and the
 *    all-gather over tp undoes it (issue 30: the rule refused, the layout
 *    fell back to replicated and a later reshape broke);
 *  - dropout on that slice takes both coordinates (cp's and tp's); the
 *    form with cp's alone refuses it;
 *  - CP's relabel of the MoE layer's tokens as data keeps SP's inner tp
 *    split as the rows' split (a one-sequence micro-batch's flatten keeps
 *    it), and the relabel back puts it inside cp's (issue 30: the rule
 *    refused the cp+tp rows and every MoE model at --micro-batch-size 1
 *    under CP x TP x SP crashed in the CP pass).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

#include "dg_collective.h"
#include "dg_graph.h"
#include "dg_layout.h"
#include "dg_op_cp.h"
#include "dg_op_dropout.h"
#include "dg_op_shape.h"
#include "dg_op_shard.h"
#include "dg_ops_util.h"

static dg_graph *mesh22(void) {
    dg_graph *g = dg_graph_new("cp_shard");
    g->mesh[DG_AXIS_TP] = 2;
    g->mesh[DG_AXIS_CP] = 2;
    return g;
}

/* The reshape rule on x (local shape xs, splits per dim) with dims ys;
 * returns its status, the output layout in *out and the dims in got. */
static int reshape_rule(dg_graph *g, int nd, const int64_t *xs, const uint8_t *split, int yn, const int64_t *ys,
                        dg_sharding *out, int64_t *got) {
    int x = dg_input_new(g, "x", DG_F32, nd, xs);
    for (int d = 0; d < nd; d++) dg_T(g, x)->sharding.split[d] = split[d];
    dg_node n;
    memset(&n, 0, sizeof n);
    n.op = &dg_op_reshape;
    n.in[0] = x;
    n.n_in = 1;
    dg_attrs a = dg_attrs_zero();
    a.i[0] = yn;
    for (int d = 0; d < yn; d++) a.i[1 + d] = ys[d];
    int st = dg_shard_reshape(g, &n, &g->tensors[x].sharding, out, &a);
    for (int d = 0; d < yn; d++) got[d] = a.i[1 + d];
    return st;
}

static void test_mixed_locality(void **state) {
    (void)state;
    dg_graph *g = mesh22();
    dg_sharding o;
    int64_t got[4];
    /* 4 heads of 16 over tp 2, sequence 32 over cp 2: dims tp-local, cp-global */
    uint8_t s3[3] = {DG_AXIS_NONE, DG_AXIS_CP, DG_AXIS_TP};
    assert_int_equal(reshape_rule(g, 3, DG_SHAPE(2, 16, 32), s3, 4, DG_SHAPE(2, 32, 2, 16), &o, got), DG_OK);
    assert_int_equal(o.split[1], DG_AXIS_CP);
    assert_int_equal(o.split[2], DG_AXIS_TP);
    assert_int_equal(o.split[3], DG_AXIS_NONE);
    assert_memory_equal(got, DG_SHAPE(2, 16, 2, 16), 4 * sizeof(int64_t));
    uint8_t s4[4] = {DG_AXIS_NONE, DG_AXIS_CP, DG_AXIS_TP, DG_AXIS_NONE};
    assert_int_equal(reshape_rule(g, 4, DG_SHAPE(2, 16, 2, 16), s4, 3, DG_SHAPE(2, 32, 32), &o, got), DG_OK);
    assert_int_equal(o.split[1], DG_AXIS_CP);
    assert_int_equal(o.split[2], DG_AXIS_TP);
    assert_memory_equal(got, DG_SHAPE(2, 16, 32), 3 * sizeof(int64_t));
    /* global over both axes (a logical graph), local over both (re-emitted) */
    assert_int_equal(reshape_rule(g, 3, DG_SHAPE(2, 16, 32), s3, 4, DG_SHAPE(2, 32, 4, 16), &o, got), DG_OK);
    assert_memory_equal(got, DG_SHAPE(2, 16, 2, 16), 4 * sizeof(int64_t));
    assert_int_equal(reshape_rule(g, 3, DG_SHAPE(2, 16, 32), s3, 4, DG_SHAPE(2, 16, 2, 16), &o, got), DG_OK);
    assert_int_equal(o.split[1], DG_AXIS_CP);
    assert_int_equal(o.split[2], DG_AXIS_TP);
    /* tp on the sequence cannot merge behind the batch into a head dim */
    uint8_t bad[3] = {DG_AXIS_NONE, DG_AXIS_TP, DG_AXIS_CP};
    assert_int_not_equal(reshape_rule(g, 3, DG_SHAPE(2, 16, 32), bad, 2, DG_SHAPE(64, 32), &o, got), DG_OK);
    dg_graph_free(g);
}

static void test_cp_tokens(void **state) {
    (void)state;
    dg_graph *g = mesh22();
    dg_sharding o;
    int64_t got[3];
    uint8_t seq[3] = {DG_AXIS_NONE, DG_AXIS_CP, DG_AXIS_NONE};
    assert_int_equal(reshape_rule(g, 3, DG_SHAPE(2, 16, 64), seq, 2, DG_SHAPE(64, 64), &o, got), DG_OK);
    assert_int_equal(o.split[0], DG_AXIS_CP);
    assert_memory_equal(got, DG_SHAPE(32, 64), 2 * sizeof(int64_t));
    uint8_t rows[2] = {DG_AXIS_CP, DG_AXIS_NONE};
    assert_int_equal(reshape_rule(g, 2, DG_SHAPE(32, 64), rows, 3, DG_SHAPE(2, 32, 64), &o, got), DG_OK);
    assert_int_equal(o.split[0], DG_AXIS_NONE); /* the sequence, not the batch */
    assert_int_equal(o.split[1], DG_AXIS_CP);
    assert_memory_equal(got, DG_SHAPE(2, 16, 64), 3 * sizeof(int64_t));
    dg_graph_free(g);
}

static void test_ulysses_layout(void **state) {
    (void)state;
    dg_graph *g = mesh22();
    int x = dg_input_new(g, "q", DG_F32, 4, DG_SHAPE(2, 16, 2, 16)); /* [B, S/cp, Hq/tp, D] */
    dg_T(g, x)->sharding.split[1] = DG_AXIS_CP;
    dg_T(g, x)->sharding.split[2] = DG_AXIS_TP;
    int y = dg_all_to_all(g, x, DG_AXIS_CP, 2, 2, 1);
    assert_true(y >= 0);
    assert_int_equal(dg_Tc(g, y)->sharding.split[1], DG_AXIS_NONE);
    assert_int_equal(dg_Tc(g, y)->sharding.split[2], DG_AXIS_TP);
    assert_int_equal(dg_Tc(g, y)->sharding.split2[2], DG_AXIS_CP);
    dg_graph_free(g);
}

static void test_sp_scatter_in_cp(void **state) {
    (void)state;
    dg_graph *g = mesh22();
    int x = dg_input_new(g, "h", DG_F32, 3, DG_SHAPE(2, 16, 64)); /* [B, S/cp, H] */
    dg_T(g, x)->sharding.split[1] = DG_AXIS_CP;
    int y = dg_scatter_to_group(g, x, DG_AXIS_TP, 2, 1);
    assert_true(y >= 0);
    assert_memory_equal(dg_Tc(g, y)->shape, DG_SHAPE(2, 8, 64), 3 * sizeof(int64_t));
    assert_int_equal(dg_Tc(g, y)->sharding.split[1], DG_AXIS_CP);
    assert_int_equal(dg_Tc(g, y)->sharding.split2[1], DG_AXIS_TP);
    int z = dg_all_gather(g, y, DG_AXIS_TP, 2, 1);
    assert_true(z >= 0);
    assert_int_equal(dg_Tc(g, z)->sharding.split[1], DG_AXIS_CP);
    assert_int_equal(dg_Tc(g, z)->sharding.split2[1], DG_AXIS_NONE);
    /* a dim the group splits already cannot be split by it again */
    dg_node n = *dg_N(g, dg_Tc(g, y)->producer);
    dg_sharding o[DG_MAX_OUTPUTS];
    n.in[0] = y;
    assert_int_not_equal(dg_layout_infer(g, &n, o, NULL), DG_OK);
    /* dropout of the slice: the form with both coordinates keeps the layout */
    int key = dg_input_new(g, "rng_key", DG_I32, 1, DG_SHAPE(4));
    int cp_rank = dg_mesh_coord_input(g, DG_AXIS_CP), tp_rank = dg_mesh_coord_input(g, DG_AXIS_TP);
    dg_attrs a = dg_attrs_zero();
    a.f[0] = 0.1;
    a.i[1] = DG_AXIS_CP;
    a.i[2] = 2;
    a.i[3] = DG_AXIS_TP;
    a.i[4] = 2;
    int d = dg_add1(g, &dg_op_dropout, &a, (int[]){y, key, cp_rank, tp_rank}, 4, NULL);
    assert_true(d >= 0);
    assert_true(dg_layout_infer(g, dg_N(g, dg_Tc(g, d)->producer), o, NULL) == DG_OK);
    assert_int_equal(o[0].split[1], DG_AXIS_CP);
    assert_int_equal(o[0].split2[1], DG_AXIS_TP);
    dg_node three = *dg_N(g, dg_Tc(g, d)->producer);
    three.n_in = 3;
    assert_int_not_equal(dg_layout_infer(g, &three, o, NULL), DG_OK);
    dg_graph_free(g);
}

/* The layout cp_relabel's rule gives x (dim 0 split split/split2), or -1. */
static int relabel_rule(dg_graph *g, int mode, uint8_t split, uint8_t split2, dg_sharding *out) {
    int x = dg_input_new(g, "rows", DG_F32, 2, DG_SHAPE(8, 64));
    dg_T(g, x)->sharding.split[0] = split;
    dg_T(g, x)->sharding.split2[0] = split2;
    int y = dg_cp_relabel(g, x, mode);
    if (y < 0) return -1;
    return dg_layout_infer(g, dg_N(g, dg_Tc(g, y)->producer), out, NULL) == DG_OK ? 0 : -1;
}

static void test_relabel_inner_split(void **state) {
    (void)state;
    dg_graph *g = mesh22();
    dg_sharding o[DG_MAX_OUTPUTS];
    /* [S/cp, H] rows split cp then tp (SP inside the rank's chunks) */
    assert_int_equal(relabel_rule(g, DG_CP_TOKENS_TO_DATA, DG_AXIS_CP, DG_AXIS_TP, o), 0);
    assert_int_equal(o[0].split[0], DG_AXIS_TP);
    assert_int_equal(o[0].split2[0], DG_AXIS_NONE);
    assert_int_equal(relabel_rule(g, DG_CP_DATA_TO_TOKENS, DG_AXIS_TP, DG_AXIS_NONE, o), 0);
    assert_int_equal(o[0].split[0], DG_AXIS_CP);
    assert_int_equal(o[0].split2[0], DG_AXIS_TP);
    /* cp alone, replicated data: as before */
    assert_int_equal(relabel_rule(g, DG_CP_TOKENS_TO_DATA, DG_AXIS_CP, DG_AXIS_NONE, o), 0);
    assert_true(dg_layout_is_replicated(&o[0]));
    assert_int_equal(relabel_rule(g, DG_CP_DATA_TO_TOKENS, DG_AXIS_NONE, DG_AXIS_NONE, o), 0);
    assert_int_equal(o[0].split[0], DG_AXIS_CP);
    assert_int_equal(o[0].split2[0], DG_AXIS_NONE);
    /* tokens not split over cp, or data split over it already: refused */
    assert_int_equal(relabel_rule(g, DG_CP_TOKENS_TO_DATA, DG_AXIS_TP, DG_AXIS_NONE, o), -1);
    assert_int_equal(relabel_rule(g, DG_CP_DATA_TO_TOKENS, DG_AXIS_CP, DG_AXIS_NONE, o), -1);
    assert_int_equal(relabel_rule(g, DG_CP_DATA_TO_TOKENS, DG_AXIS_TP, DG_AXIS_CP, o), -1);
    dg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mixed_locality),
        cmocka_unit_test(test_cp_tokens),
        cmocka_unit_test(test_ulysses_layout),
        cmocka_unit_test(test_sp_scatter_in_cp),
        cmocka_unit_test(test_relabel_inner_split),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
