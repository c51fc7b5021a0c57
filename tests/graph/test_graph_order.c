/* test_graph_order.c — ordering edges in the IR: the topological order obeys
 * them, clones carry them, the sorted list and the adjacency are what the
 * dumps and the scheduler read. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "dg_graph.h"
#include "t_ops.h"

/* three independent relus of one input: ids 0, 1, 2 */
static dg_graph *three(void) {
    dg_graph *g = dg_graph_new("three");
    int x = dg_input_new(g, "x", DG_F32, 1, DG_SHAPE(4));
    for (int i = 0; i < 3; i++) t_relu(g, x, NULL);
    assert_int_equal(g->status, DG_OK);
    return g;
}

static void expect_order(const dg_graph *g, const int *want) {
    int order[8];
    dg_err err = {{0}};
    assert_int_equal(dg_graph_topo_order(g, order, &err), DG_OK);
    for (int i = 0; i < g->n_nodes; i++) assert_int_equal(order[i], want[i]);
}

static void test_topo_order_obeys_edges(void **state) {
    (void)state;
    dg_graph *g = three();
    expect_order(g, (int[]){0, 1, 2});
    dg_graph_add_order(g, 2, 0); /* 0 waits for 2: ties still go to the smallest id */
    expect_order(g, (int[]){1, 2, 0});
    dg_graph_add_order(g, 0, 1); /* and 1 for 0 */
    expect_order(g, (int[]){2, 0, 1});
    dg_graph_free(g);
}

static void test_clone_and_sorted(void **state) {
    (void)state;
    dg_graph *g = three();
    dg_graph_add_order(g, 2, 1);
    dg_graph_add_order(g, 0, 2);
    dg_graph_add_order(g, 2, 1); /* twice: kept in the list, once in the sorted view */
    assert_int_equal(g->n_order, 3);
    dg_graph *c = dg_graph_clone(g);
    assert_int_equal(c->n_order, 3);
    dg_graph_add_order(c, 0, 1);
    assert_int_equal(c->n_order, 4);
    assert_int_equal(g->n_order, 3); /* the original is untouched */
    dg_order_edge e[4];
    assert_int_equal(dg_graph_order_sorted(g, e), 2);
    assert_int_equal(e[0].before, 0);
    assert_int_equal(e[0].after, 2);
    assert_int_equal(e[1].before, 2);
    assert_int_equal(e[1].after, 1);
    expect_order(c, (int[]){0, 2, 1});

    /* successors and predecessors per node */
    dg_order_adj s, p;
    dg_order_adj_build(c, 0, &s);
    dg_order_adj_build(c, 1, &p);
    assert_int_equal(s.offsets[1] - s.offsets[0], 2); /* 0 -> 1, 0 -> 2 */
    assert_int_equal(s.nodes[s.offsets[0]], 1);
    assert_int_equal(s.nodes[s.offsets[0] + 1], 2);
    assert_int_equal(s.offsets[3] - s.offsets[2], 2); /* 2 -> 1 twice */
    assert_int_equal(p.offsets[2] - p.offsets[1], 3); /* 1 waits for 0, 2, 2 */
    assert_int_equal(p.nodes[p.offsets[1]], 0);
    dg_order_adj_free(&s);
    dg_order_adj_free(&p);
    dg_graph_free(c);
    dg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_topo_order_obeys_edges),
        cmocka_unit_test(test_clone_and_sorted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
