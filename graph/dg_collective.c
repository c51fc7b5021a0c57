/* dg_collective.c — the collective ops: shape rules, costs, adjoints and
 * builders (see dg_collective.h for the attribute slots and semantics). */
#include "dg_collective.h"

#include "dg_layout.h"

#include <stdarg.h>
#include <string.h>

const char *dg_comm_name(dg_comm_kind k) {
    static const char *names[DG_COMM_COUNT] = {"none",       "all_reduce", "all_gather",
                                               "reduce_scatter", "all_to_all", "send",
                                               "recv",       "copy_to_group", "scatter_to_group"};
    return (unsigned)k < DG_COMM_COUNT ? names[k] : "?";
}

/* ---- shape rules ------------------------------------------------------------ */

/* Every collective needs a sane group size; say which rule failed. */
static int check_group(const dg_node *n, dg_err *err) {
    int64_t p = n->attrs.i[DG_COLL_GROUP_SIZE];
    if (p < 1) return dg_err_set(err, DG_EINPUT, "group_size is %lld, expected >= 1", (long long)p);
    return DG_OK;
}

static int check_dim(const dg_tensor *x, int64_t dim, const char *what, dg_err *err) {
    if (dim < 0 || dim >= x->ndim)
        return dg_err_set(err, DG_EINPUT, "%s %lld outside 0..%d of input '%s'", what,
                          (long long)dim, x->ndim - 1, x->name);
    return DG_OK;
}

static int infer_same(const dg_graph *g, const dg_node *n, dg_tensor_desc *outs, dg_err *err) {
    DG_TRY(check_group(n, err));
    dg_desc_like(&outs[0], dg_Tc(g, n->in[0]));
    return DG_OK;
}

static int infer_all_gather(const dg_graph *g, const dg_node *n, dg_tensor_desc *outs,
                            dg_err *err) {
    DG_TRY(check_group(n, err));
    const dg_tensor *x = dg_Tc(g, n->in[0]);
    int64_t dim = n->attrs.i[DG_COLL_DIM];
    DG_TRY(check_dim(x, dim, "dim", err));
    dg_desc_like(&outs[0], x);
    outs[0].shape[dim] *= n->attrs.i[DG_COLL_GROUP_SIZE];
    return DG_OK;
}

static int infer_reduce_scatter(const dg_graph *g, const dg_node *n, dg_tensor_desc *outs,
                                dg_err *err) {
    DG_TRY(check_group(n, err));
    const dg_tensor *x = dg_Tc(g, n->in[0]);
    int64_t dim = n->attrs.i[DG_COLL_DIM], p = n->attrs.i[DG_COLL_GROUP_SIZE];
    DG_TRY(check_dim(x, dim, "dim", err));
    if (x->shape[dim] % p != 0)
        return dg_err_set(err, DG_EINPUT, "dim %lld of '%s' is %lld, not divisible by group_size %lld",
                          (long long)dim, x->name, (long long)x->shape[dim], (long long)p);
    dg_desc_like(&outs[0], x);
    outs[0].shape[dim] /= p;
    return DG_OK;
}

static int infer_all_to_all(const dg_graph *g, const dg_node *n, dg_tensor_desc *outs,
                            dg_err *err) {
    DG_TRY(check_group(n, err));
    const dg_tensor *x = dg_Tc(g, n->in[0]);
    int64_t sd = n->attrs.i[DG_COLL_SPLIT_DIM], cd = n->attrs.i[DG_COLL_CONCAT_DIM];
    int64_t p = n->attrs.i[DG_COLL_GROUP_SIZE];
    DG_TRY(check_dim(x, sd, "split_dim", err));
    DG_TRY(check_dim(x, cd, "concat_dim", err));
    if (x->shape[sd] % p != 0)
        return dg_err_set(err, DG_EINPUT,
                          "split_dim %lld of '%s' is %lld, not divisible by group_size %lld",
                          (long long)sd, x->name, (long long)x->shape[sd], (long long)p);
    dg_desc_like(&outs[0], x);
    outs[0].shape[sd] /= p;
    outs[0].shape[cd] *= p;
    return DG_OK;
}

static int infer_send(const dg_graph *g, const dg_node *n, dg_tensor_desc *outs, dg_err *err) {
    (void)g;
    (void)outs;
    return check_group(n, err);
}

static int infer_recv(const dg_graph *g, const dg_node *n, dg_tensor_desc *outs, dg_err *err) {
    (void)g;
    DG_TRY(check_group(n, err));
    int64_t dt = n->attrs.i[DG_COLL_DTYPE], nd = n->attrs.i[DG_COLL_NDIM];
    if (dt < 0 || dt >= DG_DTYPE_COUNT)
        return dg_err_set(err, DG_EINPUT, "dtype %lld is not a dg_dtype", (long long)dt);
    if (nd < 0 || nd > DG_MAX_DIMS)
        return dg_err_set(err, DG_EINPUT, "ndim %lld outside 0..%d", (long long)nd, DG_MAX_DIMS);
    int64_t shape[DG_MAX_DIMS] = {0};
    for (int d = 0; d < nd; d++) {
        shape[d] = n->attrs.i[DG_COLL_SHAPE + d];
        if (shape[d] <= 0)
            return dg_err_set(err, DG_EINPUT, "shape[%d] is %lld, expected > 0", d,
                              (long long)shape[d]);
    }
    dg_desc_set(&outs[0], (dg_dtype)dt, (int)nd, shape);
    return DG_OK;
}

/* ---- costs: what each rank puts on the wire with ring algorithms -------------- */

static double in_bytes(const dg_graph *g, const dg_node *n) {
    return n->n_in > 0 ? (double)dg_tensor_bytes(dg_Tc(g, n->in[0])) : 0.0;
}
static double in_numel(const dg_graph *g, const dg_node *n) {
    return n->n_in > 0 ? (double)dg_tensor_numel(dg_Tc(g, n->in[0])) : 0.0;
}
/* (p-1)/p: the fraction of the data a ring step sends; 0 for a group of one. */
static double ring_frac(const dg_node *n) {
    double p = (double)n->attrs.i[DG_COLL_GROUP_SIZE];
    return p > 1 ? (p - 1) / p : 0.0;
}

static void cost_all_reduce(const dg_graph *g, const dg_node *n, dg_cost *c) {
    /* reduce-scatter then all-gather: 2(p-1)/p of the buffer, (p-1)/p adds */
    c->bytes = 2.0 * ring_frac(n) * in_bytes(g, n);
    c->flops = ring_frac(n) * in_numel(g, n);
}
static void cost_all_gather(const dg_graph *g, const dg_node *n, dg_cost *c) {
    /* every rank forwards the p-1 shards it does not own */
    c->bytes = (double)(n->attrs.i[DG_COLL_GROUP_SIZE] - 1) * in_bytes(g, n);
    c->flops = 0;
}
static void cost_reduce_scatter(const dg_graph *g, const dg_node *n, dg_cost *c) {
    c->bytes = ring_frac(n) * in_bytes(g, n);
    c->flops = ring_frac(n) * in_numel(g, n);
}
static void cost_all_to_all(const dg_graph *g, const dg_node *n, dg_cost *c) {
    c->bytes = ring_frac(n) * in_bytes(g, n); /* the chunk for itself stays home */
    c->flops = 0;
}
static void cost_send(const dg_graph *g, const dg_node *n, dg_cost *c) {
    c->bytes = in_bytes(g, n);
    c->flops = 0;
}
static void cost_recv(const dg_graph *g, const dg_node *n, dg_cost *c) {
    c->bytes = n->n_out > 0 ? (double)dg_tensor_bytes(dg_Tc(g, n->out[0])) : 0.0;
    c->flops = 0;
}

/* ---- sharding rules (dg_layout.h) ---------------------------------------------
 * Over a model axis (tp, cp, pp) a collective is where a layout changes:
 * all_reduce turns partial(axis) into replicated, all_gather(dim) undoes a
 * split of dim over axis, reduce_scatter(dim) turns partial(axis) into a
 * split; anything else is a misplaced collective (cannot). Over a data axis
 * (dp, edp, ep) a collective exchanges data between micro-batches and keeps
 * the logical layout; only the DP pass's bucket reduce-scatter marks the
 * shard a rank keeps (split over the axis). */

static int shard_all_reduce(const dg_graph *g, const dg_node *n, const dg_sharding *in,
                            dg_sharding *out, dg_attrs *attrs) {
    (void)g;
    (void)attrs;
    out[0] = in[0];
    if (in[0].partial == n->group) out[0].partial = DG_AXIS_NONE;
    else if (!dg_axis_is_data(n->group)) return DG_SHARD_CANNOT;
    return DG_OK;
}

static int shard_all_gather(const dg_graph *g, const dg_node *n, const dg_sharding *in,
                            dg_sharding *out, dg_attrs *attrs) {
    (void)g;
    int d = (int)attrs->i[DG_COLL_DIM];
    out[0] = in[0];
    if (d < 0 || d >= DG_MAX_DIMS) return DG_SHARD_CANNOT;
    if (in[0].split2[d] == n->group) {
        out[0].split2[d] = DG_AXIS_NONE;
    } else if (in[0].split[d] == n->group && in[0].split2[d] == DG_AXIS_NONE) {
        out[0].split[d] = DG_AXIS_NONE;
        out[0].stride[d] = 0;
    } else if (!dg_axis_is_data(n->group)) {
        return DG_SHARD_CANNOT;
    }
    return DG_OK;
}

static int shard_reduce_scatter(const dg_graph *g, const dg_node *n, const dg_sharding *in,
                                dg_sharding *out, dg_attrs *attrs) {
    (void)g;
    int d = (int)attrs->i[DG_COLL_DIM];
    out[0] = in[0];
    if (d < 0 || d >= DG_MAX_DIMS) return DG_SHARD_CANNOT;
    if (n->group == DG_AXIS_EP) return DG_OK; /* the EP combine: rows back home */
    if (in[0].partial != n->group && !dg_axis_is_data(n->group)) return DG_SHARD_CANNOT;
    out[0].partial = DG_AXIS_NONE;
    if (out[0].split[d] == DG_AXIS_NONE) out[0].split[d] = (uint8_t)n->group;
    else if (out[0].split2[d] == DG_AXIS_NONE) out[0].split2[d] = (uint8_t)n->group;
    else return DG_SHARD_CANNOT;
    return DG_OK;
}

static int shard_all_to_all(const dg_graph *g, const dg_node *n, const dg_sharding *in,
                            dg_sharding *out, dg_attrs *attrs) {
    (void)g;
    int sd = (int)attrs->i[DG_COLL_SPLIT_DIM], cd = (int)attrs->i[DG_COLL_CONCAT_DIM];
    out[0] = in[0];
    if (sd < 0 || cd < 0 || sd >= DG_MAX_DIMS || cd >= DG_MAX_DIMS || in[0].partial != DG_AXIS_NONE)
        return DG_SHARD_CANNOT;
    if (dg_axis_is_data(n->group)) return DG_OK;
    /* Ulysses: the group's split moves from the concat dim to the split dim,
     * inside another axis's split there (heads over tp, then over cp) */
    uint8_t a = (uint8_t)n->group;
    if (in[0].split2[cd] == a) out[0].split2[cd] = DG_AXIS_NONE;
    else if (in[0].split[cd] == a && in[0].split2[cd] == DG_AXIS_NONE) out[0].split[cd] = DG_AXIS_NONE;
    else return DG_SHARD_CANNOT;
    if (in[0].split[sd] == DG_AXIS_NONE) out[0].split[sd] = a;
    else if (in[0].split2[sd] == DG_AXIS_NONE && in[0].split[sd] != a) out[0].split2[sd] = a;
    else return DG_SHARD_CANNOT;
    return DG_OK;
}

static int shard_copy_to_group(const dg_graph *g, const dg_node *n, const dg_sharding *in,
                               dg_sharding *out, dg_attrs *attrs) {
    (void)g;
    (void)n;
    (void)attrs;
    if (in[0].partial != DG_AXIS_NONE) return DG_SHARD_CANNOT;
    out[0] = in[0];
    return DG_OK;
}

/* The dim becomes split over the axis (the slice each rank keeps): a
 * replicated dim, or one split over another axis, whose local slice is then
 * split inside it, as reduce_scatter's (SP's sequence slice of CP's chunks,
 * cp+tp, which all_gather over tp undoes). */
static int shard_scatter_to_group(const dg_graph *g, const dg_node *n, const dg_sharding *in,
                                  dg_sharding *out, dg_attrs *attrs) {
    (void)g;
    int d = (int)attrs->i[DG_COLL_DIM];
    out[0] = in[0];
    if (d < 0 || d >= DG_MAX_DIMS || in[0].partial != DG_AXIS_NONE || dg_axis_is_data(n->group))
        return DG_SHARD_CANNOT;
    if (in[0].split[d] == DG_AXIS_NONE && in[0].split2[d] == DG_AXIS_NONE)
        out[0].split[d] = (uint8_t)n->group;
    else if (in[0].split2[d] == DG_AXIS_NONE && in[0].split[d] != n->group && in[0].stride[d] <= 1)
        out[0].split2[d] = (uint8_t)n->group;
    else
        return DG_SHARD_CANNOT;
    return DG_OK;
}

/* recv: the layout it was declared with (no input to derive one from). */
static int shard_recv(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                      dg_attrs *attrs) {
    (void)g;
    (void)in;
    (void)attrs;
    memcpy(&out[0], &n->attrs.i[DG_COLL_LAYOUT], sizeof out[0]);
    return DG_OK;
}

static int shard_send(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                      dg_attrs *attrs) {
    (void)g;
    (void)n;
    (void)in;
    (void)out;
    (void)attrs;
    return DG_OK;
}

/* ---- builders --------------------------------------------------------------- */


/* Add a collective node and stamp it with its group. Returns the node id or -1. */
static int coll_add(dg_graph *g, const dg_op_def *op, const dg_attrs *a, int x, dg_axis axis,
                    const char *name) {
    if (g->status != DG_OK) return -1;
    if (axis <= DG_AXIS_NONE || axis >= DG_AXIS_COUNT)
        return dg_graph_fail(g, "%s: axis %d is not a parallel axis", op->name, (int)axis);
    if (a->i[DG_COLL_GROUP_SIZE] < 1)
        return dg_graph_fail(g, "%s: group_size %lld, expected >= 1", op->name,
                         (long long)a->i[DG_COLL_GROUP_SIZE]);
    int rc = dg_graph_add(g, op, a, &x, x >= 0 ? 1 : 0, NULL, name);
    if (rc < 0) return -1;
    int nid = g->n_nodes - 1;
    dg_node *n = dg_N(g, nid);
    n->group = axis;
    n->stream = DG_STREAM_COMM;
    /* the rule needs the axis, which dg_graph_add did not know yet */
    dg_sharding lay[DG_MAX_OUTPUTS];
    if (n->n_out > 0 && dg_layout_infer(g, n, lay, NULL) == DG_OK)
        g->tensors[n->out[0]].sharding = lay[0];
    return nid;
}

static dg_attrs coll_attrs(int group_size) {
    dg_attrs a;
    memset(&a, 0, sizeof a);
    a.i[DG_COLL_GROUP_SIZE] = group_size;
    return a;
}

static int check_input(dg_graph *g, const char *op, int x) {
    if (g->status != DG_OK) return -1;
    if (x < 0 || x >= g->n_tensors)
        return dg_graph_fail(g, "%s: input is tensor %d, which does not exist", op, x);
    return DG_OK;
}

/* Output tensor of node nid, with sharding copied from input x. */
static dg_tensor *out_like(dg_graph *g, int nid, int x) {
    dg_tensor *y = dg_T(g, dg_N(g, nid)->out[0]);
    y->sharding = dg_T(g, x)->sharding;
    return y;
}

static int all_reduce_named(dg_graph *g, int x, dg_axis axis, int group_size, const char *name) {
    if (check_input(g, "all_reduce", x) != DG_OK) return -1;
    dg_attrs a = coll_attrs(group_size);
    int nid = coll_add(g, &dg_op_all_reduce, &a, x, axis, name);
    if (nid < 0) return -1;
    return dg_N(g, nid)->out[0];
}

static int all_gather_named(dg_graph *g, int x, dg_axis axis, int group_size, int dim,
                            const char *name) {
    if (check_input(g, "all_gather", x) != DG_OK) return -1;
    dg_attrs a = coll_attrs(group_size);
    a.i[DG_COLL_DIM] = dim;
    int nid = coll_add(g, &dg_op_all_gather, &a, x, axis, name);
    if (nid < 0) return -1;
    return dg_N(g, nid)->out[0];
}

static int reduce_scatter_named(dg_graph *g, int x, dg_axis axis, int group_size, int dim,
                                const char *name) {
    if (check_input(g, "reduce_scatter", x) != DG_OK) return -1;
    dg_attrs a = coll_attrs(group_size);
    a.i[DG_COLL_DIM] = dim;
    int nid = coll_add(g, &dg_op_reduce_scatter, &a, x, axis, name);
    if (nid < 0) return -1;
    return dg_N(g, nid)->out[0];
}

static int all_to_all_named(dg_graph *g, int x, dg_axis axis, int group_size, int split_dim,
                            int concat_dim, const char *name) {
    if (check_input(g, "all_to_all", x) != DG_OK) return -1;
    dg_attrs a = coll_attrs(group_size);
    a.i[DG_COLL_SPLIT_DIM] = split_dim;
    a.i[DG_COLL_CONCAT_DIM] = concat_dim;
    int nid = coll_add(g, &dg_op_all_to_all, &a, x, axis, name);
    if (nid < 0) return -1;
    return dg_N(g, nid)->out[0];
}

static int send_named(dg_graph *g, int x, dg_axis axis, int group_size, int peer,
                      const char *name) {
    if (check_input(g, "send", x) != DG_OK) return -1;
    dg_attrs a = coll_attrs(group_size);
    a.i[DG_COLL_PEER] = peer;
    return coll_add(g, &dg_op_send, &a, x, axis, name);
}

/* recv's layout in its attrs: dg_sharding's bytes in two int64 slots */
_Static_assert(sizeof(dg_sharding) <= 2 * sizeof(int64_t), "dg_sharding packs into i[9], i[10]");

static int recv_named(dg_graph *g, dg_axis axis, int group_size, int peer, dg_dtype dtype,
                      int ndim, const int64_t *shape, const dg_sharding *layout, const char *name) {
    if (g->status != DG_OK) return -1;
    if (ndim < 0 || ndim > DG_MAX_DIMS)
        return dg_graph_fail(g, "recv: ndim %d outside 0..%d", ndim, DG_MAX_DIMS);
    dg_attrs a = coll_attrs(group_size);
    a.i[DG_COLL_PEER] = peer;
    a.i[DG_COLL_DTYPE] = dtype;
    a.i[DG_COLL_NDIM] = ndim;
    for (int d = 0; d < ndim; d++) a.i[DG_COLL_SHAPE + d] = shape[d];
    if (layout) memcpy(&a.i[DG_COLL_LAYOUT], layout, sizeof *layout);
    int nid = coll_add(g, &dg_op_recv, &a, -1, axis, name);
    return nid < 0 ? -1 : dg_N(g, nid)->out[0];
}

static int copy_to_group_named(dg_graph *g, int x, dg_axis axis, int group_size,
                               const char *name) {
    if (check_input(g, "copy_to_group", x) != DG_OK) return -1;
    dg_attrs a = coll_attrs(group_size);
    int nid = coll_add(g, &dg_op_copy_to_group, &a, x, axis, name);
    return nid < 0 ? -1 : out_like(g, nid, x)->id;
}

int dg_scatter_to_group(dg_graph *g, int x, dg_axis axis, int group_size, int dim) {
    if (check_input(g, "scatter_to_group", x) != DG_OK) return -1;
    dg_attrs a = coll_attrs(group_size);
    a.i[DG_COLL_DIM] = dim;
    int nid = coll_add(g, &dg_op_scatter_to_group, &a, x, axis, NULL);
    return nid < 0 ? -1 : dg_N(g, nid)->out[0];
}

int dg_all_reduce(dg_graph *g, int x, dg_axis axis, int group_size) {
    return all_reduce_named(g, x, axis, group_size, NULL);
}
int dg_all_gather(dg_graph *g, int x, dg_axis axis, int group_size, int dim) {
    return all_gather_named(g, x, axis, group_size, dim, NULL);
}
int dg_all_gather_whole_grad(dg_graph *g, int x, dg_axis axis, int group_size, int dim) {
    int y = all_gather_named(g, x, axis, group_size, dim, NULL);
    if (y >= 0) dg_N(g, dg_T(g, y)->producer)->attrs.i[DG_COLL_WHOLE_GRAD] = 1;
    return y;
}
int dg_reduce_scatter(dg_graph *g, int x, dg_axis axis, int group_size, int dim) {
    return reduce_scatter_named(g, x, axis, group_size, dim, NULL);
}
int dg_all_to_all(dg_graph *g, int x, dg_axis axis, int group_size, int split_dim,
                  int concat_dim) {
    return all_to_all_named(g, x, axis, group_size, split_dim, concat_dim, NULL);
}
int dg_send(dg_graph *g, int x, dg_axis axis, int group_size, int peer) {
    return send_named(g, x, axis, group_size, peer, NULL);
}
int dg_recv(dg_graph *g, dg_axis axis, int group_size, int peer, dg_dtype dtype, int ndim,
            const int64_t *shape) {
    return recv_named(g, axis, group_size, peer, dtype, ndim, shape, NULL, NULL);
}
int dg_recv_laid_out(dg_graph *g, dg_axis axis, int group_size, int peer, dg_dtype dtype, int ndim,
                     const int64_t *shape, const dg_sharding *layout) {
    return recv_named(g, axis, group_size, peer, dtype, ndim, shape, layout, NULL);
}
int dg_copy_to_group(dg_graph *g, int x, dg_axis axis, int group_size) {
    return copy_to_group_named(g, x, axis, group_size, NULL);
}

/* ---- adjoints ------------------------------------------------------------------
 * Builders may grow g->nodes, so each adjoint copies what it needs from the
 * forward node before emitting anything. Backward nodes are named after the
 * forward node ("<name>.bwd") and point back at it through fwd_node. */

typedef struct fwd_info {
    int id;
    dg_axis axis;
    int group_size;
    dg_attrs attrs;
    int x;      /* forward input, -1 for recv */
    char name[DG_NAME_LEN];
} fwd_info;

static fwd_info fwd_of(const dg_node *n) {
    fwd_info f;
    f.id = n->id;
    f.axis = n->group;
    f.group_size = (int)n->attrs.i[DG_COLL_GROUP_SIZE];
    f.attrs = n->attrs;
    f.x = n->n_in > 0 ? n->in[0] : -1;
    snprintf(f.name, sizeof f.name, "%.*s.bwd", DG_NAME_LEN - 5, n->name);
    return f;
}

/* Link the node that produced tensor t (or node id nid) to its forward node. */
static int link_fwd(dg_graph *g, int nid, const fwd_info *f) {
    if (nid < 0) return g->status != DG_OK ? g->status : DG_EINTERNAL;
    dg_N(g, nid)->fwd_node = f->id;
    return DG_OK;
}
static int link_out(dg_graph *g, int t, const fwd_info *f) {
    if (t < 0) return g->status != DG_OK ? g->status : DG_EINTERNAL;
    return link_fwd(g, dg_T(g, t)->producer, f);
}

static int adj_copy_to_group(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    fwd_info f = fwd_of(n);
    din[0] = -1;
    if (dout[0] < 0) return DG_OK;
    din[0] = all_reduce_named(g, dout[0], f.axis, f.group_size, f.name);
    return link_out(g, din[0], &f);
}

static int adj_scatter_to_group(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    fwd_info f = fwd_of(n);
    din[0] = -1;
    if (dout[0] < 0) return DG_OK;
    din[0] = all_gather_named(g, dout[0], f.axis, f.group_size, (int)f.attrs.i[DG_COLL_DIM], f.name);
    return link_out(g, din[0], &f);
}

static int adj_all_reduce(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    (void)g;
    (void)n;
    din[0] = dout[0]; /* the gradient of a sum is already the same on every rank */
    return DG_OK;
}

static int adj_all_gather(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    fwd_info f = fwd_of(n);
    din[0] = -1;
    if (dout[0] < 0) return DG_OK;
    if (f.attrs.i[DG_COLL_WHOLE_GRAD]) {
        dg_attrs a = coll_attrs(f.group_size);
        a.i[DG_COLL_DIM] = f.attrs.i[DG_COLL_DIM];
        int nid = coll_add(g, &dg_op_scatter_to_group, &a, dout[0], f.axis, f.name);
        if (nid < 0) return g->status;
        din[0] = dg_N(g, nid)->out[0];
        return link_fwd(g, nid, &f);
    }
    din[0] = reduce_scatter_named(g, dout[0], f.axis, f.group_size, (int)f.attrs.i[DG_COLL_DIM],
                                  f.name);
    return link_out(g, din[0], &f);
}

static int adj_reduce_scatter(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    fwd_info f = fwd_of(n);
    din[0] = -1;
    if (dout[0] < 0) return DG_OK;
    din[0] = all_gather_named(g, dout[0], f.axis, f.group_size, (int)f.attrs.i[DG_COLL_DIM],
                              f.name);
    return link_out(g, din[0], &f);
}

static int adj_all_to_all(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    fwd_info f = fwd_of(n);
    din[0] = -1;
    if (dout[0] < 0) return DG_OK;
    /* transposed: split where the forward concatenated, concatenate where it split */
    din[0] = all_to_all_named(g, dout[0], f.axis, f.group_size,
                              (int)f.attrs.i[DG_COLL_CONCAT_DIM],
                              (int)f.attrs.i[DG_COLL_SPLIT_DIM], f.name);
    return link_out(g, din[0], &f);
}

static int adj_send(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    (void)dout;
    fwd_info f = fwd_of(n);
    din[0] = -1;
    if (f.x < 0 || f.x >= g->n_tensors) return DG_EINTERNAL;
    /* the peer that received x sends its gradient back along the same link */
    dg_tensor x = *dg_T(g, f.x);
    din[0] = recv_named(g, f.axis, f.group_size, (int)f.attrs.i[DG_COLL_PEER], x.dtype, x.ndim,
                        x.shape, &x.sharding, f.name);
    return link_out(g, din[0], &f);
}

static int adj_recv(dg_graph *g, const dg_node *n, const int *dout, int *din) {
    (void)din; /* recv has no inputs */
    fwd_info f = fwd_of(n);
    if (dout[0] < 0) return DG_OK;
    int nid = send_named(g, dout[0], f.axis, f.group_size, (int)f.attrs.i[DG_COLL_PEER], f.name);
    return link_fwd(g, nid, &f);
}

/* ---- the op table -------------------------------------------------------------- */

const dg_op_def dg_op_all_reduce = {
    .name = "all_reduce", .min_inputs = 1, .max_inputs = 1, .n_outputs = 1,
    .iattr_names = {"group_size", NULL},
    .stream = DG_STREAM_COMM, .comm = DG_COMM_ALL_REDUCE,
    .infer = infer_same, .cost = cost_all_reduce, .adjoint = adj_all_reduce,
    .shard = shard_all_reduce,
};

const dg_op_def dg_op_all_gather = {
    .name = "all_gather", .min_inputs = 1, .max_inputs = 1, .n_outputs = 1,
    .iattr_names = {"group_size", "dim", "whole_grad", NULL},
    .stream = DG_STREAM_COMM, .comm = DG_COMM_ALL_GATHER,
    .infer = infer_all_gather, .cost = cost_all_gather, .adjoint = adj_all_gather,
    .shard = shard_all_gather,
};

const dg_op_def dg_op_reduce_scatter = {
    .name = "reduce_scatter", .min_inputs = 1, .max_inputs = 1, .n_outputs = 1,
    .iattr_names = {"group_size", "dim", NULL},
    .stream = DG_STREAM_COMM, .comm = DG_COMM_REDUCE_SCATTER,
    .infer = infer_reduce_scatter, .cost = cost_reduce_scatter, .adjoint = adj_reduce_scatter,
    .shard = shard_reduce_scatter,
};

const dg_op_def dg_op_all_to_all = {
    .name = "all_to_all", .min_inputs = 1, .max_inputs = 1, .n_outputs = 1,
    .iattr_names = {"group_size", "split_dim", "concat_dim", NULL},
    .stream = DG_STREAM_COMM, .comm = DG_COMM_ALL_TO_ALL,
    .infer = infer_all_to_all, .cost = cost_all_to_all, .adjoint = adj_all_to_all,
    .shard = shard_all_to_all,
};

const dg_op_def dg_op_send = {
    .name = "send", .min_inputs = 1, .max_inputs = 1, .n_outputs = 0,
    .iattr_names = {"group_size", "peer", NULL},
    .stream = DG_STREAM_COMM, .comm = DG_COMM_SEND,
    .infer = infer_send, .cost = cost_send, .adjoint = adj_send,
    .shard = shard_send,
};

const dg_op_def dg_op_recv = {
    .name = "recv", .min_inputs = 0, .max_inputs = 0, .n_outputs = 1,
    .iattr_names = {"group_size", "peer", "dtype", "ndim", "shape0", "shape1", "shape2",
                    "shape3", "tag", "layout0", "layout1", NULL},
    .stream = DG_STREAM_COMM, .comm = DG_COMM_RECV,
    .infer = infer_recv, .cost = cost_recv, .adjoint = adj_recv,
    .shard = shard_recv,
};

const dg_op_def dg_op_copy_to_group = {
    .name = "copy_to_group", .min_inputs = 1, .max_inputs = 1, .n_outputs = 1,
    .iattr_names = {"group_size", NULL},
    .stream = DG_STREAM_COMM, .comm = DG_COMM_COPY_TO_GROUP,
    .infer = infer_same, .cost = NULL, .adjoint = adj_copy_to_group,
    .shard = shard_copy_to_group,
};

const dg_op_def dg_op_scatter_to_group = {
    .name = "scatter_to_group", .min_inputs = 1, .max_inputs = 1, .n_outputs = 1,
    .iattr_names = {"group_size", "dim", NULL},
    .stream = DG_STREAM_COMM, .comm = DG_COMM_SCATTER_TO_GROUP,
    .infer = infer_reduce_scatter, .cost = NULL, .adjoint = adj_scatter_to_group,
    .shard = shard_scatter_to_group,
};
