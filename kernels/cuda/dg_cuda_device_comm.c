/* dg_cuda_device_comm.c — collective nodes on device memory (see
 * dg_cuda_device_comm.h). Mirrors sched/dg_comm.c's dg_comm_run_node case
 * by case; where that one touches host memory, this enqueues on the stream. */
#include "dg_cuda_device_comm.h"

#include <string.h>

#include "dg_collective.h"
#include "dg_collective_v.h"
#include "dg_cuda_check.h"
#include "dg_cuda_nccl.h"

/* How the flat calls are made: through a NCCL comm bound to the stream, or
 * as device copies for a group of one rank. */
typedef struct lower {
    dg_comm *c;
    cudaStream_t s;
    int nccl;
} lower;

/* View a tensor as [outer, dim, inner] around dimension d. */
static void around(const dg_tensor *t, int d, int64_t *outer, int64_t *inner) {
    *outer = *inner = 1;
    for (int i = 0; i < d; i++) *outer *= t->shape[i];
    for (int i = d + 1; i < t->ndim; i++) *inner *= t->shape[i];
}

static size_t align256(size_t x) { return (x + 255) & ~(size_t)255; }

static int d2d(const lower *L, void *dst, const void *src, size_t bytes, dg_err *err) {
    if (dst != src && bytes > 0)
        DG_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, L->s));
    return DG_OK;
}

/* [outer, size, row] -> [size, outer, row]: one strided copy per rank. */
static int to_rank_major(const lower *L, const char *src, char *dst, int64_t outer, int size,
                         size_t row, dg_err *err) {
    if (row == 0 || outer == 0) return DG_OK;
    for (int r = 0; r < size; r++)
        DG_CUDA_TRY(cudaMemcpy2DAsync(dst + (size_t)r * (size_t)outer * row, row, src + (size_t)r * row,
                                      (size_t)size * row, row, (size_t)outer, cudaMemcpyDeviceToDevice,
                                      L->s));
    return DG_OK;
}

/* [size, outer, row] -> [outer, size, row]. */
static int from_rank_major(const lower *L, const char *src, char *dst, int64_t outer, int size,
                           size_t row, dg_err *err) {
    if (row == 0 || outer == 0) return DG_OK;
    for (int r = 0; r < size; r++)
        DG_CUDA_TRY(cudaMemcpy2DAsync(dst + (size_t)r * row, (size_t)size * row,
                                      src + (size_t)r * (size_t)outer * row, row, row, (size_t)outer,
                                      cudaMemcpyDeviceToDevice, L->s));
    return DG_OK;
}

/* ---- the flat calls ----------------------------------------------------------- */

/* all_reduce / all_gather / reduce_scatter: kind 0 / 1 / 2. A group of one
 * copies `count` elements. On a bound NCCL comm wait() returns at once: the
 * stream orders what follows. */
static int flat_collective(const lower *L, int kind, const void *send, void *recv, int64_t count,
                           dg_dtype dt, dg_err *err) {
    if (!L->nccl) return d2d(L, recv, send, (size_t)count * dg_dtype_size(dt), err);
    dg_comm *c = L->c;
    dg_comm_req req = {0};
    int st = kind == 0   ? c->ops->all_reduce(c, send, recv, count, dt, &req, err)
             : kind == 1 ? c->ops->all_gather(c, send, recv, count, dt, &req, err)
                         : c->ops->reduce_scatter(c, send, recv, count, dt, &req, err);
    return st == DG_OK ? c->ops->wait(c, &req, err) : st;
}

static int flat_all_to_allv(const lower *L, const void *send, const int64_t *sc, const int64_t *sd,
                            void *recv, const int64_t *rc, const int64_t *rd, dg_dtype dt,
                            dg_err *err) {
    size_t es = dg_dtype_size(dt);
    if (!L->nccl) {
        if (sc[0] != rc[0])
            return dg_err_set(err, DG_EINTERNAL, "all_to_allv in a group of one sends %lld but receives %lld",
                              (long long)sc[0], (long long)rc[0]);
        return d2d(L, (char *)recv + rd[0] * (int64_t)es, (const char *)send + sd[0] * (int64_t)es,
                   (size_t)sc[0] * es, err);
    }
    dg_comm *c = L->c;
    dg_comm_req req = {0};
    int st = c->ops->all_to_allv(c, send, sc, sd, recv, rc, rd, dt, &req, err);
    return st == DG_OK ? c->ops->wait(c, &req, err) : st;
}

static int flat_p2p(const lower *L, int is_send, void *buf, int64_t count, dg_dtype dt, int peer,
                    dg_err *err) {
    if (!L->nccl)
        return dg_err_set(err, DG_EINPUT, "point-to-point in a group of one (the peer is this rank)");
    dg_comm *c = L->c;
    dg_comm_req req = {0};
    /* NCCL has no tags: messages between two ranks match in issue order */
    int st = is_send ? c->ops->send(c, buf, count, dt, peer, 0, &req, err)
                     : c->ops->recv(c, buf, count, dt, peer, 0, &req, err);
    return st == DG_OK ? c->ops->wait(c, &req, err) : st;
}

/* ---- the node kinds ------------------------------------------------------------- */

static int run_all_gather(const lower *L, const dg_graph *g, const dg_node *n, void *const *in,
                          void *const *out, void *scratch, dg_err *err) {
    const dg_tensor *ti = dg_Tc(g, n->in[0]);
    int size = L->c->size;
    size_t es = dg_dtype_size(ti->dtype);
    int64_t outer, inner, count = dg_tensor_numel(ti);
    around(ti, (int)n->attrs.i[DG_COLL_DIM], &outer, &inner);
    void *dst = outer == 1 ? out[0] : scratch;
    DG_TRY(flat_collective(L, 1, in[0], dst, count, ti->dtype, err));
    if (outer == 1) return DG_OK;
    return from_rank_major(L, scratch, out[0], outer, size, (size_t)(count / outer) * es, err);
}

static int run_reduce_scatter(const lower *L, const dg_graph *g, const dg_node *n,
                              void *const *in, void *const *out, void *scratch, dg_err *err) {
    const dg_tensor *ti = dg_Tc(g, n->in[0]);
    int size = L->c->size;
    size_t es = dg_dtype_size(ti->dtype);
    int64_t outer, inner, total = dg_tensor_numel(ti), count = total / size;
    around(ti, (int)n->attrs.i[DG_COLL_DIM], &outer, &inner);
    const void *src = in[0];
    if (outer != 1) {
        DG_TRY(to_rank_major(L, in[0], scratch, outer, size, (size_t)(count / outer) * es, err));
        src = scratch;
    }
    return flat_collective(L, 2, src, out[0], count, ti->dtype, err);
}

/* Scratch of an all_to_all: the permuted send, then the received blocks. */
static void a2a_scratch(const dg_graph *g, const dg_node *n, size_t *send_bytes, size_t *recv_bytes) {
    const dg_tensor *ti = dg_Tc(g, n->in[0]);
    int size = (int)n->attrs.i[DG_COLL_GROUP_SIZE];
    int sd = (int)n->attrs.i[DG_COLL_SPLIT_DIM], cd = (int)n->attrs.i[DG_COLL_CONCAT_DIM];
    int64_t so, si, co, ci;
    around(ti, sd, &so, &si);
    dg_tensor ch = *ti;
    ch.shape[sd] /= size > 0 ? size : 1;
    around(&ch, cd, &co, &ci);
    size_t bytes = align256(dg_tensor_bytes(ti));
    *send_bytes = so != 1 ? bytes : 0;
    *recv_bytes = co != 1 ? bytes : 0;
}

static int run_all_to_all(const lower *L, const dg_graph *g, const dg_node *n, void *const *in,
                          void *const *out, void *scratch, dg_err *err) {
    const dg_tensor *ti = dg_Tc(g, n->in[0]);
    int size = L->c->size;
    size_t es = dg_dtype_size(ti->dtype), sbytes, rbytes;
    int sd = (int)n->attrs.i[DG_COLL_SPLIT_DIM], cd = (int)n->attrs.i[DG_COLL_CONCAT_DIM];
    int64_t total = dg_tensor_numel(ti), chunk = total / size, so, si, co, ci;
    around(ti, sd, &so, &si);
    dg_tensor ch = *ti; /* the chunk: the input with shape[sd] / size */
    ch.shape[sd] /= size;
    around(&ch, cd, &co, &ci);
    a2a_scratch(g, n, &sbytes, &rbytes);
    const void *sbuf = in[0];
    void *rbuf = co == 1 ? out[0] : (char *)scratch + sbytes;
    if (so != 1) {
        DG_TRY(to_rank_major(L, in[0], scratch, so, size, (size_t)(chunk / so) * es, err));
        sbuf = scratch;
    }
    int64_t *cnt = dg_malloc(sizeof(int64_t) * 2 * (size_t)size), *dsp = cnt + size;
    for (int r = 0; r < size; r++) cnt[r] = chunk, dsp[r] = r * chunk;
    int st = flat_all_to_allv(L, sbuf, cnt, dsp, rbuf, cnt, dsp, ti->dtype, err);
    dg_free(cnt);
    DG_TRY(st);
    if (co == 1) return DG_OK;
    return from_rank_major(L, rbuf, out[0], co, size, (size_t)(chunk / co) * es, err);
}

/* all_to_all_v: the counts are device tensors (in[1], in[2]); the layout is
 * decided on the host, so they come down first and the stream is waited for. */
static int run_all_to_all_v(const lower *L, const dg_graph *g, const dg_node *n, void *const *in,
                            void *const *out, int32_t *counts, int64_t n_counts, dg_err *err) {
    int size = L->c->size;
    int64_t nc = dg_tensor_numel(dg_Tc(g, n->in[1]));
    if (2 * nc > n_counts)
        return dg_err_set(err, DG_EINTERNAL, "the pinned counts buffer holds %lld, %lld needed: prepare() "
                                             "was not called for this graph",
                          (long long)n_counts, (long long)(2 * nc));
    DG_CUDA_TRY(cudaMemcpyAsync(counts, in[1], (size_t)nc * sizeof(int32_t), cudaMemcpyDeviceToHost, L->s));
    DG_CUDA_TRY(cudaMemcpyAsync(counts + nc, in[2], (size_t)nc * sizeof(int32_t), cudaMemcpyDeviceToHost, L->s));
    DG_CUDA_TRY(cudaStreamSynchronize(L->s));
    const dg_tensor *y = dg_Tc(g, n->out[0]);
    int64_t *v = dg_malloc(sizeof(int64_t) * 4 * (size_t)size), got = 0;
    int64_t *sc = v, *sd = v + size, *rc = v + 2 * size, *rd = v + 3 * size;
    int st = dg_all_to_all_v_layout(g, n, size, counts, counts + nc, sc, sd, rc, rd, &got, err);
    if (st == DG_OK) st = flat_all_to_allv(L, in[0], sc, sd, out[0], rc, rd, y->dtype, err);
    dg_free(v);
    DG_TRY(st);
    /* rows past what arrived are zeroed: the op writes every output byte */
    size_t es = dg_dtype_size(y->dtype), tail = (size_t)(dg_tensor_numel(y) - got) * es;
    if (tail > 0) DG_CUDA_TRY(cudaMemsetAsync((char *)out[0] + (size_t)got * es, 0, tail, L->s));
    return DG_OK;
}

static int run_kind(const lower *L, const dg_graph *g, const dg_node *n, void *const *in,
                    void *const *out, void *scratch, int32_t *counts, int64_t n_counts, dg_err *err) {
    const dg_tensor *ti = n->n_in > 0 ? dg_Tc(g, n->in[0]) : NULL;
    const dg_tensor *to = n->n_out > 0 ? dg_Tc(g, n->out[0]) : NULL;
    int size = L->c->size, rank = L->c->rank;
    switch (n->op->comm) {
    case DG_COMM_COPY_TO_GROUP:
        return d2d(L, out[0], in[0], dg_tensor_bytes(ti), err);
    case DG_COMM_SCATTER_TO_GROUP: { /* this rank's slice of each [.., dim, ..] row */
        int64_t outer, inner;
        around(to, (int)n->attrs.i[DG_COLL_DIM], &outer, &inner);
        size_t row = (size_t)(dg_tensor_numel(to) / DG_MAX(outer, 1)) * dg_dtype_size(to->dtype);
        if (row == 0 || outer == 0) return DG_OK;
        DG_CUDA_TRY(cudaMemcpy2DAsync(out[0], row, (const char *)in[0] + (size_t)rank * row,
                                      (size_t)size * row, row, (size_t)outer, cudaMemcpyDeviceToDevice,
                                      L->s));
        return DG_OK;
    }
    case DG_COMM_ALL_REDUCE:
        return flat_collective(L, 0, in[0], out[0], dg_tensor_numel(ti), ti->dtype, err);
    case DG_COMM_ALL_GATHER:
        return run_all_gather(L, g, n, in, out, scratch, err);
    case DG_COMM_REDUCE_SCATTER:
        return run_reduce_scatter(L, g, n, in, out, scratch, err);
    case DG_COMM_ALL_TO_ALL:
        if (n->op == &dg_op_all_to_all_v) return run_all_to_all_v(L, g, n, in, out, counts, n_counts, err);
        return run_all_to_all(L, g, n, in, out, scratch, err);
    case DG_COMM_SEND:
    case DG_COMM_RECV: {
        int peer = (int)(((rank + n->attrs.i[DG_COLL_PEER]) % size + size) % size);
        if (n->op->comm == DG_COMM_SEND)
            return flat_p2p(L, 1, in[0], dg_tensor_numel(ti), ti->dtype, peer, err);
        return flat_p2p(L, 0, out[0], dg_tensor_numel(to), to->dtype, peer, err);
    }
    default:
        return dg_err_set(err, DG_EINTERNAL, "op %s is not a collective", n->op->name);
    }
}

/* ---- entry points ----------------------------------------------------------------- */

size_t dg_cuda_comm_scratch(const dg_graph *g, const dg_node *n) {
    const dg_op_def *op = n->op;
    if (op == &dg_op_all_to_all_v) return 0;
    if (op->comm == DG_COMM_ALL_TO_ALL) {
        size_t sb, rb;
        a2a_scratch(g, n, &sb, &rb);
        return sb + rb;
    }
    if (op->comm == DG_COMM_ALL_GATHER || op->comm == DG_COMM_REDUCE_SCATTER) {
        const dg_tensor *ti = dg_Tc(g, n->in[0]);
        int64_t outer, inner;
        around(ti, (int)n->attrs.i[DG_COLL_DIM], &outer, &inner);
        if (outer == 1) return 0;
        /* gather: the output (size blocks); reduce-scatter: the input */
        const dg_tensor *big = op->comm == DG_COMM_ALL_GATHER ? dg_Tc(g, n->out[0]) : ti;
        return align256(dg_tensor_bytes(big));
    }
    return 0;
}

int64_t dg_cuda_comm_host_counts(const dg_graph *g, const dg_node *n) {
    if (n->op != &dg_op_all_to_all_v) return 0;
    return 2 * dg_tensor_numel(dg_Tc(g, n->in[1]));
}

int dg_cuda_comm_run_node(dg_comm *c, cudaStream_t s, void *scratch, size_t scratch_bytes,
                          int32_t *counts, int64_t n_counts, const dg_graph *g, const dg_node *n,
                          void *const *in, void *const *out, dg_err *err) {
    const dg_op_def *op = n->op;
    lower L = {c, s, dg_comm_is_nccl(c)};
    int gs = (int)n->attrs.i[DG_COLL_GROUP_SIZE], st;
    if (gs != c->size)
        return dg_err_set(err, DG_EINPUT, "node %d '%s' (op %s): group size %d but the %s group has %d rank(s)",
                          n->id, n->name, op->name, gs, dg_axis_name(n->group), c->size);
    if (!L.nccl && c->size != 1)
        return dg_err_set(err, DG_EINPUT,
                          "node %d '%s' (op %s): the CUDA device runs collectives over NCCL, but the %s "
                          "group's comm is '%s' (%d ranks, host buffers)",
                          n->id, n->name, op->name, dg_axis_name(n->group), c->ops->name, c->size);
    size_t need = dg_cuda_comm_scratch(g, n);
    if (need > scratch_bytes)
        return dg_err_set(err, DG_EINTERNAL, "node %d '%s' (op %s): needs %zu bytes of scratch, the stream "
                                             "has %zu: prepare() was not called for this graph",
                          n->id, n->name, op->name, need, scratch_bytes);
    void *prev = L.nccl ? dg_comm_nccl_bind_stream(c, s) : NULL;
    st = run_kind(&L, g, n, in, out, scratch, counts, n_counts, err);
    if (L.nccl) dg_comm_nccl_bind_stream(c, prev);
    if (st != DG_OK && err && strncmp(err->msg, "node ", 5) != 0) {
        dg_err e2 = *err;
        dg_err_set(err, st, "node %d '%s' (op %s): %s", n->id, n->name, op->name, e2.msg);
    }
    return st;
}
