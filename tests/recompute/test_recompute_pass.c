/* test_recompute_pass.c — the recompute pass on a hand-built graph (graph/
 * only, with test ops): the backward of a selected region reads recomputed
 * copies (phase recompute) of the region's tensors, from the region's
 * inputs, after an ordering edge from the backward; tensors of other
 * layers stay the forward's; nothing selected changes nothing; on a
 * pipeline stage the gradients received from the next stage enter every
 * region and close no cycle. And dg_reemit carries ordering edges and
 * module stamps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "dg_autodiff.h"
#include "dg_collective.h"
#include "dg_module.h"
#include "dg_pass_recompute.h"
#include "dg_reemit.h"
#include "t_ops.h"

/* y = x * x: its backward reads x (a saved activation). No kernel: the
 * pass is checked on the graph only. */
static int infer_same(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    (void)err;
    dg_desc_like(&o[0], &g->tensors[n->in[0]]);
    return DG_OK;
}
static const dg_op_def sq_bwd = {.name = "t_sq_bwd", .min_inputs = 2, .max_inputs = 2, .n_outputs = 1,
                                 .infer = infer_same};
static int adj_sq(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    int in[2] = {n->in[0], dout[0]};
    din[0] = dg_graph_add(g, &sq_bwd, NULL, in, 2, NULL, NULL);
    return g->status;
}
static const dg_op_def sq = {.name = "t_sq", .min_inputs = 1, .max_inputs = 1, .n_outputs = 1,
                             .infer = infer_same, .adjoint = adj_sq};

/* layer 0 (mlp): a = x + w, b = a^2; layer 1 (mlp): c = b^2; loss(c); with
 * its backward. *a_id, *b_id: a's and b's ids. */
static dg_graph *build(int *a_id, int *b_id) {
    dg_graph *g = dg_graph_new("rc");
    int x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(2, 4));
    int w = dg_param_new(g, "w", 2, DG_SHAPE(2, 4));
    dg_graph_set_module(g, DG_MODULE_MLP);
    dg_graph_set_layer(g, 0);
    int a = t_add(g, x, w, "a");
    int b = dg_graph_add(g, &sq, NULL, &a, 1, NULL, "b");
    dg_graph_set_layer(g, 1);
    int c = dg_graph_add(g, &sq, NULL, &b, 1, NULL, "c");
    dg_graph_set_layer(g, -1);
    dg_graph_set_module(g, DG_MODULE_NONE);
    int l = t_loss(g, c, "loss");
    dg_autodiff_ops ops = {&t_op_add, &t_op_fill};
    dg_err err = {{0}};
    assert_int_equal(dg_autodiff(g, l, &ops, NULL, &err), DG_OK);
    *a_id = a;
    *b_id = b;
    return g;
}

static int n_phase(const dg_graph *g, dg_phase p) {
    int k = 0;
    for (int v = 0; v < g->n_nodes; v++) k += g->nodes[v].phase == p;
    return k;
}

static void test_layer0_mlp_recomputed(void **state) {
    (void)state;
    int a, b;
    dg_graph *src = build(&a, &b);
    int full[2] = {-1, -1};
    unsigned mods[2] = {1u << DG_MODULE_MLP, 0};
    dg_recompute_opts o = {2, full, mods};
    int *tmap = dg_malloc(sizeof(int) * (size_t)src->n_tensors);
    dg_graph *g = NULL;
    dg_recompute_stats st;
    dg_err err = {{0}};
    assert_int_equal(dg_pass_recompute(src, &o, &g, tmap, &st, &err), DG_OK);
    /* layer 0's backward (b = a^2) reads a: recomputed as a + w */
    assert_int_equal(st.n_nodes, 1);
    assert_int_equal(n_phase(g, DG_PHASE_RECOMPUTE), 1);
    int rc = -1, bwd0 = -1, bwd1 = -1;
    for (int v = 0; v < g->n_nodes; v++) {
        const dg_node *n = &g->nodes[v];
        if (n->phase == DG_PHASE_RECOMPUTE) rc = v;
        if (n->op == &sq_bwd && n->layer == 0) bwd0 = v;
        if (n->op == &sq_bwd && n->layer == 1) bwd1 = v;
    }
    assert_true(rc >= 0 && bwd0 >= 0 && bwd1 >= 0);
    assert_ptr_equal(g->nodes[rc].op, &t_op_add);
    assert_int_equal(g->nodes[rc].layer, 0);
    assert_int_equal(g->nodes[rc].module, DG_MODULE_MLP);
    assert_int_equal(g->nodes[bwd0].in[0], g->nodes[rc].out[0]); /* the copy, not the forward's a */
    assert_int_not_equal(g->nodes[rc].out[0], tmap[a]);
    assert_int_equal(g->nodes[rc].in[0], g->nodes[g->tensors[tmap[a]].producer].in[0]); /* from x itself */
    assert_int_equal(g->nodes[bwd1].in[0], tmap[b]); /* layer 1's backward reads the forward's b */
    /* it waits for the gradient entering layer 0, made by layer 1's backward */
    int waits = 0;
    for (int i = 0; i < g->n_order; i++)
        if (g->order[i].after == rc) {
            assert_int_equal(g->nodes[g->order[i].before].phase, DG_PHASE_BACKWARD);
            waits += g->order[i].before == bwd1;
        }
    assert_int_equal(waits, 1);
    int *order = dg_malloc(sizeof(int) * (size_t)g->n_nodes);
    assert_int_equal(dg_graph_topo_order(g, order, &err), DG_OK);
    /* the gradient of w survives the re-emission */
    for (int t = 0; t < src->n_tensors; t++)
        if (src->tensors[t].role == DG_ROLE_PARAMETER) {
            assert_int_equal(g->tensors[tmap[t]].grad, tmap[src->tensors[t].grad]);
            assert_int_equal(g->tensors[g->tensors[tmap[t]].grad].role, DG_ROLE_GRADIENT);
        }
    dg_free(order);
    dg_free(tmap);
    dg_graph_free(g);
    dg_graph_free(src);
}

/* A pipeline stage that is not the last: layer 0: a = x + w0, b = a^2 and
 * a loss term z0 = a^2; layer 1: d = b + w1, c = d^2, z1 = d^2 and the
 * terms' running sum zs = z0 + z1 (as the MoE aux and z losses run through
 * the layers). c and zs go to the next stage, whose gradients come back as
 * receives stamped with layer 1, as dg_pass_pp_autodiff stamps them. The
 * received gradient of zs is read by both layers' backward (z0's and z1's
 * adjoints), like the MoE loss terms' seed. */
static dg_graph *build_stage(int *recv_c, int *recv_z) {
    dg_graph *g = dg_graph_new("stage0");
    g->mesh[DG_AXIS_PP] = 2;
    int x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(2, 4));
    int w0 = dg_param_new(g, "w0", 2, DG_SHAPE(2, 4));
    int w1 = dg_param_new(g, "w1", 2, DG_SHAPE(2, 4));
    dg_graph_set_module(g, DG_MODULE_MLP);
    dg_graph_set_layer(g, 0);
    int a = t_add(g, x, w0, "a");
    int b = dg_graph_add(g, &sq, NULL, &a, 1, NULL, "b");
    int z0 = dg_graph_add(g, &sq, NULL, &a, 1, NULL, "z0");
    dg_graph_set_layer(g, 1);
    int d = t_add(g, b, w1, "d");
    int c = dg_graph_add(g, &sq, NULL, &d, 1, NULL, "c");
    int z1 = dg_graph_add(g, &sq, NULL, &d, 1, NULL, "z1");
    int zs = t_add(g, z0, z1, "zs");
    dg_graph_set_module(g, DG_MODULE_NONE);
    dg_graph_set_phase(g, DG_PHASE_BACKWARD);
    int seed_t[2] = {c, zs}, seed_g[2];
    for (int i = 0; i < 2; i++)
        seed_g[i] = dg_recv(g, DG_AXIS_PP, 2, 1, DG_F32, 2, DG_SHAPE(2, 4));
    dg_graph_set_phase(g, DG_PHASE_FORWARD);
    dg_graph_set_layer(g, -1);
    dg_autodiff_ops ops = {&t_op_add, &t_op_fill};
    dg_err err = {{0}};
    assert_int_equal(dg_autodiff_seeded(g, -1, 2, seed_t, seed_g, &ops, NULL, &err), DG_OK);
    *recv_c = g->tensors[seed_g[0]].producer;
    *recv_z = g->tensors[seed_g[1]].producer;
    return g;
}

/* Full recompute of each layer on that stage. The received gradients are
 * made on the next stage, in no layer here: they enter both regions and
 * wait for no reader. They were taken for gradients made in layer 1's
 * backward, so z1's adjoint (a reader of layer 1's recompute that reads
 * the received gradient of zs) had to run before that gradient was made:
 * a cycle, which the verifier reported as an internal error. */
static void test_pp_received_gradients(void **state) {
    (void)state;
    int rc_id, rz_id;
    dg_graph *src = build_stage(&rc_id, &rz_id);
    int full[2] = {0, 1};
    unsigned mods[2] = {0, 0};
    dg_recompute_opts o = {2, full, mods};
    int *tmap = dg_malloc(sizeof(int) * (size_t)src->n_tensors);
    dg_graph *g = NULL;
    dg_recompute_stats st;
    dg_err err = {{0}};
    assert_int_equal(dg_pass_recompute(src, &o, &g, tmap, &st, &err), DG_OK);
    assert_int_equal(st.n_regions, 2);
    int *order = dg_malloc(sizeof(int) * (size_t)g->n_nodes);
    assert_int_equal(dg_graph_topo_order(g, order, &err), DG_OK); /* no cycle */
    int recv_c = g->tensors[tmap[src->nodes[rc_id].out[0]]].producer;
    int recv_z = g->tensors[tmap[src->nodes[rz_id].out[0]]].producer;
    int waits_c = 0, waits_z = 0, waits_bwd1 = 0;
    for (int i = 0; i < g->n_order; i++) {
        const dg_node *bf = &g->nodes[g->order[i].before], *af = &g->nodes[g->order[i].after];
        /* a received gradient is never delayed */
        assert_int_not_equal(g->order[i].after, recv_c);
        assert_int_not_equal(g->order[i].after, recv_z);
        if (af->phase != DG_PHASE_RECOMPUTE) continue;
        waits_c += af->layer == 1 && g->order[i].before == recv_c;
        waits_z += g->order[i].before == recv_z;
        waits_bwd1 += af->layer == 0 && bf->phase == DG_PHASE_BACKWARD && bf->layer == 1;
    }
    /* layer 1 recomputes once the next stage's gradient is here (its top
     * layer had no trigger before), layer 0 after layer 1's backward */
    assert_true(waits_c >= 1);
    assert_true(waits_z >= 2); /* both layers' recompute wait for the loss terms' gradient */
    assert_true(waits_bwd1 >= 1);
    dg_free(order);
    dg_free(tmap);
    dg_graph_free(g);
    dg_graph_free(src);
}

static void test_nothing_selected(void **state) {
    (void)state;
    int a, b;
    dg_graph *src = build(&a, &b);
    int full[2] = {-1, -1};
    unsigned mods[2] = {1u << DG_MODULE_CORE_ATTN, 1u << DG_MODULE_CORE_ATTN}; /* no such module here */
    dg_recompute_opts o = {2, full, mods};
    int *tmap = dg_malloc(sizeof(int) * (size_t)src->n_tensors);
    dg_graph *g = NULL;
    dg_err err = {{0}};
    assert_int_equal(dg_pass_recompute(src, &o, &g, tmap, NULL, &err), DG_OK);
    assert_int_equal(g->n_nodes, src->n_nodes);
    assert_int_equal(n_phase(g, DG_PHASE_RECOMPUTE), 0);
    assert_int_equal(g->n_order, 0);
    dg_free(tmap);
    dg_graph_free(g);
    dg_graph_free(src);
}

static void test_reemit_carries_order_and_module(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("three");
    int x = dg_input_new(g, "x", DG_F32, 1, DG_SHAPE(4));
    dg_graph_set_module(g, DG_MODULE_LAYERNORM);
    for (int i = 0; i < 3; i++) t_relu(g, x, NULL);
    dg_graph_add_order(g, 2, 0);
    dg_graph *d = dg_graph_new("copy");
    int tmap[8];
    dg_reemit_opts o = dg_reemit_plain();
    dg_err err = {{0}};
    assert_int_equal(dg_reemit(d, g, &o, tmap, &err), DG_OK);
    assert_int_equal(d->n_order, 1);
    assert_int_equal(d->order[0].before, 2);
    assert_int_equal(d->order[0].after, 0);
    for (int v = 0; v < 3; v++) assert_int_equal(d->nodes[v].module, DG_MODULE_LAYERNORM);
    dg_graph_free(d);
    dg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layer0_mlp_recomputed),
        cmocka_unit_test(test_pp_received_gradients),
        cmocka_unit_test(test_nothing_selected),
        cmocka_unit_test(test_reemit_carries_order_and_module),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
