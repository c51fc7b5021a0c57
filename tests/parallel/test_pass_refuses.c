/* test_pass_refuses.c — a parallel pass refuses, in one line naming the op
 * and the flag, a node whose op has a trait the pass rewrites and no entry
 * in its table (graph/dg_op.h, DG_TRAIT_*), instead of copying it as if a
 * sharding rule covered it; the same op without the trait is copied. Each
 * pass (TP, CP, EP) on a one-node graph of a made-up op. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "dg_op.h"
#include "dg_pass_cp.h"
#include "dg_pass_ep.h"
#include "dg_pass_tp.h"

static int infer_same(const dg_graph *g, const dg_node *n, dg_tensor_desc *outs, dg_err *err) {
    (void)err;
    dg_desc_like(&outs[0], &g->tensors[n->in[0]]);
    return DG_OK;
}

/* A made-up op with the given traits: y = f(x), shape kept. */
#define FAKE_OP(var, nm, tr) \
    static const dg_op_def var = {.name = nm, .min_inputs = 1, .max_inputs = 1, .n_outputs = 1, \
                                  .infer = infer_same, .traits = (tr)}
FAKE_OP(op_positions, "made_up_positions", DG_TRAIT_POSITIONS);
FAKE_OP(op_vocab, "made_up_vocab", DG_TRAIT_VOCAB);
FAKE_OP(op_experts, "made_up_experts", DG_TRAIT_EXPERTS);
FAKE_OP(op_plain, "made_up_plain", 0);

enum { B = 2, S = 8, H = 4 };

/* x [B, S, H] (an input read per token) -> op(x) */
static dg_graph *one_node(const dg_op_def *op) {
    dg_graph *g = dg_graph_new("one");
    int x = dg_input_new(g, "x", DG_F32, 3, (int64_t[]){B, S, H});
    int y = dg_graph_add(g, op, NULL, &x, 1, NULL, "y");
    if (y < 0) fail_msg("%s", g->err.msg);
    return g;
}

typedef int (*pass_fn)(const dg_graph *src, dg_graph **out, int *tmap, dg_err *err);
static int run_cp(const dg_graph *src, dg_graph **out, int *tmap, dg_err *err) {
    dg_pass_cp_opts o = {2, DG_CP_COMM_P2P, S};
    return dg_pass_cp(src, &o, out, tmap, err);
}
static int run_tp(const dg_graph *src, dg_graph **out, int *tmap, dg_err *err) {
    return dg_pass_tp(src, 2, out, tmap, err);
}
static int run_ep(const dg_graph *src, dg_graph **out, int *tmap, dg_err *err) {
    dg_pass_ep_opts o = {2, 0, 1, 0, 1};
    return dg_pass_ep(src, &o, out, tmap, err);
}

/* The pass refuses `op` naming it and `flag`, and copies op_plain. */
static void check(pass_fn run, const dg_op_def *op, const char *flag) {
    dg_graph *src = one_node(op), *out = NULL;
    int tmap[8];
    dg_err err = {{0}};
    assert_int_equal(run(src, &out, tmap, &err), DG_EINPUT);
    assert_null(out);
    if (!strstr(err.msg, op->name) || !strstr(err.msg, flag) || strchr(err.msg, '\n'))
        fail_msg("the refusal does not name '%s' and %s in one line: %s", op->name, flag, err.msg);
    dg_graph_free(src);
    src = one_node(&op_plain);
    if (run(src, &out, tmap, &err) != DG_OK) fail_msg("op without the trait: %s", err.msg);
    assert_int_equal(out->n_nodes, 1);
    assert_ptr_equal(out->nodes[0].op, &op_plain);
    dg_graph_free(out);
    dg_graph_free(src);
}

static void cp_refuses_positions(void **st) {
    (void)st;
    check(run_cp, &op_positions, "--context-parallel-size");
}
static void tp_refuses_vocab(void **st) {
    (void)st;
    check(run_tp, &op_vocab, "--tensor-model-parallel-size");
}
static void ep_refuses_experts(void **st) {
    (void)st;
    check(run_ep, &op_experts, "--expert-model-parallel-size");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cp_refuses_positions),
        cmocka_unit_test(tp_refuses_vocab),
        cmocka_unit_test(ep_refuses_experts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
