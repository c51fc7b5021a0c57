/* test_graph_verify.c — the verifier accepts a valid graph and rejects each
 * kind of malformed graph with a message naming the node and the rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "dg_collective.h"
#include "dg_verify.h"
#include "t_ops.h"

/* Verify must fail, and its message must contain every fragment given. */
static void expect_reject(const dg_graph *g, ...) {
    dg_err err = {{0}};
    int st = dg_verify(g, &err);
    if (st == DG_OK) fail_msg("dg_verify accepted a malformed graph");
    assert_int_equal(st, DG_EINPUT);
    va_list ap;
    va_start(ap, g);
    for (const char *frag; (frag = va_arg(ap, const char *)) != NULL;)
        if (!strstr(err.msg, frag)) fail_msg("message '%s' lacks '%s'", err.msg, frag);
    va_end(ap);
    assert_null(strchr(err.msg, '\n'));
}

static void expect_ok(const dg_graph *g) {
    dg_err err = {{0}};
    int st = dg_verify(g, &err);
    if (st != DG_OK) fail_msg("dg_verify rejected a valid graph: %s", err.msg);
}

/* x[4,8] @ w[8,16] -> relu -> + itself -> copy_to_group/all_reduce over tp */
static void test_valid_graph(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("valid");
    int x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(4, 8));
    int w = dg_param_new(g, "w", 2, DG_SHAPE(8, 16));
    int h = t_matmul(g, x, w, "mm");
    int r = t_relu(g, h, "relu");
    int y = t_add(g, r, r, "twice");
    int z = dg_all_reduce(g, y, DG_AXIS_TP, 2);
    int s = dg_graph_add(g, &t_op_sum, NULL, (int[]){y, z, y}, 3, NULL, "sum3");
    assert_true(s >= 0);
    assert_int_equal(g->status, DG_OK);
    expect_ok(g);
    /* an optimizer-state and a gradient leaf may be read without a producer */
    int m = dg_tensor_new(g, "m", DG_F32, 2, DG_SHAPE(4, 16), DG_ROLE_OPTIMIZER);
    int gr = dg_tensor_new(g, "gw", DG_F32, 2, DG_SHAPE(4, 16), DG_ROLE_GRADIENT);
    assert_true(t_add(g, m, gr, "adam") >= 0);
    expect_ok(g);
    dg_graph_free(g);
}

static void test_cycle(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("cycle");
    int x = dg_input_new(g, "x", DG_F32, 1, DG_SHAPE(4));
    int a = dg_tensor_new(g, "a", DG_F32, 1, DG_SHAPE(4), DG_ROLE_ACTIVATION);
    int b = dg_tensor_new(g, "b", DG_F32, 1, DG_SHAPE(4), DG_ROLE_ACTIVATION);
    dg_graph_add_raw(g, &t_op_add, NULL, (int[]){x, b}, 2, &a, 1, "first");
    dg_graph_add_raw(g, &t_op_relu, NULL, &a, 1, &b, 1, "second");
    expect_reject(g, "node 0 'first' (op t_add): rule 'acyclic' broken", NULL);
    dg_graph_free(g);

    /* a node reading its own output is the smallest cycle */
    g = dg_graph_new("self");
    a = dg_tensor_new(g, "a", DG_F32, 1, DG_SHAPE(4), DG_ROLE_ACTIVATION);
    dg_graph_add_raw(g, &t_op_relu, NULL, &a, 1, &a, 1, "ouroboros");
    expect_reject(g, "node 0 'ouroboros' (op t_relu): rule 'acyclic' broken", NULL);
    dg_graph_free(g);
}

/* Ordering edges take part in the acyclic rule: a cycle made only of
 * ordering edges, or of data and ordering edges, is rejected at a node on
 * it (never at one merely downstream of it), naming an ordering edge on it. */
static void test_order_cycle(void **state) {
    (void)state;
    /* x -> relu0 -> relu1 -> relu2 (data), and relu2 -> relu0 (ordering) */
    dg_graph *g = dg_graph_new("mixed");
    int x = dg_input_new(g, "x", DG_F32, 1, DG_SHAPE(4));
    int h = t_relu(g, x, "relu0");
    h = t_relu(g, h, "relu1");
    t_relu(g, h, "relu2");
    expect_ok(g);
    assert_int_equal(dg_graph_add_order(g, 0, 2), 0); /* parallel to data: fine */
    expect_ok(g);
    assert_int_equal(dg_graph_add_order(g, 2, 0), 1);
    expect_reject(g, "node 0 'relu0' (op t_relu): rule 'acyclic' broken: it is on a cycle of 3 nodes",
                  "through ordering edge 2 -> 0", NULL);
    dg_graph_free(g);

    /* two independent nodes ordered both ways; node 0 reads node 1's output,
     * so it waits on the cycle without being on it */
    g = dg_graph_new("order_only");
    x = dg_input_new(g, "x", DG_F32, 1, DG_SHAPE(4));
    int a = dg_tensor_new(g, "a", DG_F32, 1, DG_SHAPE(4), DG_ROLE_ACTIVATION);
    int b = dg_tensor_new(g, "b", DG_F32, 1, DG_SHAPE(4), DG_ROLE_ACTIVATION);
    int c = dg_tensor_new(g, "c", DG_F32, 1, DG_SHAPE(4), DG_ROLE_ACTIVATION);
    dg_graph_add_raw(g, &t_op_relu, NULL, &a, 1, &c, 1, "downstream");
    dg_graph_add_raw(g, &t_op_relu, NULL, &x, 1, &a, 1, "left");
    dg_graph_add_raw(g, &t_op_relu, NULL, &x, 1, &b, 1, "right");
    expect_ok(g);
    dg_graph_add_order(g, 1, 2);
    expect_ok(g);
    dg_graph_add_order(g, 2, 1);
    expect_reject(g, "node 1 'left' (op t_relu): rule 'acyclic' broken: it is on a cycle of 2 nodes",
                  "through ordering edge 2 -> 1", NULL);
    dg_graph_free(g);

    /* a node ordered after itself */
    g = dg_graph_new("self_order");
    x = dg_input_new(g, "x", DG_F32, 1, DG_SHAPE(4));
    t_relu(g, x, "impatient");
    dg_graph_add_order(g, 0, 0);
    expect_reject(g, "node 0 'impatient' (op t_relu): rule 'acyclic' broken: it is on a cycle of 1 node",
                  "through ordering edge 0 -> 0", NULL);
    dg_graph_free(g);
}

/* An ordering edge naming a node that does not exist: the builder refuses
 * it, and one written into the graph by hand is an 'ids' error. */
static void test_order_ids(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("order_ids");
    int x = dg_input_new(g, "x", DG_F32, 1, DG_SHAPE(4));
    t_relu(g, x, "r");
    assert_int_equal(dg_graph_add_order(g, 0, 7), -1);
    expect_reject(g, "graph 'order_ids': rule 'builder' broken: ordering edge 0 -> 7", NULL);
    dg_graph_free(g);

    g = dg_graph_new("order_ids");
    x = dg_input_new(g, "x", DG_F32, 1, DG_SHAPE(4));
    t_relu(g, x, "r");
    dg_graph_add_order(g, 0, 0);
    g->order[0].after = 7;
    expect_reject(g, "graph 'order_ids': rule 'ids' broken: ordering edge 0 is 0 -> 7, graph has 1 nodes",
                  NULL);
    dg_graph_free(g);
}

static void test_shape_mismatch(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("shape");
    int x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(4, 8));
    int w = dg_param_new(g, "w", 2, DG_SHAPE(8, 32));
    int o = dg_tensor_new(g, "attn_out", DG_F32, 2, DG_SHAPE(4, 64), DG_ROLE_ACTIVATION);
    int nid = dg_graph_add_raw(g, &t_op_matmul, NULL, (int[]){x, w}, 2, &o, 1, "attn_out");
    dg_err err = {{0}};
    assert_int_equal(dg_verify(g, &err), DG_EINPUT);
    char want[256];
    snprintf(want, sizeof want,
             "node %d 'attn_out' (op t_matmul): rule 'shape' broken: output 0 is [4,64], op infers [4,32]",
             nid);
    assert_string_equal(err.msg, want);

    /* rank mismatch is a shape mismatch too */
    dg_graph *g2 = dg_graph_new("rank");
    x = dg_input_new(g2, "x", DG_F32, 2, DG_SHAPE(4, 8));
    o = dg_tensor_new(g2, "flat", DG_F32, 1, DG_SHAPE(32), DG_ROLE_ACTIVATION);
    dg_graph_add_raw(g2, &t_op_relu, NULL, &x, 1, &o, 1, "r");
    expect_reject(g2, "node 0 'r' (op t_relu): rule 'shape' broken: output 0 is [32], op infers [4,8]",
                  NULL);
    dg_graph_free(g2);
    dg_graph_free(g);
}

static void test_dtype_mismatch(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("dtype");
    int x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(4, 8));
    int w = dg_param_new(g, "w", 2, DG_SHAPE(8, 16));
    int o = dg_tensor_new(g, "h", DG_BF16, 2, DG_SHAPE(4, 16), DG_ROLE_ACTIVATION);
    dg_graph_add_raw(g, &t_op_matmul, NULL, (int[]){x, w}, 2, &o, 1, "proj");
    expect_reject(g, "node 0 'proj' (op t_matmul): rule 'dtype' broken: output 0 is bf16, op infers f32",
                  NULL);
    dg_graph_free(g);
}

static void test_infer_rejects_inputs(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("infer");
    int a = dg_input_new(g, "a", DG_F32, 2, DG_SHAPE(4, 8));
    int b = dg_input_new(g, "b", DG_F32, 2, DG_SHAPE(4, 9));
    int o = dg_tensor_new(g, "o", DG_F32, 2, DG_SHAPE(4, 8), DG_ROLE_ACTIVATION);
    dg_graph_add_raw(g, &t_op_add, NULL, (int[]){a, b}, 2, &o, 1, "bad_add");
    expect_reject(g, "node 0 'bad_add' (op t_add): rule 'infer' broken:", "[4,8]", "[4,9]", NULL);
    dg_graph_free(g);
}

static void test_dangling_input(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("dangling");
    int ghost = dg_tensor_new(g, "ghost", DG_F32, 1, DG_SHAPE(4), DG_ROLE_ACTIVATION);
    int x = dg_input_new(g, "x", DG_F32, 1, DG_SHAPE(4));
    int y = t_relu(g, x, "ok");
    assert_true(y >= 0);
    assert_true(t_add(g, y, ghost, "haunted") >= 0);
    expect_reject(g,
                  "node 1 'haunted' (op t_add): rule 'dangling-input' broken: input 1 'ghost' "
                  "(tensor 0) is an activation that no node produces",
                  NULL);
    dg_graph_free(g);
}

static void test_produced_twice(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("twice");
    int x = dg_input_new(g, "x", DG_F32, 1, DG_SHAPE(4));
    int y = dg_tensor_new(g, "y", DG_F32, 1, DG_SHAPE(4), DG_ROLE_ACTIVATION);
    dg_graph_add_raw(g, &t_op_relu, NULL, &x, 1, &y, 1, "writer_a");
    dg_graph_add_raw(g, &t_op_relu, NULL, &x, 1, &y, 1, "writer_b");
    expect_reject(g,
                  "node 1 'writer_b' (op t_relu): rule 'single-producer' broken: output 0 'y' "
                  "(tensor 1) is also produced by node 0 'writer_a' (op t_relu)",
                  NULL);
    dg_graph_free(g);
}

static void test_producer_field(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("producer");
    int x = dg_input_new(g, "x", DG_F32, 1, DG_SHAPE(4));
    int y = t_relu(g, x, "r");
    dg_T(g, y)->producer = -1; /* a pass forgot to record the writer */
    expect_reject(g, "node 0 'r' (op t_relu): rule 'producer' broken", NULL);
    dg_T(g, y)->producer = 0;
    dg_T(g, x)->producer = 0; /* claims a writer that does not list it */
    expect_reject(g, "node 0 'r' (op t_relu): rule 'producer' broken: tensor 0 'x'", NULL);
    dg_graph_free(g);
}

static void test_collective_without_group(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("nogroup");
    int x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(4, 8));
    dg_attrs a;
    memset(&a, 0, sizeof a);
    a.i[DG_COLL_GROUP_SIZE] = 2;
    /* added without the dg_all_reduce builder, so no group is set */
    assert_true(dg_graph_add(g, &dg_op_all_reduce, &a, &x, 1, NULL, "lonely_ar") >= 0);
    expect_reject(g, "node 0 'lonely_ar' (op all_reduce): rule 'group' broken", NULL);
    dg_N(g, 0)->group = DG_AXIS_TP;
    expect_ok(g);
    dg_graph_free(g);
}

static void test_input_count(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("count");
    int x = dg_input_new(g, "x", DG_F32, 1, DG_SHAPE(4));
    int y = dg_tensor_new(g, "y", DG_F32, 1, DG_SHAPE(4), DG_ROLE_ACTIVATION);
    dg_graph_add_raw(g, &t_op_sum, NULL, (int[]){x, x, x, x, x}, 5, &y, 1, "too_many");
    expect_reject(g, "node 0 'too_many' (op t_sum): rule 'inputs' broken: 5 inputs, op takes 1..4",
                  NULL);
    dg_graph_free(g);

    g = dg_graph_new("count0");
    x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(4, 4));
    y = dg_tensor_new(g, "y", DG_F32, 2, DG_SHAPE(4, 4), DG_ROLE_ACTIVATION);
    dg_graph_add_raw(g, &t_op_matmul, NULL, &x, 1, &y, 1, "too_few");
    expect_reject(g, "node 0 'too_few' (op t_matmul): rule 'inputs' broken: 1 inputs, op takes 2..2",
                  NULL);
    dg_graph_free(g);
}

static void test_ids_out_of_range(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("ids");
    int x = dg_input_new(g, "x", DG_F32, 1, DG_SHAPE(4));
    int y = dg_tensor_new(g, "y", DG_F32, 1, DG_SHAPE(4), DG_ROLE_ACTIVATION);
    dg_graph_add_raw(g, &t_op_add, NULL, (int[]){x, 99}, 2, &y, 1, "wild");
    expect_reject(g, "node 0 'wild' (op t_add): rule 'ids' broken: input 1 is tensor 99, graph has 2 tensors",
                  NULL);
    dg_graph_free(g);

    g = dg_graph_new("outputs");
    x = dg_input_new(g, "x", DG_F32, 1, DG_SHAPE(4));
    dg_graph_add_raw(g, &t_op_relu, NULL, &x, 1, NULL, 0, "no_out");
    expect_reject(g, "node 0 'no_out' (op t_relu): rule 'outputs' broken: 0 outputs, op produces 1",
                  NULL);
    dg_graph_free(g);
}

static void test_builder_error_and_stage_prefix(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("builder");
    int x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(4, 8));
    int w = dg_param_new(g, "w", 2, DG_SHAPE(9, 16));
    assert_int_equal(t_matmul(g, x, w, "mm"), -1);
    expect_reject(g, "graph 'builder': rule 'builder' broken:", "inner dims 8 and 9 differ", NULL);
    dg_graph_free(g);

    g = dg_graph_new("after");
    x = dg_input_new(g, "x", DG_F32, 1, DG_SHAPE(4));
    int y = dg_tensor_new(g, "y", DG_F32, 1, DG_SHAPE(4), DG_ROLE_ACTIVATION);
    t_relu(g, y, "r");
    dg_err err = {{0}};
    assert_int_equal(dg_verify_after(g, "tp pass", &err), DG_EINPUT);
    assert_non_null(strstr(err.msg, "after tp pass: node 0 'r' (op t_relu): rule 'dangling-input'"));
    dg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_graph),
        cmocka_unit_test(test_cycle),
        cmocka_unit_test(test_order_cycle),
        cmocka_unit_test(test_order_ids),
        cmocka_unit_test(test_shape_mismatch),
        cmocka_unit_test(test_dtype_mismatch),
        cmocka_unit_test(test_infer_rejects_inputs),
        cmocka_unit_test(test_dangling_input),
        cmocka_unit_test(test_produced_twice),
        cmocka_unit_test(test_producer_field),
        cmocka_unit_test(test_collective_without_group),
        cmocka_unit_test(test_input_count),
        cmocka_unit_test(test_ids_out_of_range),
        cmocka_unit_test(test_builder_error_and_stage_prefix),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
