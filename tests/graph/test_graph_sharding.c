/* test_graph_sharding.c — layouts: the rules propagate them as a graph is
 * built, and the verifier rejects, with one line naming the node, a layout
 * that disagrees with its producer's rule, a node whose inputs need a
 * collective first, a collective where no layout changes, and a gradient
 * bucket reduced over the wrong group. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "dg_collective.h"
#include "dg_layout.h"
#include "dg_verify.h"
#include "t_ops.h"

/* dg_verify's one-line message must hold both fragments. */
static void rejects(const dg_graph *g, const char *who, const char *what) {
    dg_err err = {{0}};
    if (dg_verify(g, &err) == DG_OK) fail_msg("dg_verify accepted a graph with a bad layout");
    if (!strstr(err.msg, who) || !strstr(err.msg, what))
        fail_msg("message '%s' lacks '%s' or '%s'", err.msg, who, what);
    assert_null(strchr(err.msg, '\n'));
}

static void accepts(const dg_graph *g) {
    dg_err err = {{0}};
    if (dg_verify(g, &err) != DG_OK) fail_msg("dg_verify rejected a valid graph: %s", err.msg);
}

/* Megatron's TP MLP: copy_to_group, column-parallel fc1, row-parallel fc2,
 * all_reduce, residual. Returns the residual; *fc1 and *fc2 their outputs. */
static int tp_mlp(dg_graph *g, int *fc1, int *fc2, int with_all_reduce) {
    int x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(4, 8));
    int w1 = dg_param_new(g, "w1", 2, DG_SHAPE(8, 8));
    int w2 = dg_param_new(g, "w2", 2, DG_SHAPE(8, 8));
    dg_T(g, w1)->sharding.split[1] = DG_AXIS_TP;
    dg_T(g, w2)->sharding.split[0] = DG_AXIS_TP;
    int xc = dg_copy_to_group(g, x, DG_AXIS_TP, 2);
    *fc1 = t_matmul(g, xc, w1, "fc1");
    *fc2 = t_matmul(g, t_relu(g, *fc1, "act"), w2, "fc2");
    int y = with_all_reduce ? dg_all_reduce(g, *fc2, DG_AXIS_TP, 2) : *fc2;
    return t_add(g, x, y, "residual");
}

static void test_rules_propagate(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("tp_mlp");
    int fc1, fc2;
    int r = tp_mlp(g, &fc1, &fc2, 1);
    char b[64];
    assert_string_equal(dg_sharding_str(dg_Tc(g, fc1), b), "[-,tp]");
    assert_string_equal(dg_sharding_str(dg_Tc(g, fc2), b), "[-,-]+partial(tp)");
    assert_string_equal(dg_sharding_str(dg_Tc(g, r), b), "[-,-]");
    accepts(g);
    dg_graph_free(g);
}

/* A layout set by hand on an edge that its producer's rule does not give. */
static void test_layout_mismatch_on_edge(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("mismatch");
    int fc1, fc2;
    tp_mlp(g, &fc1, &fc2, 1);
    dg_T(g, fc1)->sharding.split[1] = DG_AXIS_NONE;
    dg_T(g, fc1)->sharding.split[0] = DG_AXIS_TP;
    rejects(g, "'fc1' (op t_matmul): rule 'layout' broken",
            "output 0 'fc1' is laid out [tp,-], but the op's rule gives [-,tp]");
    dg_graph_free(g);
}

/* The row-parallel output (a partial sum over tp) added to the replicated
 * residual without its all_reduce. */
static void test_missing_collective(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("missing");
    int fc1, fc2;
    tp_mlp(g, &fc1, &fc2, 0);
    rejects(g, "'residual' (op t_add): rule 'layout' broken", "a collective is missing before it");
    dg_graph_free(g);
}

/* An all_reduce over tp of a tensor that is no partial sum: a collective
 * where no layout changes. */
static void test_misplaced_collective(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("misplaced");
    int x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(4, 8));
    int y = dg_all_reduce(g, x, DG_AXIS_TP, 2);
    snprintf(dg_N(g, dg_Tc(g, y)->producer)->name, DG_NAME_LEN, "stray_ar");
    rejects(g, "'stray_ar' (op all_reduce): rule 'layout' broken", "no layout changes here");
    dg_graph_free(g);
}

/* An expert weight (dim 0 over ep) is replicated over the expert-data-
 * parallel ranks: its gradient bucket must be reduced over edp, not dp. */
static void test_gradient_wrong_group(void **state) {
    (void)state;
    for (int right = 0; right < 2; right++) {
        dg_graph *g = dg_graph_new("grad_group");
        dg_param_spec spec = {0};
        spec.place.split[0] = DG_AXIS_EP; /* what makes it an expert weight: its placement */
        int w = dg_param(g, "experts.fc1", 2, DG_SHAPE(2, 8), &spec);
        dg_T(g, w)->sharding.split[0] = DG_AXIS_EP;
        int gw = dg_tensor_new(g, "experts.fc1.grad", DG_F32, 2, DG_SHAPE(2, 8), DG_ROLE_GRADIENT);
        dg_T(g, w)->grad = gw;
        dg_graph_set_phase(g, DG_PHASE_BACKWARD);
        int packed = dg_graph_add(g, &t_op_sum, NULL, &gw, 1, NULL, "bucket0/pack");
        int red = dg_all_reduce(g, packed, right ? DG_AXIS_EDP : DG_AXIS_DP, 2);
        snprintf(dg_N(g, dg_Tc(g, red)->producer)->name, DG_NAME_LEN, "bucket0/all_reduce");
        if (right)
            accepts(g);
        else
            rejects(g, "'bucket0/all_reduce' (op all_reduce): rule 'grad-group' broken",
                    "gradient of 'experts.fc1' over dp, but that parameter is replicated over edp");
        dg_graph_free(g);
    }
}

/* Layouts as text: two axes on a dim and strided splits. */
static void test_layout_text(void **state) {
    (void)state;
    dg_sharding s;
    memset(&s, 0, sizeof s);
    s.split[1] = DG_AXIS_CP;
    s.split2[1] = DG_AXIS_TP;
    s.split[2] = DG_AXIS_TP;
    s.stride[2] = 2;
    char b[64];
    assert_string_equal(dg_layout_str(&s, 3, b), "[-,cp+tp,tp/2]");
    dg_sharding t = s;
    assert_true(dg_layout_equal(&s, &t));
    t.stride[2] = 0;
    assert_false(dg_layout_equal(&s, &t));
    assert_false(dg_layout_is_replicated(&s));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rules_propagate),
        cmocka_unit_test(test_layout_mismatch_on_edge),
        cmocka_unit_test(test_missing_collective),
        cmocka_unit_test(test_misplaced_collective),
        cmocka_unit_test(test_gradient_wrong_group),
        cmocka_unit_test(test_layout_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
