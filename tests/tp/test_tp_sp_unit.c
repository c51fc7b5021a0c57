/* test_tp_sp_unit.c — sequence parallelism in the TP pass on the real
 * model's logical graph (dense): the residual stream and the norms' outputs
 * split on the sequence over tp, the norm weights read through a
 * copy_to_group over tp, a verified graph; and the verifier's grad-group
 * rule for them, both ways: a replicated parameter read directly by a node
 * that runs on a tp slice (its gradient never all-reduced) and one read
 * through a copy_to_group by a node that runs on whole tensors (the
 * all-reduce would add tp copies) are each named. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "dg_collective.h"
#include "dg_layout.h"
#include "dg_model.h"
#include "dg_pass_tp.h"
#include "dg_verify.h"

static dg_graph *pass(int tp, bool sp) {
    dg_model_config c;
    dg_model_config_tiny(&c);
    c.num_experts = 0;
    dg_graph *src = dg_graph_new("logical"), *g = NULL;
    dg_model_io io;
    dg_err err = {{0}};
    if (dg_model_build_forward(src, &c, &io, &err) != DG_OK) fail_msg("%s", err.msg);
    int *tmap = dg_malloc(sizeof(int) * (size_t)src->n_tensors);
    if (dg_pass_tp_sp(src, tp, sp, false, &g, tmap, &err) != DG_OK) fail_msg("%s", err.msg);
    dg_free(tmap);
    dg_graph_free(src);
    return g;
}

/* The first node of op `op` whose input k is produced by a `by` node (NULL: any). */
static dg_node *find(dg_graph *g, const char *op, int k, const char *by) {
    for (int i = 0; i < g->n_nodes; i++) {
        dg_node *n = &g->nodes[i];
        if (strcmp(n->op->name, op) || n->n_in <= k) continue;
        int p = g->tensors[n->in[k]].producer;
        if (!by || (p >= 0 && !strcmp(g->nodes[p].op->name, by))) return n;
    }
    fail_msg("no %s node", op);
    return NULL;
}

static void test_sp_layouts(void **state) {
    (void)state;
    dg_graph *g = pass(2, true);
    char b[64];
    dg_node *norm = find(g, "rmsnorm", 1, "copy_to_group");
    const dg_tensor *y = &g->tensors[norm->out[0]];
    assert_string_equal(dg_layout_str(&y->sharding, y->ndim, b), "[-,tp,-]");
    assert_int_equal(y->shape[1], 32 / 2); /* the tiny model's sequence over 2 ranks */
    const dg_tensor *w = &g->tensors[g->nodes[g->tensors[norm->in[1]].producer].in[0]];
    assert_int_equal(w->role, DG_ROLE_PARAMETER);
    dg_err err = {{0}};
    if (dg_verify(g, &err) != DG_OK) fail_msg("%s", err.msg);
    dg_graph_free(g);
}

/* A norm on a tp slice reading its weight directly: never all-reduced. */
static void test_grad_group_missing_reduce(void **state) {
    (void)state;
    dg_graph *g = pass(2, true);
    dg_node *norm = find(g, "rmsnorm", 1, "copy_to_group");
    norm->in[1] = g->nodes[g->tensors[norm->in[1]].producer].in[0];
    dg_err err = {{0}};
    assert_int_equal(dg_verify(g, &err), DG_EINPUT);
    assert_non_null(strstr(err.msg, "grad-group"));
    assert_non_null(strstr(err.msg, "is never all-reduced over tp"));
    dg_graph_free(g);
}

/* A norm on whole tensors (TP without SP) reading its weight through a
 * copy_to_group: its whole gradient would be summed over tp. */
static void test_grad_group_extra_reduce(void **state) {
    (void)state;
    dg_graph *g = pass(2, false);
    int w = -1, nid = -1;
    for (int i = 0; i < g->n_nodes && nid < 0; i++)
        if (!strcmp(g->nodes[i].op->name, "rmsnorm")) nid = i, w = g->nodes[i].in[1];
    assert_true(nid >= 0);
    int c = dg_copy_to_group(g, w, DG_AXIS_TP, 2);
    assert_true(c >= 0);
    g->nodes[nid].in[1] = c;
    dg_err err = {{0}};
    assert_int_equal(dg_verify(g, &err), DG_EINPUT);
    assert_non_null(strstr(err.msg, "grad-group"));
    assert_non_null(strstr(err.msg, "adds 2 copies"));
    dg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sp_layouts),
        cmocka_unit_test(test_grad_group_missing_reduce),
        cmocka_unit_test(test_grad_group_extra_reduce),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
