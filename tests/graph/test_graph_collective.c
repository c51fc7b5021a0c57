/* test_graph_collective.c — collective ops: shape rules, builder stamping
 * (group, stream, sharding), costs, and that each adjoint emits the op
 * DESIGN.md's table names with shapes that bring the gradient back to the
 * forward input's shape. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "dg_autodiff.h"
#include "dg_collective.h"
#include "dg_verify.h"
#include "t_ops.h"

static void assert_shape(const dg_graph *g, int t, int ndim, const int64_t *shape) {
    assert_true(t >= 0);
    const dg_tensor *x = dg_Tc(g, t);
    char a[64];
    if (x->ndim != ndim) fail_msg("tensor '%s' is %s, rank %d expected", x->name, dg_shape_str(x, a), ndim);
    for (int d = 0; d < ndim; d++)
        if (x->shape[d] != shape[d]) fail_msg("tensor '%s' is %s", x->name, dg_shape_str(x, a));
}

static void assert_verifies(const dg_graph *g) {
    dg_err err = {{0}};
    if (dg_verify(g, &err) != DG_OK) fail_msg("dg_verify: %s", err.msg);
}

static const dg_node *producer_of(const dg_graph *g, int t) {
    assert_true(t >= 0 && dg_Tc(g, t)->producer >= 0);
    return &g->nodes[dg_Tc(g, t)->producer];
}

static void test_infer_shapes(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("coll");
    int x = dg_input_new(g, "x", DG_F32, 3, DG_SHAPE(2, 8, 6));
    dg_T(g, x)->sharding.partial = DG_AXIS_TP;
    dg_T(g, x)->sharding.split[1] = DG_AXIS_CP;

    int ar = dg_all_reduce(g, x, DG_AXIS_TP, 4);
    assert_shape(g, ar, 3, DG_SHAPE(2, 8, 6));
    assert_int_equal(dg_Tc(g, ar)->sharding.partial, DG_AXIS_NONE);
    assert_int_equal(dg_Tc(g, ar)->sharding.split[1], DG_AXIS_CP);

    int ag = dg_all_gather(g, ar, DG_AXIS_CP, 4, 1);
    assert_shape(g, ag, 3, DG_SHAPE(2, 32, 6));
    assert_int_equal(dg_Tc(g, ag)->sharding.split[1], DG_AXIS_NONE);

    int xp = dg_input_new(g, "xp", DG_F32, 3, DG_SHAPE(2, 32, 6));
    dg_T(g, xp)->sharding.partial = DG_AXIS_TP;
    int rs = dg_reduce_scatter(g, xp, DG_AXIS_TP, 4, 1);
    assert_shape(g, rs, 3, DG_SHAPE(2, 8, 6));
    assert_int_equal(dg_Tc(g, rs)->sharding.split[1], DG_AXIS_TP);

    /* Ulysses-style: split heads (dim 1 here), gather sequence (dim 2): the
     * cp split moves from the sequence to the heads, inside their tp split */
    int xq = dg_input_new(g, "xq", DG_F32, 3, DG_SHAPE(2, 8, 6));
    dg_T(g, xq)->sharding.split[1] = DG_AXIS_TP;
    dg_T(g, xq)->sharding.split[2] = DG_AXIS_CP;
    int a2a = dg_all_to_all(g, xq, DG_AXIS_CP, 2, 1, 2);
    assert_shape(g, a2a, 3, DG_SHAPE(2, 4, 12));
    assert_int_equal(dg_Tc(g, a2a)->sharding.split[2], DG_AXIS_NONE);
    assert_int_equal(dg_Tc(g, a2a)->sharding.split[1], DG_AXIS_TP);
    assert_int_equal(dg_Tc(g, a2a)->sharding.split2[1], DG_AXIS_CP);
    int back = dg_all_to_all(g, a2a, DG_AXIS_CP, 2, 2, 1); /* and back */
    assert_int_equal(dg_Tc(g, back)->sharding.split[2], DG_AXIS_CP);
    assert_int_equal(dg_Tc(g, back)->sharding.split[1], DG_AXIS_TP);
    assert_int_equal(dg_Tc(g, back)->sharding.split2[1], DG_AXIS_NONE);
    int a2a_same = dg_all_to_all(g, a2a, DG_AXIS_EP, 2, 0, 0); /* MoE dispatch: same dim */
    assert_shape(g, a2a_same, 3, DG_SHAPE(2, 4, 12));

    int cp = dg_copy_to_group(g, a2a_same, DG_AXIS_TP, 2);
    assert_shape(g, cp, 3, DG_SHAPE(2, 4, 12));

    int snd = dg_send(g, cp, DG_AXIS_PP, 2, +1);
    assert_true(snd >= 0);
    assert_int_equal(g->nodes[snd].n_out, 0);
    assert_ptr_equal(g->nodes[snd].op, &dg_op_send);

    int rcv = dg_recv(g, DG_AXIS_PP, 2, -1, DG_BF16, 2, DG_SHAPE(16, 64));
    assert_shape(g, rcv, 2, DG_SHAPE(16, 64));
    assert_int_equal(dg_Tc(g, rcv)->dtype, DG_BF16);

    /* every builder stamps group and comm stream */
    for (int i = 0; i < g->n_nodes; i++) {
        assert_int_equal(g->nodes[i].stream, DG_STREAM_COMM);
        assert_int_not_equal(g->nodes[i].group, DG_AXIS_NONE);
        assert_int_not_equal(g->nodes[i].op->comm, DG_COMM_NONE);
        assert_null(g->nodes[i].op->kernel);
    }
    assert_int_equal(producer_of(g, ag)->group, DG_AXIS_CP);
    assert_int_equal(g->status, DG_OK);
    assert_verifies(g);
    dg_graph_free(g);
}

static void test_infer_errors(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("bad");
    int x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(6, 8));
    assert_int_equal(dg_reduce_scatter(g, x, DG_AXIS_TP, 4, 0), -1);
    assert_non_null(strstr(g->err.msg, "not divisible by group_size 4"));
    dg_graph_free(g);

    g = dg_graph_new("bad_dim");
    x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(6, 8));
    assert_int_equal(dg_all_gather(g, x, DG_AXIS_TP, 2, 2), -1);
    assert_non_null(strstr(g->err.msg, "dim 2 outside 0..1"));
    dg_graph_free(g);

    g = dg_graph_new("no_axis");
    x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(6, 8));
    assert_int_equal(dg_all_reduce(g, x, DG_AXIS_NONE, 2), -1);
    assert_non_null(strstr(g->err.msg, "not a parallel axis"));
    dg_graph_free(g);

    g = dg_graph_new("no_group");
    x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(6, 8));
    assert_int_equal(dg_all_reduce(g, x, DG_AXIS_TP, 0), -1);
    assert_non_null(strstr(g->err.msg, "group_size 0"));
    dg_graph_free(g);
}

static void test_costs(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("cost");
    int x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(8, 16)); /* 512 bytes */
    int ar = dg_all_reduce(g, x, DG_AXIS_DP, 4);
    int ag = dg_all_gather(g, x, DG_AXIS_TP, 4, 0);
    int rs = dg_reduce_scatter(g, x, DG_AXIS_TP, 4, 0);
    int snd = dg_send(g, x, DG_AXIS_PP, 2, 1);
    dg_cost c;
    const dg_node *n = producer_of(g, ar);
    n->op->cost(g, n, &c);
    assert_true(c.bytes == 2.0 * 0.75 * 512);
    n = producer_of(g, ag);
    n->op->cost(g, n, &c);
    assert_true(c.bytes == 3.0 * 512);
    n = producer_of(g, rs);
    n->op->cost(g, n, &c);
    assert_true(c.bytes == 0.75 * 512);
    n = &g->nodes[snd];
    n->op->cost(g, n, &c);
    assert_true(c.bytes == 512);
    dg_graph_free(g);
}

/* Build one forward collective on x, run its adjoint on a gradient shaped
 * like its output, and return din[0]. *emitted gets the new node or NULL. */
static int run_adjoint(dg_graph *g, int fwd_node, int dout, const dg_node **emitted) {
    int before = g->n_nodes;
    int din[DG_MAX_INPUTS] = {-1, -1};
    int douts[DG_MAX_OUTPUTS] = {dout, -1};
    dg_graph_set_phase(g, DG_PHASE_BACKWARD);
    const dg_node *n = &g->nodes[fwd_node];
    assert_int_equal(n->op->adjoint(g, n, douts, din), DG_OK);
    assert_int_equal(g->status, DG_OK);
    *emitted = g->n_nodes > before ? &g->nodes[g->n_nodes - 1] : NULL;
    if (*emitted) {
        assert_int_equal(g->n_nodes, before + 1);
        assert_int_equal((*emitted)->fwd_node, fwd_node);
        assert_int_equal((*emitted)->phase, DG_PHASE_BACKWARD);
        assert_int_equal((*emitted)->group, g->nodes[fwd_node].group);
        assert_int_equal((*emitted)->attrs.i[DG_COLL_GROUP_SIZE],
                         g->nodes[fwd_node].attrs.i[DG_COLL_GROUP_SIZE]);
    }
    return din[0];
}

static int grad_like(dg_graph *g, int t) {
    const dg_tensor *x = dg_Tc(g, t);
    char nm[DG_NAME_LEN];
    snprintf(nm, sizeof nm, "d.%.50s", x->name);
    int64_t shape[DG_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    return dg_tensor_new(g, nm, x->dtype, x->ndim, shape, DG_ROLE_GRADIENT);
}

static void test_adjoint_pairs(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("adjoint");
    int x = dg_input_new(g, "x", DG_F32, 3, DG_SHAPE(2, 8, 6));
    /* inputs laid out as each collective takes them (dg_layout.h) */
    int x_tp = dg_input_new(g, "x_tp", DG_F32, 3, DG_SHAPE(2, 8, 6));
    dg_T(g, x_tp)->sharding.partial = DG_AXIS_TP;
    int x_cp = dg_input_new(g, "x_cp", DG_F32, 3, DG_SHAPE(2, 8, 6));
    dg_T(g, x_cp)->sharding.partial = DG_AXIS_CP;
    int x_s1 = dg_input_new(g, "x_s1", DG_F32, 3, DG_SHAPE(2, 8, 6));
    dg_T(g, x_s1)->sharding.split[1] = DG_AXIS_TP;
    int x_s0 = dg_input_new(g, "x_s0", DG_F32, 3, DG_SHAPE(2, 8, 6));
    dg_T(g, x_s0)->sharding.split[0] = DG_AXIS_TP;
    const dg_node *e;

    /* copy_to_group -> all_reduce */
    int y = dg_copy_to_group(g, x, DG_AXIS_TP, 4);
    int d = run_adjoint(g, producer_of(g, y)->id, grad_like(g, y), &e);
    assert_non_null(e);
    assert_ptr_equal(e->op, &dg_op_all_reduce);
    assert_shape(g, d, 3, DG_SHAPE(2, 8, 6));

    /* all_reduce -> identity: the gradient passes through, no node */
    dg_graph_set_phase(g, DG_PHASE_FORWARD);
    y = dg_all_reduce(g, x_tp, DG_AXIS_TP, 4);
    int dy = grad_like(g, y);
    d = run_adjoint(g, producer_of(g, y)->id, dy, &e);
    assert_null(e);
    assert_int_equal(d, dy);

    /* all_gather(dim 1) -> reduce_scatter(dim 1) */
    dg_graph_set_phase(g, DG_PHASE_FORWARD);
    y = dg_all_gather(g, x_s1, DG_AXIS_TP, 4, 1);
    d = run_adjoint(g, producer_of(g, y)->id, grad_like(g, y), &e);
    assert_ptr_equal(e->op, &dg_op_reduce_scatter);
    assert_int_equal(e->attrs.i[DG_COLL_DIM], 1);
    assert_shape(g, d, 3, DG_SHAPE(2, 8, 6));

    /* reduce_scatter(dim 2) -> all_gather(dim 2) */
    dg_graph_set_phase(g, DG_PHASE_FORWARD);
    y = dg_reduce_scatter(g, x_cp, DG_AXIS_CP, 3, 2);
    assert_shape(g, y, 3, DG_SHAPE(2, 8, 2));
    d = run_adjoint(g, producer_of(g, y)->id, grad_like(g, y), &e);
    assert_ptr_equal(e->op, &dg_op_all_gather);
    assert_int_equal(e->attrs.i[DG_COLL_DIM], 2);
    assert_int_equal(e->group, DG_AXIS_CP);
    assert_shape(g, d, 3, DG_SHAPE(2, 8, 6));

    /* all_to_all(split 1, concat 2) -> all_to_all(split 2, concat 1) */
    dg_graph_set_phase(g, DG_PHASE_FORWARD);
    y = dg_all_to_all(g, x, DG_AXIS_EP, 2, 1, 2);
    assert_shape(g, y, 3, DG_SHAPE(2, 4, 12));
    d = run_adjoint(g, producer_of(g, y)->id, grad_like(g, y), &e);
    assert_ptr_equal(e->op, &dg_op_all_to_all);
    assert_int_equal(e->attrs.i[DG_COLL_SPLIT_DIM], 2);
    assert_int_equal(e->attrs.i[DG_COLL_CONCAT_DIM], 1);
    assert_shape(g, d, 3, DG_SHAPE(2, 8, 6));

    /* send(+1) -> recv(+1) of the gradient, shaped and typed like x */
    dg_graph_set_phase(g, DG_PHASE_FORWARD);
    int snd = dg_send(g, x, DG_AXIS_PP, 4, +1);
    int no_dout[DG_MAX_OUTPUTS] = {-1};
    d = run_adjoint(g, snd, no_dout[0], &e);
    assert_ptr_equal(e->op, &dg_op_recv);
    assert_int_equal(e->attrs.i[DG_COLL_PEER], +1);
    assert_shape(g, d, 3, DG_SHAPE(2, 8, 6));
    assert_int_equal(dg_Tc(g, d)->dtype, DG_F32);

    /* recv(-1) -> send(-1) of the gradient */
    dg_graph_set_phase(g, DG_PHASE_FORWARD);
    int r = dg_recv(g, DG_AXIS_PP, 4, -1, DG_F32, 2, DG_SHAPE(4, 4));
    d = run_adjoint(g, producer_of(g, r)->id, grad_like(g, r), &e);
    assert_ptr_equal(e->op, &dg_op_send);
    assert_int_equal(e->attrs.i[DG_COLL_PEER], -1);
    assert_int_equal(e->n_in, 1);
    assert_shape(g, e->in[0], 2, DG_SHAPE(4, 4));

    /* no gradient flowing: nothing emitted, din is -1 */
    dg_graph_set_phase(g, DG_PHASE_FORWARD);
    y = dg_all_gather(g, x_s0, DG_AXIS_TP, 2, 0);
    d = run_adjoint(g, producer_of(g, y)->id, -1, &e);
    assert_null(e);
    assert_int_equal(d, -1);

    assert_verifies(g);
    dg_graph_free(g);
}

/* A TP MLP block, Megatron style: copy_to_group, column- then row-parallel
 * matmul, all_reduce. The backward collectives come out mirrored. */
static void test_tp_block_backward(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("tp_block");
    int x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(4, 8));
    int w1 = dg_param_new(g, "w1", 2, DG_SHAPE(8, 8));
    int w2 = dg_param_new(g, "w2", 2, DG_SHAPE(8, 8));
    dg_T(g, w1)->sharding.split[1] = DG_AXIS_TP; /* column parallel */
    dg_T(g, w2)->sharding.split[0] = DG_AXIS_TP; /* row parallel: fc2 is partial(tp) */
    int xc = dg_copy_to_group(g, x, DG_AXIS_TP, 2);
    int h = t_matmul(g, xc, w1, "fc1");
    int o = t_matmul(g, h, w2, "fc2");
    int y = dg_all_reduce(g, o, DG_AXIS_TP, 2);
    const dg_node *e;
    int dy = grad_like(g, y);
    int d_o = run_adjoint(g, producer_of(g, y)->id, dy, &e);
    assert_int_equal(d_o, dy);
    int dxc = grad_like(g, xc); /* stands in for the matmuls' adjoints */
    int dx = run_adjoint(g, producer_of(g, xc)->id, dxc, &e);
    assert_ptr_equal(e->op, &dg_op_all_reduce);
    assert_int_equal(e->stream, DG_STREAM_COMM);
    assert_shape(g, dx, 2, DG_SHAPE(4, 8));
    assert_verifies(g);
    dg_graph_free(g);
}

/* dg_autodiff over a chain of every differentiable collective: the
 * backward collectives come out in reverse order, each the adjoint DESIGN.md
 * names, and the parameter's gradient has the parameter's shape. */
static void test_autodiff_through_collectives(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("autodiff");
    int w = dg_param_new(g, "w", 2, DG_SHAPE(8, 6));
    dg_T(g, w)->sharding.split[0] = DG_AXIS_CP;
    /* over ep (a data axis) reduce_scatter and all_reduce keep the layout */
    int a = dg_copy_to_group(g, w, DG_AXIS_TP, 2);
    int b = dg_all_gather(g, a, DG_AXIS_CP, 2, 0);       /* [16,6] */
    int c = dg_reduce_scatter(g, b, DG_AXIS_EP, 2, 0);   /* [8,6] */
    int d = dg_all_to_all(g, c, DG_AXIS_EP, 2, 1, 0);    /* [16,3] */
    int e = dg_all_reduce(g, d, DG_AXIS_EP, 2);
    int loss = t_loss(g, e, "loss");
    assert_int_equal(g->status, DG_OK);
    int n_fwd = g->n_nodes;
    dg_autodiff_ops ops = {.add = &t_op_add, .fill = &t_op_fill};
    dg_err err = {{0}};
    if (dg_autodiff(g, loss, &ops, NULL, &err) != DG_OK) fail_msg("autodiff: %s", err.msg);
    assert_verifies(g);

    const dg_op_def *want[] = {&dg_op_all_to_all, &dg_op_all_gather, &dg_op_reduce_scatter,
                               &dg_op_all_reduce};
    const dg_axis want_axis[] = {DG_AXIS_EP, DG_AXIS_EP, DG_AXIS_CP, DG_AXIS_TP};
    int k = 0;
    for (int i = n_fwd; i < g->n_nodes; i++) {
        const dg_node *n = &g->nodes[i];
        assert_int_equal(n->phase, DG_PHASE_BACKWARD);
        if (n->op->comm == DG_COMM_NONE) continue;
        assert_true(k < 4);
        assert_ptr_equal(n->op, want[k]);
        assert_int_equal(n->group, want_axis[k]);
        assert_int_equal(n->stream, DG_STREAM_COMM);
        k++;
    }
    assert_int_equal(k, 4);
    int gw = dg_Tc(g, w)->grad;
    assert_true(gw >= 0);
    assert_shape(g, gw, 2, DG_SHAPE(8, 6));
    dg_graph_free(g);
}

/* The PP boundary as the header describes it: autodiff leaves the gradient
 * of the received activation in its grad, and recv's adjoint sends it back. */
static void test_pp_boundary_backward(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("stage1");
    dg_graph_set_stage(g, 1);
    int h = dg_recv(g, DG_AXIS_PP, 2, -1, DG_F32, 2, DG_SHAPE(4, 8));
    dg_T(g, h)->requires_grad = true;
    int w = dg_param_new(g, "w", 2, DG_SHAPE(4, 8));
    int y = t_add(g, h, w, "residual");
    int loss = t_loss(g, y, "loss");
    dg_autodiff_ops ops = {.add = &t_op_add, .fill = &t_op_fill};
    dg_err err = {{0}};
    if (dg_autodiff(g, loss, &ops, NULL, &err) != DG_OK) fail_msg("autodiff: %s", err.msg);
    int dh = dg_Tc(g, h)->grad;
    assert_true(dh >= 0);
    const dg_node *e;
    int nothing = run_adjoint(g, producer_of(g, h)->id, dh, &e);
    assert_int_equal(nothing, -1);
    assert_ptr_equal(e->op, &dg_op_send);
    assert_int_equal(e->in[0], dh);
    assert_int_equal(e->attrs.i[DG_COLL_PEER], -1);
    assert_int_equal(e->stage, 1);
    assert_verifies(g);
    dg_graph_free(g);
}

static void test_comm_names(void **state) {
    (void)state;
    assert_string_equal(dg_comm_name(DG_COMM_NONE), "none");
    assert_string_equal(dg_comm_name(DG_COMM_ALL_TO_ALL), "all_to_all");
    assert_string_equal(dg_comm_name(DG_COMM_COPY_TO_GROUP), "copy_to_group");
    assert_string_equal(dg_op_reduce_scatter.name, dg_comm_name(dg_op_reduce_scatter.comm));
    assert_string_equal(dg_op_recv.name, dg_comm_name(dg_op_recv.comm));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_infer_shapes),
        cmocka_unit_test(test_infer_errors),
        cmocka_unit_test(test_costs),
        cmocka_unit_test(test_adjoint_pairs),
        cmocka_unit_test(test_tp_block_backward),
        cmocka_unit_test(test_autodiff_through_collectives),
        cmocka_unit_test(test_pp_boundary_backward),
        cmocka_unit_test(test_comm_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
