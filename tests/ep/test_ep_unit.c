/* test_ep_unit.c — the EP pieces that need no second rank:
 *   - chunk sorting and the count transpose (kernels), round trips;
 *   - gradchecks of moe_ep_sort_chunks (both directions) and of
 *     split_rows / concat_rows (finite differences, tests/common);
 *   - all_to_all_v over a group of one (the "self" comm) through the
 *     scheduler, forward and backward, and its shape rule's refusals;
 *   - dg_ep_opts_check / dg_ep_parse_dispatcher messages name the flags;
 *   - with ep_size 1 and one chunk, dg_ep_experts emits exactly the
 *     single-rank block (permute, grouped GEMM, swiglu, grouped GEMM,
 *     unpermute), which is why moe/dg_model.c may call it unconditionally. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "dg_layout.h"
#include "dg_autodiff.h"
#include "dg_collective_v.h"
#include "dg_cpu_ep.h"
#include "dg_cpu_gemm.h"
#include "dg_ep.h"
#include "dg_gradcheck.h"
#include "dg_op_basic.h"
#include "dg_ops.h"
#include "dg_sched.h"

/* ---- kernels ------------------------------------------------------------------ */

static void test_sort_kernel(void **state) {
    (void)state;
    /* grid P=2 x G=3, counts (r, e); rows tagged 10*r + e, then junk */
    const int32_t cnt[6] = {1, 0, 2, 2, 1, 1};
    float x[9] = {0, 2, 2, 10, 10, 11, 12, 77, 77}, y[9], z[9];
    assert_int_equal(dg_cpu_ep_sort_chunks(x, cnt, 2, 3, 0, 9, sizeof(float), y), 0);
    const float want[9] = {0, 10, 10, 11, 2, 2, 12, 0, 0};
    assert_memory_equal(y, want, sizeof want);
    assert_int_equal(dg_cpu_ep_sort_chunks(y, cnt, 2, 3, 1, 9, sizeof(float), z), 0);
    assert_memory_equal(z, x, 7 * sizeof(float));
    assert_true(z[7] == 0 && z[8] == 0);
    assert_int_equal(dg_cpu_ep_sort_chunks(x, cnt, 2, 3, 0, 6, sizeof(float), y), -1);
    const int32_t neg[6] = {1, -1, 0, 0, 0, 0};
    assert_int_equal(dg_cpu_ep_sort_chunks(x, neg, 2, 3, 0, 9, sizeof(float), y), -1);
}

static void test_transpose_and_sums(void **state) {
    (void)state;
    int32_t x[12], y[12], z[12], s[3];
    for (int i = 0; i < 12; i++) x[i] = i; /* [A=2, B=3, G=2] */
    dg_cpu_ep_transpose(x, 2, 3, 2, sizeof(int32_t), y);
    const int32_t want[12] = {0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11};
    assert_memory_equal(y, want, sizeof want);
    dg_cpu_ep_transpose(y, 3, 2, 2, sizeof(int32_t), z);
    assert_memory_equal(z, x, sizeof x);
    dg_cpu_ep_count_sum(x, 2, 3, 1, s); /* over ranks: [G=3] */
    assert_true(s[0] == 3 && s[1] == 5 && s[2] == 7);
    dg_cpu_ep_count_sum(x, 2, 3, 0, s); /* over experts: [P=2] */
    assert_true(s[0] == 3 && s[1] == 12);
}

/* ---- gradchecks ----------------------------------------------------------------- */

typedef struct sort_ctx {
    int inverse, counts;
} sort_ctx;

static int build_sort(dg_graph *g, void *vctx) {
    sort_ctx *c = vctx;
    int x = dg_param_new(g, "x", 2, DG_SHAPE(8, 3));
    c->counts = dg_input_new(g, "counts", DG_I32, 1, DG_SHAPE(6));
    return dg_moe_ep_sort_chunks(g, x, c->counts, 2, c->inverse);
}

static void init_sort(const dg_graph *g, dg_buffers *b, void *vctx) {
    (void)g;
    const int32_t cnt[6] = {1, 0, 2, 2, 1, 1}; /* 7 of 8 rows: one padding row */
    memcpy(b->ptr[((sort_ctx *)vctx)->counts], cnt, sizeof cnt);
}

static void test_sort_gradcheck(void **state) {
    (void)state;
    for (int inv = 0; inv < 2; inv++) {
        sort_ctx c = {inv, -1};
        assert_int_equal(dg_gradcheck(inv ? "ep_unsort" : "ep_sort", build_sort, init_sort, &c, NULL), 0);
    }
}

static int build_split_concat(dg_graph *g, void *ctx) {
    (void)ctx;
    int x = dg_param_new(g, "x", 2, DG_SHAPE(8, 3));
    int parts[4];
    if (dg_moe_ep_split_rows(g, x, 4, parts) != DG_OK) return -1;
    int rev[4] = {parts[3], parts[1], parts[2], parts[0]}; /* a real permutation */
    return dg_moe_ep_concat_rows(g, rev, 4);
}

static void test_split_concat_gradcheck(void **state) {
    (void)state;
    assert_int_equal(dg_gradcheck("ep_split_concat", build_split_concat, NULL, NULL, NULL), 0);
}

/* ---- all_to_all_v on a group of one ---------------------------------------------- */

static void test_a2av_self(void **state) {
    (void)state;
    dg_err err = {{0}};
    dg_graph *g = dg_graph_new("a2av_self");
    int x = dg_param_new(g, "x", 2, DG_SHAPE(5, 2));
    int sc = dg_input_new(g, "sc", DG_I32, 1, DG_SHAPE(2)); /* G = 2 chunks */
    int r = dg_input_new(g, "r", DG_F32, 2, DG_SHAPE(6, 2));
    int y = dg_all_to_all_v(g, x, sc, sc, DG_AXIS_EP, 1, 6);
    int loss = dg_sum(g, dg_mul(g, y, r));
    assert_int_equal(g->status, DG_OK);
    assert_int_equal(dg_autodiff(g, loss, dg_ops_autodiff(), NULL, &err), DG_OK);
    int dx = g->tensors[x].grad;
    int keep[] = {y};
    dg_sched_opts so = {.keep = keep, .n_keep = 1};
    dg_sched_plan *p = dg_sched_plan_new(g, &so, &err);
    assert_non_null(p);
    dg_runtime_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.compute_threads = 1;
    ro.no_pin = 1;
    dg_runtime *rt = dg_runtime_new(&ro, &err);
    assert_int_equal(dg_runtime_bind(rt, p, &err), DG_OK);
    float *xv = dg_runtime_ptr(rt, x), *rv = dg_runtime_ptr(rt, r);
    int32_t *s = dg_runtime_ptr(rt, sc);
    s[0] = 1, s[1] = 3; /* 4 of 5 rows sent (to itself) */
    for (int i = 0; i < 10; i++) xv[i] = (float)(i + 1);
    for (int i = 0; i < 12; i++) rv[i] = (float)(100 + i);
    assert_int_equal(dg_sched_run(p, rt, NULL, &err), DG_OK);
    const float *yv = dg_runtime_ptr(rt, y), *dv = dg_runtime_ptr(rt, dx);
    for (int i = 0; i < 8; i++) assert_true(yv[i] == xv[i]);
    for (int i = 8; i < 12; i++) assert_true(yv[i] == 0.0f);
    for (int i = 0; i < 8; i++) assert_true(dv[i] == rv[i]);
    for (int i = 8; i < 10; i++) assert_true(dv[i] == 0.0f);
    s[1] = 6; /* 7 rows: past both bounds */
    assert_int_not_equal(dg_sched_run(p, rt, NULL, &err), DG_OK);
    assert_non_null(strstr(err.msg, "static bound"));
    dg_runtime_free(rt);
    dg_sched_plan_free(p);
    dg_graph_free(g);

    /* counts that do not split over the group are refused when built */
    g = dg_graph_new("a2av_bad");
    x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(4, 2));
    sc = dg_input_new(g, "sc", DG_I32, 1, DG_SHAPE(3));
    assert_int_equal(dg_all_to_all_v(g, x, sc, sc, DG_AXIS_EP, 2, 4), -1);
    assert_non_null(strstr(g->err.msg, "send_counts"));
    dg_graph_free(g);
}

/* ---- options ----------------------------------------------------------------------- */

static void test_opts(void **state) {
    (void)state;
    dg_err err = {{0}};
    dg_ep_opts o = dg_ep_opts_default();
    assert_int_equal(dg_ep_opts_check(&o, 8, 32, &err), DG_OK);
    o.ep_size = 3;
    assert_int_equal(dg_ep_opts_check(&o, 8, 32, &err), DG_EINPUT);
    assert_non_null(strstr(err.msg, "--expert-model-parallel-size 3 does not divide --num-experts 8"));
    o.ep_size = 2;
    o.chunks = 3;
    assert_int_equal(dg_ep_opts_check(&o, 8, 32, &err), DG_EINPUT);
    assert_non_null(strstr(err.msg, "--moe-a2a-overlap-chunks 3"));
    dg_ep_dispatcher d;
    assert_int_equal(dg_ep_parse_dispatcher("allgather", &d, &err), DG_OK);
    assert_int_equal(d, DG_EP_DISPATCH_ALLGATHER);
    assert_int_equal(dg_ep_parse_dispatcher("flex", &d, &err), DG_EINPUT);
    assert_non_null(strstr(err.msg, "--moe-token-dispatcher-type"));
}

/* ---- ep_size 1 is the single-rank block -------------------------------------------- */

static void test_ep1_is_local_block(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("ep1");
    int x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(8, 4));
    int probs = dg_input_new(g, "probs", DG_F32, 2, DG_SHAPE(8, 2));
    int idx = dg_input_new(g, "idx", DG_I32, 2, DG_SHAPE(8, 2));
    int w1 = dg_ep_expert_param(g, "w1", 4, 1, 6, 4);
    int w2 = dg_ep_expert_param(g, "w2", 4, 1, 4, 3);
    assert_int_equal(g->tensors[w1].sharding.split[0], DG_AXIS_NONE);
    int first = g->n_nodes;
    dg_ep_opts o = dg_ep_opts_default();
    dg_ep_experts_args a = {.x = x, .probs = probs, .indices = idx, .w1 = w1, .w2 = w2, .num_experts = 4};
    assert_true(dg_ep_experts(g, &o, &a) >= 0);
    const char *want[] = {"moe_permute", "grouped_gemm", "swiglu", "grouped_gemm", "moe_unpermute"};
    assert_int_equal(g->n_nodes - first, 5);
    for (int i = 0; i < 5; i++) assert_string_equal(g->nodes[first + i].op->name, want[i]);
    /* and with EP the expert weights are slices marked for resharding */
    int w3 = dg_ep_expert_param(g, "w3", 4, 2, 6, 4);
    assert_int_equal(g->tensors[w3].shape[0], 2);
    assert_int_equal(g->tensors[w3].sharding.split[0], DG_AXIS_EP);
    /* an expert weight by its placement, whatever the EP size; an input is not */
    assert_true(dg_param_is_expert(&g->tensors[w3]));
    assert_true(dg_param_is_expert(&g->tensors[w1]));
    assert_false(dg_param_is_expert(&g->tensors[x]));
    dg_graph_free(g);
}

int main(void) {
    dg_cpu_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sort_kernel),        cmocka_unit_test(test_transpose_and_sums),
        cmocka_unit_test(test_sort_gradcheck),     cmocka_unit_test(test_split_concat_gradcheck),
        cmocka_unit_test(test_a2av_self),          cmocka_unit_test(test_opts),
        cmocka_unit_test(test_ep1_is_local_block),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
