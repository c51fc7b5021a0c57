/* dg_comm_mpi.c — the comm interface over non-blocking MPI (see dg_comm_mpi.h). */
#include "dg_comm_mpi.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>

#include "dg_cpu_half.h"

/* Every request: the MPI request, plus (all_to_allv) the int count and
 * displacement arrays, which must outlive the call; wait() frees both. */
typedef struct mpi_req {
    MPI_Request r;
    int *ints;
} mpi_req;

typedef struct mpi_impl {
    MPI_Comm comm;
    MPI_Op sum16[2]; /* sums of bf16 [0] and fp16 [1] values: MPI has no 16-bit float type */
} mpi_impl;

/* The runtime runs the comm streams of different groups on threads of
 * their own (dg_sched.h), so two threads may call MPI at once. Callers that
 * asked for no more than MPI_THREAD_SERIALIZED (the rank grid's minimum)
 * must not let them: every call into MPI here is made under this lock. It
 * is held for one non-blocking start or one MPI_Test, never across a wait,
 * so a stream waiting on its peers never holds up another's progress. */
static pthread_mutex_t mpi_mu = PTHREAD_MUTEX_INITIALIZER;
static void mpi_lock(void) { DG_CHECK0(pthread_mutex_lock(&mpi_mu)); }
static void mpi_unlock(void) { DG_CHECK0(pthread_mutex_unlock(&mpi_mu)); }

static MPI_Comm comm_of(dg_comm *c) { return ((mpi_impl *)c->impl)->comm; }

static int mpi_type(dg_dtype dt, MPI_Datatype *t, dg_err *err) {
    switch (dt) {
    case DG_F32: *t = MPI_FLOAT; return DG_OK;
    case DG_I32: *t = MPI_INT32_T; return DG_OK;
    case DG_I64: *t = MPI_INT64_T; return DG_OK;
    case DG_U8: *t = MPI_UINT8_T; return DG_OK;
    case DG_F64: *t = MPI_DOUBLE; return DG_OK;
    case DG_BF16:
    case DG_F16: *t = MPI_UINT16_T; return DG_OK; /* moved as bits; summed by sum_op */
    default:
        return dg_err_set(err, DG_EINTERNAL, "comm mpi: no MPI type for %s", dg_dtype_name(dt));
    }
}

/* A 16-bit sum: each pair added in f32 and rounded, as NCCL's reductions
 * of bf16/fp16 buffers do. */
static void sum_bf16(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++) b[i] = dg_bf16_bits(dg_bf16_value(a[i]) + dg_bf16_value(b[i]));
}

static void sum_fp16(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++) b[i] = dg_fp16_bits(dg_fp16_value(a[i]) + dg_fp16_value(b[i]));
}

/* The reduction that sums dtype dt on c. */
static MPI_Op sum_op(dg_comm *c, dg_dtype dt) {
    const mpi_impl *m = c->impl;
    return dt == DG_BF16 ? m->sum16[0] : dt == DG_F16 ? m->sum16[1] : MPI_SUM;
}

/* MPI counts are int: refuse what does not fit rather than truncate. */
static int fit(int64_t n, int *out, dg_err *err) {
    if (n < 0 || n > INT_MAX)
        return dg_err_set(err, DG_EINTERNAL, "comm mpi: count %lld does not fit an MPI int",
                          (long long)n);
    *out = (int)n;
    return DG_OK;
}

static int started(int rc, const char *what, dg_comm_req *req, mpi_req *r, dg_err *err) {
    if (rc != MPI_SUCCESS) {
        dg_free(r);
        req->impl = NULL;
        return dg_err_set(err, DG_EINTERNAL, "comm mpi: %s returned %d", what, rc);
    }
    req->impl = r;
    return DG_OK;
}

static int m_all_reduce(dg_comm *c, const void *send, void *recv, int64_t count, dg_dtype dt,
                        dg_comm_req *req, dg_err *err) {
    MPI_Datatype t;
    int n = 0;
    DG_TRY(mpi_type(dt, &t, err));
    DG_TRY(fit(count, &n, err));
    mpi_req *r = dg_calloc(1, sizeof *r);
    mpi_lock();
    int rc = MPI_Iallreduce(send == recv ? MPI_IN_PLACE : send, recv, n, t, sum_op(c, dt), comm_of(c), &r->r);
    mpi_unlock();
    return started(rc, "MPI_Iallreduce", req, r, err);
}

static int m_all_gather(dg_comm *c, const void *send, void *recv, int64_t count, dg_dtype dt,
                        dg_comm_req *req, dg_err *err) {
    MPI_Datatype t;
    int n = 0;
    DG_TRY(mpi_type(dt, &t, err));
    DG_TRY(fit(count * c->size, &n, err));
    n = (int)count;
    mpi_req *r = dg_calloc(1, sizeof *r);
    mpi_lock();
    int rc = MPI_Iallgather(send, n, t, recv, n, t, comm_of(c), &r->r);
    mpi_unlock();
    return started(rc, "MPI_Iallgather", req, r, err);
}

static int m_reduce_scatter(dg_comm *c, const void *send, void *recv, int64_t count, dg_dtype dt,
                            dg_comm_req *req, dg_err *err) {
    MPI_Datatype t;
    int n = 0;
    DG_TRY(mpi_type(dt, &t, err));
    DG_TRY(fit(count * c->size, &n, err));
    n = (int)count;
    mpi_req *r = dg_calloc(1, sizeof *r);
    mpi_lock();
    int rc = MPI_Ireduce_scatter_block(send, recv, n, t, sum_op(c, dt), comm_of(c), &r->r);
    mpi_unlock();
    return started(rc, "MPI_Ireduce_scatter_block", req, r, err);
}

static int m_all_to_allv(dg_comm *c, const void *send, const int64_t *sc, const int64_t *sd,
                         void *recv, const int64_t *rc, const int64_t *rd, dg_dtype dt,
                         dg_comm_req *req, dg_err *err) {
    MPI_Datatype t;
    DG_TRY(mpi_type(dt, &t, err));
    int p = c->size;
    int *v = dg_malloc(sizeof(int) * 4 * (size_t)p);
    for (int i = 0; i < p; i++) {
        int st = DG_OK;
        if (st == DG_OK) st = fit(sc[i], &v[i], err);
        if (st == DG_OK) st = fit(sd[i], &v[p + i], err);
        if (st == DG_OK) st = fit(rc[i], &v[2 * p + i], err);
        if (st == DG_OK) st = fit(rd[i], &v[3 * p + i], err);
        if (st != DG_OK) {
            dg_free(v);
            return st;
        }
    }
    mpi_req *a = dg_malloc(sizeof *a);
    a->ints = v;
    mpi_lock();
    int rc_ = MPI_Ialltoallv(send, v, v + p, t, recv, v + 2 * p, v + 3 * p, t, comm_of(c), &a->r);
    mpi_unlock();
    if (rc_ != MPI_SUCCESS) {
        dg_free(v);
        dg_free(a);
        req->impl = NULL;
        return dg_err_set(err, DG_EINTERNAL, "comm mpi: MPI_Ialltoallv returned %d", rc_);
    }
    req->impl = a;
    return DG_OK;
}

static int m_p2p(dg_comm *c, void *buf, int64_t count, dg_dtype dt, int peer, int tag, int is_send,
                 dg_comm_req *req, dg_err *err) {
    MPI_Datatype t;
    int n = 0;
    DG_TRY(mpi_type(dt, &t, err));
    DG_TRY(fit(count, &n, err));
    mpi_req *a = dg_malloc(sizeof *a);
    a->ints = NULL;
    mpi_lock();
    int rc = is_send ? MPI_Isend(buf, n, t, peer, tag, comm_of(c), &a->r)
                     : MPI_Irecv(buf, n, t, peer, tag, comm_of(c), &a->r);
    mpi_unlock();
    if (rc != MPI_SUCCESS) {
        dg_free(a);
        req->impl = NULL;
        return dg_err_set(err, DG_EINTERNAL, "comm mpi: %s returned %d", is_send ? "MPI_Isend" : "MPI_Irecv", rc);
    }
    req->impl = a;
    return DG_OK;
}

static int m_send(dg_comm *c, const void *buf, int64_t count, dg_dtype dt, int peer, int tag,
                  dg_comm_req *req, dg_err *err) {
    return m_p2p(c, (void *)buf, count, dt, peer, tag, 1, req, err);
}

static int m_recv(dg_comm *c, void *buf, int64_t count, dg_dtype dt, int peer, int tag,
                  dg_comm_req *req, dg_err *err) {
    return m_p2p(c, buf, count, dt, peer, tag, 0, req, err);
}

static int m_wait(dg_comm *c, dg_comm_req *req, dg_err *err) {
    (void)c;
    if (!req->impl) return DG_OK;
    mpi_req *a = req->impl;
    /* Poll and yield instead of MPI_Wait: Open MPI's wait busy-spins, and on
     * a machine with as many ranks as cores the comm thread shares a core
     * with compute workers; sched_yield hands the core over whenever a
     * worker is runnable and costs nothing when none is. */
    int done = 0, rc = MPI_SUCCESS;
    while (rc == MPI_SUCCESS) {
        mpi_lock();
        rc = MPI_Test(&a->r, &done, MPI_STATUS_IGNORE);
        mpi_unlock();
        if (done) break;
        sched_yield();
    }
    dg_free(a->ints);
    dg_free(a);
    req->impl = NULL;
    return rc == MPI_SUCCESS ? DG_OK : dg_err_set(err, DG_EINTERNAL, "comm mpi: MPI_Wait returned %d", rc);
}

static int m_test(dg_comm *c, dg_comm_req *req, int *done, dg_err *err) {
    (void)c;
    if (!req->impl) {
        *done = 1;
        return DG_OK;
    }
    mpi_req *a = req->impl;
    mpi_lock();
    int rc = MPI_Test(&a->r, done, MPI_STATUS_IGNORE);
    mpi_unlock();
    if (rc != MPI_SUCCESS) return dg_err_set(err, DG_EINTERNAL, "comm mpi: MPI_Test returned %d", rc);
    if (*done) {
        dg_free(a->ints);
        dg_free(a);
        req->impl = NULL;
    }
    return DG_OK;
}

static int m_barrier(dg_comm *c, dg_err *err) {
    int rc = MPI_Barrier(comm_of(c));
    return rc == MPI_SUCCESS ? DG_OK : dg_err_set(err, DG_EINTERNAL, "comm mpi: MPI_Barrier returned %d", rc);
}

static int m_split(dg_comm *c, int color, int key, dg_comm **out, dg_err *err) {
    MPI_Comm sub;
    int rc = MPI_Comm_split(comm_of(c), color, key, &sub);
    if (rc != MPI_SUCCESS) return dg_err_set(err, DG_EINTERNAL, "comm mpi: MPI_Comm_split returned %d", rc);
    *out = dg_comm_mpi_new(sub, err);
    MPI_Comm_free(&sub);
    return *out ? DG_OK : DG_EINTERNAL;
}

static void m_free(dg_comm *c) {
    mpi_impl *m = c->impl;
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) {
        MPI_Comm_free(&m->comm);
        MPI_Op_free(&m->sum16[0]);
        MPI_Op_free(&m->sum16[1]);
    }
    dg_free(m);
    dg_free(c);
}

static const dg_comm_ops mpi_ops = {
    .name = "mpi",
    .all_reduce = m_all_reduce,
    .all_gather = m_all_gather,
    .reduce_scatter = m_reduce_scatter,
    .all_to_allv = m_all_to_allv,
    .send = m_send,
    .recv = m_recv,
    .wait = m_wait,
    .test = m_test,
    .barrier = m_barrier,
    .split = m_split,
    .free = m_free,
};

dg_comm *dg_comm_mpi_new(MPI_Comm comm, dg_err *err) {
    int init = 0;
    MPI_Initialized(&init);
    if (!init) {
        dg_err_set(err, DG_EINTERNAL, "comm mpi: MPI is not initialised");
        return NULL;
    }
    dg_comm *c = dg_calloc(1, sizeof *c);
    mpi_impl *m = dg_calloc(1, sizeof *m);
    MPI_Comm_dup(comm, &m->comm);
    MPI_Op_create(sum_bf16, 1, &m->sum16[0]);
    MPI_Op_create(sum_fp16, 1, &m->sum16[1]);
    MPI_Comm_rank(m->comm, &c->rank);
    MPI_Comm_size(m->comm, &c->size);
    c->ops = &mpi_ops;
    c->impl = m;
    return c;
}

MPI_Comm dg_comm_mpi_handle(const dg_comm *c) {
    return c && c->ops == &mpi_ops ? ((const mpi_impl *)c->impl)->comm : MPI_COMM_NULL;
}
