/* dg_comm.c — the "self" backend and the lowering of collective nodes onto
 * the flat comm calls (see dg_comm.h). */
#include "dg_comm.h"

#include <string.h>

#include "dg_collective.h"
#include "dg_collective_v.h"
#include "dg_op.h"

/* ---- "self": a group of one ------------------------------------------------ */

typedef struct self_msg {
    struct self_msg *next;
    int tag;
    size_t bytes;
    unsigned char data[];
} self_msg;

typedef struct self_impl {
    self_msg *head, *tail; /* FIFO of sends to self not yet received */
} self_impl;

static int self_copy(const void *send, void *recv, int64_t count, dg_dtype dt) {
    if (send != recv && count > 0) memmove(recv, send, (size_t)count * dg_dtype_size(dt));
    return DG_OK;
}

static int self_all_reduce(dg_comm *c, const void *send, void *recv, int64_t count, dg_dtype dt,
                           dg_comm_req *req, dg_err *err) {
    (void)c, (void)err;
    req->impl = NULL;
    return self_copy(send, recv, count, dt);
}

static int self_all_to_allv(dg_comm *c, const void *send, const int64_t *sc, const int64_t *sd,
                            void *recv, const int64_t *rc, const int64_t *rd, dg_dtype dt,
                            dg_comm_req *req, dg_err *err) {
    (void)c;
    req->impl = NULL;
    if (sc[0] != rc[0])
        return dg_err_set(err, DG_EINTERNAL, "comm self: all_to_allv sends %lld but receives %lld",
                          (long long)sc[0], (long long)rc[0]);
    size_t es = dg_dtype_size(dt);
    memmove((char *)recv + rd[0] * es, (const char *)send + sd[0] * es, (size_t)sc[0] * es);
    return DG_OK;
}

static int self_send(dg_comm *c, const void *buf, int64_t count, dg_dtype dt, int peer, int tag,
                     dg_comm_req *req, dg_err *err) {
    (void)peer, (void)err;
    self_impl *s = c->impl;
    size_t bytes = (size_t)count * dg_dtype_size(dt);
    self_msg *m = dg_malloc(sizeof *m + bytes);
    m->next = NULL;
    m->tag = tag;
    m->bytes = bytes;
    memcpy(m->data, buf, bytes);
    if (s->tail) s->tail->next = m;
    else s->head = m;
    s->tail = m;
    req->impl = NULL;
    return DG_OK;
}

static int self_recv(dg_comm *c, void *buf, int64_t count, dg_dtype dt, int peer, int tag,
                     dg_comm_req *req, dg_err *err) {
    (void)peer;
    self_impl *s = c->impl;
    size_t bytes = (size_t)count * dg_dtype_size(dt);
    req->impl = NULL;
    for (self_msg **pp = &s->head, *prev = NULL; *pp; prev = *pp, pp = &(*pp)->next) {
        self_msg *m = *pp;
        if (m->tag != tag) continue;
        if (m->bytes != bytes)
            return dg_err_set(err, DG_EINTERNAL, "comm self: recv of %zu bytes matched a send of %zu",
                              bytes, m->bytes);
        memcpy(buf, m->data, bytes);
        *pp = m->next;
        if (s->tail == m) s->tail = prev;
        dg_free(m);
        return DG_OK;
    }
    return dg_err_set(err, DG_EINTERNAL, "comm self: recv (tag %d) with no matching send", tag);
}

static int self_wait(dg_comm *c, dg_comm_req *req, dg_err *err) {
    (void)c, (void)req, (void)err;
    return DG_OK;
}

static int self_test(dg_comm *c, dg_comm_req *req, int *done, dg_err *err) {
    (void)c, (void)req, (void)err;
    *done = 1;
    return DG_OK;
}

static int self_barrier(dg_comm *c, dg_err *err) {
    (void)c, (void)err;
    return DG_OK;
}

static int self_split(dg_comm *c, int color, int key, dg_comm **out, dg_err *err) {
    (void)c, (void)color, (void)key, (void)err;
    *out = dg_comm_self_new();
    return DG_OK;
}

static void self_free(dg_comm *c) {
    self_impl *s = c->impl;
    while (s->head) {
        self_msg *m = s->head;
        s->head = m->next;
        dg_free(m);
    }
    dg_free(s);
    dg_free(c);
}

static const dg_comm_ops self_ops = {
    .name = "self",
    .all_reduce = self_all_reduce,
    .all_gather = self_all_reduce,     /* a group of one: all three are copies */
    .reduce_scatter = self_all_reduce,
    .all_to_allv = self_all_to_allv,
    .send = self_send,
    .recv = self_recv,
    .wait = self_wait,
    .test = self_test,
    .barrier = self_barrier,
    .split = self_split,
    .free = self_free,
};

dg_comm *dg_comm_self_new(void) {
    dg_comm *c = dg_calloc(1, sizeof *c);
    c->ops = &self_ops;
    c->rank = 0;
    c->size = 1;
    c->impl = dg_calloc(1, sizeof(self_impl));
    return c;
}

/* ---- pending sends ------------------------------------------------------------ */

typedef struct pending_send {
    dg_comm_req req;
    void *staging;
} pending_send;

struct dg_comm_pending {
    pending_send *v;
    int n, cap;
};

static void pending_push(dg_comm *c, dg_comm_req req, void *staging) {
    if (!c->pending) c->pending = dg_calloc(1, sizeof *c->pending);
    struct dg_comm_pending *q = c->pending;
    if (q->n == q->cap) {
        q->cap = q->cap ? 2 * q->cap : 8;
        q->v = dg_realloc(q->v, sizeof *q->v * (size_t)q->cap);
    }
    q->v[q->n++] = (pending_send){req, staging};
}

/* Free the sends that have finished (test), or all of them (wait). */
static int pending_reap(dg_comm *c, int wait, dg_err *err) {
    struct dg_comm_pending *q = c->pending;
    if (!q) return DG_OK;
    int k = 0, st = DG_OK;
    for (int i = 0; i < q->n; i++) {
        int done = 0;
        if (st == DG_OK) {
            if (wait) {
                st = c->ops->wait(c, &q->v[i].req, err);
                done = st == DG_OK;
            } else {
                st = c->ops->test(c, &q->v[i].req, &done, err);
            }
        }
        if (done) dg_free(q->v[i].staging);
        else q->v[k++] = q->v[i];
    }
    q->n = k;
    return st;
}

int dg_comm_flush(dg_comm *c, dg_err *err) { return pending_reap(c, 1, err); }

void dg_comm_free(dg_comm *c) {
    if (!c) return;
    if (c->pending) { /* unfinished sends are abandoned with their buffers */
        for (int i = 0; i < c->pending->n; i++) dg_free(c->pending->v[i].staging);
        dg_free(c->pending->v);
        dg_free(c->pending);
    }
    c->ops->free(c);
}

/* ---- lowering a node onto the flat calls ------------------------------------ */

/* View a tensor as [outer, dim, inner] around dimension d. */
static void around(const dg_tensor *t, int d, int64_t *outer, int64_t *inner) {
    *outer = *inner = 1;
    for (int i = 0; i < d; i++) *outer *= t->shape[i];
    for (int i = d + 1; i < t->ndim; i++) *inner *= t->shape[i];
}

/* [outer, size, m*inner] -> [size, outer, m*inner] (rows of `row` bytes). */
static void to_rank_major(const char *src, char *dst, int64_t outer, int size, size_t row) {
    for (int64_t o = 0; o < outer; o++)
        for (int r = 0; r < size; r++)
            memcpy(dst + ((size_t)r * (size_t)outer + (size_t)o) * row,
                   src + ((size_t)o * (size_t)size + (size_t)r) * row, row);
}

/* [size, outer, m*inner] -> [outer, size, m*inner]. */
static void from_rank_major(const char *src, char *dst, int64_t outer, int size, size_t row) {
    for (int64_t o = 0; o < outer; o++)
        for (int r = 0; r < size; r++)
            memcpy(dst + ((size_t)o * (size_t)size + (size_t)r) * row,
                   src + ((size_t)r * (size_t)outer + (size_t)o) * row, row);
}

/* Tag for point-to-point messages: sender and receiver nodes differ, so the
 * tag comes from what they share, the microbatch and the phase. (Issue 7
 * may replace this with an explicit tag attribute.) */
static int p2p_tag(const dg_node *n) {
    int mb = n->microbatch < 0 ? 0 : n->microbatch + 1;
    int ph = n->phase == DG_PHASE_BACKWARD ? 1 : 0;
    /* A pipeline boundary's send/recv carry a slot (attrs.i[8], the PP
     * pass's DG_COLL_TAG) naming the tensor, so several tensors crossing
     * the same boundary in the same micro-batch and direction stay apart. */
    int64_t slot = n->attrs.i[8];
    if (slot > 0) return (int)(((slot << 12) | ((mb * 2 + ph) & 0xfff)) & 0x7fffffff);
    return (mb * 2 + ph) & 0x7fff;
}

/* all_to_all_v (dg_collective_v.h): the counts come from the node's i32
 * inputs; rows past what arrives are zeroed, so the output is fully written. */
static int run_all_to_all_v(dg_comm *c, const dg_graph *g, const dg_node *n, void *const *in,
                            void *const *out, dg_err *err) {
    int64_t *v = dg_malloc(sizeof(int64_t) * 4 * (size_t)c->size), got = 0;
    int64_t *sc = v, *sd = v + c->size, *rc = v + 2 * c->size, *rd = v + 3 * c->size;
    const dg_tensor *y = dg_Tc(g, n->out[0]);
    dg_comm_req req = {0};
    int st = dg_all_to_all_v_layout(g, n, c->size, in[1], in[2], sc, sd, rc, rd, &got, err);
    if (st == DG_OK)
        st = c->ops->all_to_allv(c, in[0], sc, sd, out[0], rc, rd, y->dtype, &req, err);
    if (st == DG_OK) st = c->ops->wait(c, &req, err);
    size_t es = dg_dtype_size(y->dtype);
    if (st == DG_OK) memset((char *)out[0] + (size_t)got * es, 0, (size_t)(dg_tensor_numel(y) - got) * es);
    dg_free(v);
    return st;
}

int dg_comm_run_node(dg_comm *c, const dg_graph *g, const dg_node *n, void *const *in,
                     void *const *out, dg_err *err) {
    const dg_op_def *op = n->op;
    int size = c->size;
    DG_TRY(pending_reap(c, 0, err)); /* free the sends that have finished */
    int gs = (int)n->attrs.i[DG_COLL_GROUP_SIZE];
    if (gs != size)
        return dg_err_set(err, DG_EINPUT, "node %d '%s' (op %s): group size %d but the %s group has %d rank(s)",
                          n->id, n->name, op->name, gs, dg_axis_name(n->group), size);
    const dg_tensor *ti = n->n_in > 0 ? dg_Tc(g, n->in[0]) : NULL;
    const dg_tensor *to = n->n_out > 0 ? dg_Tc(g, n->out[0]) : NULL;
    dg_dtype dt = ti ? ti->dtype : to->dtype;
    size_t es = dg_dtype_size(dt);
    dg_comm_req req = {0};
    void *tmp = NULL, *tmp2 = NULL;
    int st = DG_OK;
    switch (op->comm) {
    case DG_COMM_COPY_TO_GROUP:
        memmove(out[0], in[0], dg_tensor_bytes(ti));
        return DG_OK;
    case DG_COMM_SCATTER_TO_GROUP: { /* this rank's slice of each [.., dim, ..] row */
        int64_t outer, inner;
        around(to, (int)n->attrs.i[DG_COLL_DIM], &outer, &inner);
        size_t row = (size_t)(dg_tensor_numel(to) / DG_MAX(outer, 1)) * es;
        for (int64_t o = 0; o < outer; o++)
            memcpy((char *)out[0] + (size_t)o * row, (const char *)in[0] + ((size_t)o * (size_t)size + (size_t)c->rank) * row,
                   row);
        return DG_OK;
    }
    case DG_COMM_ALL_REDUCE:
        st = c->ops->all_reduce(c, in[0], out[0], dg_tensor_numel(ti), dt, &req, err);
        break;
    case DG_COMM_ALL_GATHER: {
        int64_t outer, inner;
        around(ti, (int)n->attrs.i[DG_COLL_DIM], &outer, &inner);
        int64_t count = dg_tensor_numel(ti);
        void *dst = outer == 1 ? out[0] : (tmp = dg_malloc((size_t)count * (size_t)size * es));
        st = c->ops->all_gather(c, in[0], dst, count, dt, &req, err);
        if (st == DG_OK) st = c->ops->wait(c, &req, err);
        if (st == DG_OK && tmp) from_rank_major(tmp, out[0], outer, size, (size_t)(count / outer) * es);
        dg_free(tmp);
        goto done;
    }
    case DG_COMM_REDUCE_SCATTER: {
        int64_t outer, inner;
        around(ti, (int)n->attrs.i[DG_COLL_DIM], &outer, &inner);
        int64_t total = dg_tensor_numel(ti), count = total / size;
        const void *src = in[0];
        if (outer != 1) {
            tmp = dg_malloc((size_t)total * es);
            to_rank_major(in[0], tmp, outer, size, (size_t)(count / outer) * es);
            src = tmp;
        }
        st = c->ops->reduce_scatter(c, src, out[0], count, dt, &req, err);
        if (st == DG_OK) st = c->ops->wait(c, &req, err);
        dg_free(tmp);
        goto done;
    }
    case DG_COMM_ALL_TO_ALL: {
        if (op == &dg_op_all_to_all_v) {
            st = run_all_to_all_v(c, g, n, in, out, err);
            goto done;
        }
        int sd = (int)n->attrs.i[DG_COLL_SPLIT_DIM], cd = (int)n->attrs.i[DG_COLL_CONCAT_DIM];
        int64_t total = dg_tensor_numel(ti), chunk = total / size;
        int64_t so, si, co, ci;
        around(ti, sd, &so, &si);
        /* the chunk's shape is the input's with shape[sd] / size */
        dg_tensor ch = *ti;
        ch.shape[sd] /= size;
        around(&ch, cd, &co, &ci);
        const void *sbuf = in[0];
        void *rbuf = co == 1 ? out[0] : (tmp2 = dg_malloc((size_t)total * es));
        if (so != 1) {
            tmp = dg_malloc((size_t)total * es);
            to_rank_major(in[0], tmp, so, size, (size_t)(chunk / so) * es);
            sbuf = tmp;
        }
        int64_t *cnt = dg_malloc(sizeof(int64_t) * 2 * (size_t)size), *dsp = cnt + size;
        for (int r = 0; r < size; r++) cnt[r] = chunk, dsp[r] = r * chunk;
        st = c->ops->all_to_allv(c, sbuf, cnt, dsp, rbuf, cnt, dsp, dt, &req, err);
        if (st == DG_OK) st = c->ops->wait(c, &req, err);
        if (st == DG_OK && tmp2) from_rank_major(tmp2, out[0], co, size, (size_t)(chunk / co) * es);
        dg_free(cnt);
        dg_free(tmp);
        dg_free(tmp2);
        goto done;
    }
    case DG_COMM_SEND: {
        int peer = (int)(((c->rank + n->attrs.i[DG_COLL_PEER]) % size + size) % size);
        size_t bytes = dg_tensor_bytes(ti);
        void *staging = dg_malloc(bytes);
        memcpy(staging, in[0], bytes);
        st = c->ops->send(c, staging, dg_tensor_numel(ti), dt, peer, p2p_tag(n), &req, err);
        if (st == DG_OK) pending_push(c, req, staging);
        else dg_free(staging);
        goto done; /* no wait: see dg_comm.h */
    }
    case DG_COMM_RECV: {
        int peer = (int)(((c->rank + n->attrs.i[DG_COLL_PEER]) % size + size) % size);
        st = c->ops->recv(c, out[0], dg_tensor_numel(to), to->dtype, peer, p2p_tag(n), &req, err);
        break;
    }
    default:
        return dg_err_set(err, DG_EINTERNAL, "node %d '%s': op %s is not a collective", n->id,
                          n->name, op->name);
    }
    if (st == DG_OK) st = c->ops->wait(c, &req, err);
done:
    if (st != DG_OK && err && !strstr(err->msg, "node ")) {
        dg_err e2 = *err;
        dg_err_set(err, st, "node %d '%s' (op %s): %s", n->id, n->name, op->name, e2.msg);
    }
    return st;
}
