/* test_etp_unit.c — MoE under tensor parallelism without MPI: the step
 * pipeline on the tiny MoE model at tp 2 (the expert weights' layouts for
 * ETP 2 and ETP 1, the collectives of each, a verified graph), the
 * verifier's grad-group rule on the expert group's size (ETP 1 needs the tp
 * ranks in it, ETP 2 must not have them), and the token-slice masks' kernels. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "dg_etp.h"
#include "dg_layout.h"
#include "dg_model.h"
#include "dg_op_basic.h"
#include "dg_pipeline.h"

static const dg_tensor *param(const dg_graph *g, const char *name) {
    for (int t = 0; t < g->n_tensors; t++)
        if (g->tensors[t].role == DG_ROLE_PARAMETER && !strcmp(g->tensors[t].name, name)) return &g->tensors[t];
    fail_msg("no parameter '%s'", name);
    return NULL;
}

static int count(const dg_graph *g, const char *op, dg_axis group) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        n += g->nodes[i].phase == DG_PHASE_FORWARD && !strcmp(g->nodes[i].op->name, op) && g->nodes[i].group == group;
    return n;
}

/* The tiny MoE model (2 MoE layers, 4 experts) through the pipeline at tp 2,
 * one rank per tp group's data shard (dp 1), the expert group of edp ranks,
 * up to `stop`. Returns the status; *out the graph on success. */
static int run(int etp, int edp, dg_stage stop, dg_graph **out, dg_err *err) {
    dg_model_config c;
    dg_model_config_tiny(&c);
    dg_graph *logical = dg_graph_new("logical");
    dg_model_io io;
    if (dg_model_build_forward(logical, &c, &io, err) != DG_OK) fail_msg("%s", err->msg);
    dg_dp_opts dpo = {.bucket_elems = 1 << 20, .dp_size = 1, .edp_size = edp, .layout_only = 1};
    dg_pipeline_opts po = {.loss = io.loss, .n_microbatches = 1, .autodiff = dg_ops_autodiff(), .scale = &dg_op_scale,
                           .dp = &dpo, .stop_after = stop, .step_name = "step", .tp = {.tp_size = 2}};
    po.ep = (dg_pass_ep_opts){1, 0, 1, 0, etp};
    dg_pipeline_result r;
    int st = dg_pipeline_run(logical, &po, &r, err);
    dg_graph_free(logical);
    *out = NULL;
    if (st == DG_OK) {
        *out = r.g;
        r.g = NULL;
        dg_pipeline_result_free(&r);
    }
    return st;
}

/* ETP 2 (= tp): fc1 split on its output features (gate and up each), fc2 on
 * its input features; a copy_to_group and an all_reduce over tp around
 * each layer's expert MLP; no token mask. */
static void test_etp2_splits_the_experts(void **state) {
    (void)state;
    dg_err err = {{0}};
    dg_graph *g = NULL;
    if (run(2, 1, DG_STAGE_EP, &g, &err) != DG_OK) fail_msg("%s", err.msg);
    char b[64];
    const dg_tensor *w1 = param(g, "decoder.layers.0.mlp.experts.linear_fc1.weight");
    const dg_tensor *w2 = param(g, "decoder.layers.0.mlp.experts.linear_fc2.weight");
    assert_string_equal(dg_layout_str(&w1->sharding, 3, b), "[-,tp/2,-]");
    assert_int_equal(w1->shape[1], 2 * 96 / 2);
    assert_string_equal(dg_layout_str(&w2->sharding, 3, b), "[-,-,tp]");
    assert_int_equal(w2->shape[2], 96 / 2);
    /* per layer, attention: a copy_to_group (before QKV) and an all_reduce
     * (after the projection); the experts: one more of each; outside the
     * layers the vocab-parallel lookup's all_reduce and the output layer's
     * copy_to_group */
    assert_int_equal(count(g, "copy_to_group", DG_AXIS_TP), 2 * 2 + 1);
    assert_int_equal(count(g, "all_reduce", DG_AXIS_TP), 2 * 2 + 1);
    assert_int_equal(count(g, "moe_tp_mask_rows", DG_AXIS_NONE), 0);
    dg_graph_free(g);
}

/* ETP 1: whole experts; x and probs copied into the tp region, the indices
 * and the output masked to the rank's token slice, one all_reduce. */
static void test_etp1_slices_the_tokens(void **state) {
    (void)state;
    dg_err err = {{0}};
    dg_graph *g = NULL;
    if (run(1, 2, DG_STAGE_EP, &g, &err) != DG_OK) fail_msg("%s", err.msg);
    const dg_tensor *w1 = param(g, "decoder.layers.1.mlp.experts.linear_fc1.weight");
    assert_true(dg_layout_is_replicated(&w1->sharding));
    assert_int_equal(w1->shape[1], 2 * 96);
    /* per layer: the attention's pair, the copies of x and probs, the
     * output's all_reduce; outside the layers the vocabulary's pair */
    assert_int_equal(count(g, "copy_to_group", DG_AXIS_TP), 2 * 3 + 1);
    assert_int_equal(count(g, "all_reduce", DG_AXIS_TP), 2 * 2 + 1);
    assert_int_equal(count(g, "moe_tp_mask_rows", DG_AXIS_NONE), 2);
    assert_int_equal(count(g, "moe_tp_mask_indices", DG_AXIS_NONE), 2);
    assert_true(dg_mesh_coord_input(g, DG_AXIS_TP) >= 0);
    dg_graph_free(g);
}

/* The expert group must hold exactly the ranks replicating the experts:
 * tp x dp under ETP 1 (2 here), dp under ETP 2 (1). */
static void test_grad_group_size(void **state) {
    (void)state;
    dg_err err = {{0}};
    dg_graph *g = NULL;
    static const struct {
        int etp, edp, ok;
    } cases[] = {{1, 2, 1}, {2, 1, 1}, {1, 1, 0}, {2, 2, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memset(&err, 0, sizeof err);
        int st = run(cases[i].etp, cases[i].edp, DG_STAGE_DP, &g, &err);
        if (cases[i].ok) {
            if (st != DG_OK) fail_msg("etp %d edp %d: %s", cases[i].etp, cases[i].edp, err.msg);
        } else {
            assert_int_not_equal(st, DG_OK);
            if (!strstr(err.msg, "grad-group") || !strstr(err.msg, "experts.linear_fc1.weight"))
                fail_msg("etp %d edp %d: %s", cases[i].etp, cases[i].edp, err.msg);
        }
        dg_graph_free(g);
    }
}

/* The masks on T = 5 rows over tp 2: rank 0 keeps rows 0-1, rank 1 rows 2-4. */
static void test_masks(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("masks");
    int y = dg_input_new(g, "y", DG_F32, 2, DG_SHAPE(5, 2));
    int ix = dg_input_new(g, "ix", DG_I32, 2, DG_SHAPE(5, 1));
    int r = dg_mesh_coord_input(g, DG_AXIS_TP);
    int my = dg_moe_tp_mask_rows(g, y, r, 2), mi = dg_moe_tp_mask_indices(g, ix, r, 2);
    assert_true(my >= 0 && mi >= 0);
    char buf[64];
    assert_string_equal(dg_layout_str(&g->tensors[my].sharding, 2, buf), "[-,-]+partial(tp)");
    float yv[10], yo[10];
    int32_t iv[5] = {0, 1, 2, 3, -1}, io[5];
    for (int k = 0; k < 10; k++) yv[k] = (float)(k + 1);
    for (int32_t rank = 0; rank < 2; rank++) {
        const dg_node *ny = &g->nodes[g->tensors[my].producer], *ni = &g->nodes[g->tensors[mi].producer];
        assert_int_equal(ny->op->kernel(NULL, g, ny, (void *const[]){yv, &rank}, (void *const[]){yo}), DG_OK);
        assert_int_equal(ni->op->kernel(NULL, g, ni, (void *const[]){iv, &rank}, (void *const[]){io}), DG_OK);
        for (int t = 0; t < 5; t++) {
            int mine = rank == 0 ? t < 2 : t >= 2;
            assert_true(yo[2 * t] == (mine ? yv[2 * t] : 0.0f) && yo[2 * t + 1] == (mine ? yv[2 * t + 1] : 0.0f));
            assert_int_equal(io[t], mine ? iv[t] : -1);
        }
    }
    int32_t bad = 2; /* a rank outside the group: the input was not filled in */
    const dg_node *ny = &g->nodes[g->tensors[my].producer];
    assert_int_not_equal(ny->op->kernel(NULL, g, ny, (void *const[]){yv, &bad}, (void *const[]){yo}), DG_OK);
    dg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_etp2_splits_the_experts),
        cmocka_unit_test(test_etp1_slices_the_tokens),
        cmocka_unit_test(test_grad_group_size),
        cmocka_unit_test(test_masks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
