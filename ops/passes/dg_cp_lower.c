/* dg_cp_lower.c — the CP pass's lowerings (graph/passes/dg_pass_cp.h
 * calls them through each op's `lower` callback): attention by the ring or
 * all-to-all, rope and pos_embed_add by positions, softmax_xent by sum and
 * count. Parallel code, so it lives with the passes, not with the ops'
 * definitions (tests/moe/model_knows_no_parallel_size.sh). */
#include "dg_collective.h"
#include "dg_layout.h"
#include "dg_op_cp.h"
#include "dg_op_cp_a2a.h"
#include "dg_op_ring_attn.h"
#include "dg_ops_util.h"
#include "dg_pass_cp.h"

int dg_cp_lowers(const dg_graph *g, int t) {
    return g->mesh[DG_AXIS_CP] > 1 && g->tensors[t].ndim > 1 && g->tensors[t].sharding.split[1] == DG_AXIS_CP;
}

int dg_cp_lower_copy(dg_graph *g, const dg_node *n, const int *in, int *out, dg_err *err) {
    if (dg_graph_add(g, n->op, &n->attrs, in, n->n_in, out, n->name) < 0 && n->n_out > 0)
        return dg_err_set(err, g->status ? g->status : DG_EINTERNAL, "%s", g->err.msg);
    return DG_OK;
}

int dg_cp_lower_rope(dg_graph *g, const dg_graph *src, const dg_node *n, const int *in, int *out,
                     const void *opts, dg_err *err) {
    (void)src;
    if (!dg_cp_lowers(g, in[0])) return dg_cp_lower_copy(g, n, in, out, err);
    const dg_pass_cp_opts *o = opts;
    int pos = dg_cp_positions(g, o->cp_size, g->tensors[in[0]].shape[1], n->attrs.i[0]);
    out[0] = pos < 0 ? -1 : dg_add1(g, &dg_op_rope_pos, &n->attrs, (int[]){in[0], pos}, 2, n->name);
    if (out[0] < 0) return dg_err_set(err, g->status ? g->status : DG_EINTERNAL, "cp rope: %s", g->err.msg);
    return DG_OK;
}

int dg_cp_lower_pos_embed(dg_graph *g, const dg_graph *src, const dg_node *n, const int *in, int *out,
                          const void *opts, dg_err *err) {
    (void)src;
    if (!dg_cp_lowers(g, in[0])) return dg_cp_lower_copy(g, n, in, out, err);
    const dg_pass_cp_opts *o = opts;
    int pos = dg_cp_positions(g, o->cp_size, g->tensors[in[0]].shape[1], 0);
    out[0] = pos < 0 ? -1 : dg_add1(g, &dg_op_pos_embed_pos, NULL, (int[]){in[0], in[1], pos}, 3, n->name);
    if (out[0] < 0) return dg_err_set(err, g->status ? g->status : DG_EINTERNAL, "cp positions: %s", g->err.msg);
    return DG_OK;
}

/* all_reduce(sum) / all_reduce(count) over cp: the loss. */
static int cp_mean(dg_graph *g, int sum, int count, int cp, const char *name, int *loss, dg_err *err) {
    int num = sum < 0 ? -1 : dg_all_reduce(g, sum, DG_AXIS_CP, cp);
    int den = count < 0 ? -1 : dg_all_reduce(g, count, DG_AXIS_CP, cp);
    *loss = num < 0 || den < 0 ? -1 : dg_add1(g, &dg_op_cp_div, NULL, (int[]){num, den}, 2, name);
    if (*loss < 0) return dg_err_set(err, g->status ? g->status : DG_EINTERNAL, "cp loss: %s", g->err.msg);
    return DG_OK;
}

int dg_cp_lower_xent(dg_graph *g, const dg_graph *src, const dg_node *n, const int *in, int *out,
                     const void *opts, dg_err *err) {
    (void)src;
    if (!dg_cp_lowers(g, in[1])) return dg_cp_lower_copy(g, n, in, out, err);
    const dg_pass_cp_opts *o = opts;
    int outs[3] = {-1, -1, -1};
    dg_graph_add(g, &dg_op_cp_xent_sum, NULL, in, n->n_in, outs, "loss/cp_sum");
    out[1] = outs[1];
    return cp_mean(g, outs[0], outs[2], o->cp_size, n->name, &out[0], err);
}

int dg_cp_lower_vocab_xent(dg_graph *g, const dg_graph *src, const dg_node *n, const int *in, int *out,
                           const void *opts, dg_err *err) {
    (void)src;
    if (!dg_cp_lowers(g, in[1])) return dg_cp_lower_copy(g, n, in, out, err);
    const dg_pass_cp_opts *o = opts;
    int outs[2] = {-1, -1};
    dg_graph_add(g, &dg_op_cp_vocab_xent_sum, &n->attrs, in, n->n_in, outs, "loss/cp_sum");
    return cp_mean(g, outs[0], outs[1], o->cp_size, n->name, &out[0], err);
}

int dg_cp_lower_attention(dg_graph *g, const dg_graph *src, const dg_node *n, const int *in, int *out,
                          const void *opts, dg_err *err) {
    (void)src;
    if (!dg_cp_lowers(g, in[0])) return dg_cp_lower_copy(g, n, in, out, err);
    const dg_pass_cp_opts *o = opts;
    if (!n->attrs.i[0])
        return dg_err_set(err, DG_EINPUT, "--context-parallel-size %d: ring attention needs causal attention", o->cp_size);
    out[0] = o->comm_type == DG_CP_COMM_A2A
                 ? dg_ulysses_attention(g, in[0], in[1], in[2], o->cp_size, n->attrs.f[0], &out[1])
                 : dg_ring_attention(g, in[0], in[1], in[2], o->cp_size, n->attrs.f[0], &out[1]);
    if (out[0] < 0) return dg_err_set(err, g->status ? g->status : DG_EINTERNAL, "ring attention: %s", g->err.msg);
    return DG_OK;
}
