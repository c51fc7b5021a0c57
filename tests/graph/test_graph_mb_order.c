/* test_graph_mb_order.c — the micro-batch order pass: micro-batches run
 * first to last, each before the next starts, as ordering edges from the
 * nodes that end micro-batch m-1 to those that start m; nodes outside any
 * micro-batch stay free; one micro-batch gets no edge. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "dg_pass_mb_order.h"
#include "dg_verify.h"
#include "t_ops.h"

/* Per micro-batch (built last first, as the trainer does): a "forward"
 * x_m @ w -> relu -> loss_m, a side branch relu(x_m) nobody reads (a second
 * end), and a "backward" scale(seed_m) + loss_m that starts from a leaf of
 * its own (a third start) and ends the micro-batch. The losses are summed outside any micro-batch. */
static dg_graph *step(int n_mb) {
    dg_graph *g = dg_graph_new("mb_step");
    int w = dg_param_new(g, "w", 2, DG_SHAPE(8, 8));
    int total = -1;
    for (int mb = n_mb - 1; mb >= 0; mb--) {
        dg_graph_set_microbatch(g, n_mb > 1 ? mb : -1);
        char name[32];
        snprintf(name, sizeof name, "x%d", mb);
        int x = dg_input_new(g, name, DG_F32, 2, DG_SHAPE(4, 8));
        int h = t_relu(g, t_matmul(g, x, w, NULL), NULL);
        t_relu(g, x, NULL);
        int loss = t_loss(g, h, NULL);
        snprintf(name, sizeof name, "seed%d", mb);
        int seed = dg_input_new(g, name, DG_F32, 0, NULL);
        t_add(g, t_scale(g, seed, 0.5, NULL), loss, NULL);
        dg_graph_set_microbatch(g, -1);
        total = total < 0 ? loss : t_add(g, total, loss, NULL);
    }
    assert_int_equal(g->status, DG_OK);
    return g;
}

static void test_order(void **state) {
    (void)state;
    dg_graph *g = step(3);
    int n_edges = -1;
    dg_err err = {{0}};
    assert_int_equal(dg_pass_mb_order(g, &n_edges, &err), DG_OK);
    /* ends of m-1: the side relu and the backward's add; starts of m: the
     * matmul, the side relu and the seed's scale; for m = 1, 2 */
    assert_int_equal(n_edges, 2 * 2 * 3);
    assert_int_equal(g->n_order, n_edges);
    if (dg_verify_after(g, "micro-batch order", &err) != DG_OK) fail_msg("%s", err.msg);
    int order[64];
    assert_int_equal(dg_graph_topo_order(g, order, &err), DG_OK);
    /* every node of micro-batch m runs before every node of m+1 */
    int last_pos[3] = {-1, -1, -1}, first_pos[3] = {99, 99, 99};
    for (int k = 0; k < g->n_nodes; k++) {
        int mb = g->nodes[order[k]].microbatch;
        if (mb < 0) continue;
        last_pos[mb] = DG_MAX(last_pos[mb], k);
        first_pos[mb] = DG_MIN(first_pos[mb], k);
    }
    assert_true(last_pos[0] < first_pos[1]);
    assert_true(last_pos[1] < first_pos[2]);
    /* nodes outside micro-batches got no edge */
    for (int i = 0; i < g->n_order; i++) {
        assert_true(g->nodes[g->order[i].before].microbatch >= 0);
        assert_int_equal(g->nodes[g->order[i].after].microbatch, g->nodes[g->order[i].before].microbatch + 1);
    }
    dg_graph_free(g);

    g = step(1);
    assert_int_equal(dg_pass_mb_order(g, &n_edges, &err), DG_OK);
    assert_int_equal(n_edges, 0);
    assert_int_equal(g->n_order, 0);
    dg_graph_free(g);
}

/* A node of micro-batch m-1 that reads micro-batch m (a mis-tagged join)
 * makes the edges close a cycle: the verifier names a node on it. */
static void test_mistagged_join_is_reported(void **state) {
    (void)state;
    dg_graph *g = step(2);
    for (int i = 0; i < g->n_nodes; i++) /* the losses' sum joins both: tag it 0 */
        if (g->nodes[i].microbatch < 0) g->nodes[i].microbatch = 0;
    dg_err err = {{0}};
    assert_int_equal(dg_pass_mb_order(g, NULL, &err), DG_OK);
    assert_int_equal(dg_verify_after(g, "micro-batch order", &err), DG_EINPUT);
    assert_non_null(strstr(err.msg, "after micro-batch order: node "));
    assert_non_null(strstr(err.msg, "rule 'acyclic' broken: it is on a cycle of"));
    dg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order),
        cmocka_unit_test(test_mistagged_join_is_reported),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
