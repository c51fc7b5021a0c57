/* dg_collective_v.c — the all_to_all_v op: shape rule, cost, adjoint,
 * builder and flat layout (see dg_collective_v.h). */
#include "dg_collective_v.h"

#include "dg_layout.h"

#include <string.h>

static int64_t row_elems(const dg_tensor *t) {
    int64_t r = 1;
    for (int i = 1; i < t->ndim; i++) r *= t->shape[i];
    return r;
}

static int check_counts(const dg_tensor *c, int64_t p, const char *what, dg_err *err) {
    if (c->dtype != DG_I32 || c->ndim != 1 || c->shape[0] % p != 0)
        return dg_err_set(err, DG_EINPUT,
                          "rule 'shape' broken: %s '%s' must be i32 [group_size * G] with "
                          "group_size %lld",
                          what, c->name, (long long)p);
    return DG_OK;
}

static int infer_a2av(const dg_graph *g, const dg_node *n, dg_tensor_desc *outs, dg_err *err) {
    int64_t p = n->attrs.i[DG_COLLV_GROUP_SIZE], m = n->attrs.i[DG_COLLV_ROWS_OUT];
    if (p < 1) return dg_err_set(err, DG_EINPUT, "group_size is %lld, expected >= 1", (long long)p);
    if (m < 1) return dg_err_set(err, DG_EINPUT, "rows_out is %lld, expected >= 1", (long long)m);
    const dg_tensor *x = dg_Tc(g, n->in[0]);
    const dg_tensor *sc = dg_Tc(g, n->in[1]), *rc = dg_Tc(g, n->in[2]);
    if (x->ndim < 1) return dg_err_set(err, DG_EINPUT, "x '%s' is a scalar, expected rows", x->name);
    DG_TRY(check_counts(sc, p, "send_counts", err));
    DG_TRY(check_counts(rc, p, "recv_counts", err));
    if (sc->shape[0] != rc->shape[0])
        return dg_err_set(err, DG_EINPUT, "rule 'shape' broken: send_counts [%lld] and recv_counts "
                                          "[%lld] differ",
                          (long long)sc->shape[0], (long long)rc->shape[0]);
    dg_desc_like(&outs[0], x);
    outs[0].shape[0] = m;
    return DG_OK;
}

/* What one rank puts on the wire, judged from the smaller of its send and
 * receive bounds: with tokens spread evenly, (p-1)/p of the rows leave the
 * rank. The smaller one: a dispatch sends its own rows into a receive
 * buffer sized for the worst case, the combine sends from such a buffer
 * back into its own rows; both move the same rows (the link emulation
 * counts what really moves, dg_comm_emulate.h, and the combine cost twice
 * the dispatch when judged from its send buffer). */
static void cost_a2av(const dg_graph *g, const dg_node *n, dg_cost *c) {
    double p = (double)n->attrs.i[DG_COLLV_GROUP_SIZE];
    double in = (double)dg_tensor_bytes(dg_Tc(g, n->in[0])), out = (double)dg_tensor_bytes(dg_Tc(g, n->out[0]));
    c->bytes = p > 1 ? (p - 1) / p * (in < out ? in : out) : 0.0;
    c->flops = 0;
}

static int add_node(dg_graph *g, int x, int sc, int rc, dg_axis axis, int group_size,
                    int64_t rows_out, const char *name) {
    if (g->status != DG_OK) return -1;
    if (axis <= DG_AXIS_NONE || axis >= DG_AXIS_COUNT)
        return dg_graph_fail(g, "all_to_all_v: axis %d is not a parallel axis", (int)axis);
    if (group_size < 1)
        return dg_graph_fail(g, "all_to_all_v: group_size %d, expected >= 1", group_size);
    dg_attrs a;
    memset(&a, 0, sizeof a);
    a.i[DG_COLLV_GROUP_SIZE] = group_size;
    a.i[DG_COLLV_ROWS_OUT] = rows_out;
    int y = dg_graph_add(g, &dg_op_all_to_all_v, &a, (int[]){x, sc, rc}, 3, NULL, name);
    if (y < 0) return -1;
    dg_node *n = dg_N(g, dg_T(g, y)->producer);
    n->group = axis;
    n->stream = DG_STREAM_COMM;
    dg_T(g, y)->sharding = dg_T(g, x)->sharding;
    return y;
}

int dg_all_to_all_v(dg_graph *g, int x, int send_counts, int recv_counts, dg_axis axis,
                    int group_size, int64_t rows_out) {
    return add_node(g, x, send_counts, recv_counts, axis, group_size, rows_out, NULL);
}

/* Every row goes back to where it came from: the counts swap roles and the
 * static bound becomes the forward input's row count. */
static int adj_a2av(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    din[0] = din[1] = din[2] = -1;
    if (dout[0] < 0) return DG_OK;
    int fwd = n->id, x = n->in[0], sc = n->in[1], rc = n->in[2];
    dg_axis axis = n->group;
    int p = (int)n->attrs.i[DG_COLLV_GROUP_SIZE];
    char name[DG_NAME_LEN];
    snprintf(name, sizeof name, "%.*s.bwd", DG_NAME_LEN - 5, n->name);
    din[0] = add_node(g, dout[0], rc, sc, axis, p, dg_T(g, x)->shape[0], name);
    if (din[0] < 0) return g->status != DG_OK ? g->status : DG_EINTERNAL;
    dg_N(g, dg_T(g, din[0])->producer)->fwd_node = fwd;
    return DG_OK;
}

int dg_all_to_all_v_layout(const dg_graph *g, const dg_node *n, int size,
                           const int32_t *send_counts, const int32_t *recv_counts, int64_t *sc,
                           int64_t *sd, int64_t *rc, int64_t *rd, int64_t *recv_elems,
                           dg_err *err) {
    const dg_tensor *x = dg_Tc(g, n->in[0]), *y = dg_Tc(g, n->out[0]);
    int64_t row = row_elems(x), G = dg_Tc(g, n->in[1])->shape[0] / size;
    int64_t st = 0, rt = 0;
    for (int j = 0; j < size; j++) {
        int64_t s = 0, r = 0;
        for (int64_t c = 0; c < G; c++) {
            int32_t a = send_counts[j * G + c], b = recv_counts[j * G + c];
            if (a < 0 || b < 0)
                return dg_err_set(err, DG_EINPUT, "node %d '%s' (op all_to_all_v): negative count "
                                                  "for rank %d",
                                  n->id, n->name, j);
            s += a;
            r += b;
        }
        sd[j] = st * row, sc[j] = s * row, rd[j] = rt * row, rc[j] = r * row;
        st += s;
        rt += r;
    }
    if (st > x->shape[0] || rt > y->shape[0])
        return dg_err_set(err, DG_EINPUT,
                          "node %d '%s' (op all_to_all_v): sends %lld rows (bound %lld), receives "
                          "%lld rows (bound %lld): a static bound is too small",
                          n->id, n->name, (long long)st, (long long)x->shape[0], (long long)rt,
                          (long long)y->shape[0]);
    *recv_elems = rt * row;
    return DG_OK;
}

/* Rows exchanged between the micro-batches of a data axis (the EP dispatch
 * and combine) keep their logical layout; over a model axis it has no
 * meaning. The counts are replicated bookkeeping. */
static int shard_a2av(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                      dg_attrs *attrs) {
    (void)g;
    (void)attrs;
    if (!dg_axis_is_data(n->group) || in[0].partial != DG_AXIS_NONE) return DG_SHARD_CANNOT;
    out[0] = in[0];
    return DG_OK;
}

const dg_op_def dg_op_all_to_all_v = {
    .name = "all_to_all_v", .min_inputs = 3, .max_inputs = 3, .n_outputs = 1,
    .iattr_names = {"group_size", "rows_out", NULL},
    .stream = DG_STREAM_COMM, .comm = DG_COMM_ALL_TO_ALL,
    .infer = infer_a2av, .cost = cost_a2av, .adjoint = adj_a2av, .shard = shard_a2av,
};
