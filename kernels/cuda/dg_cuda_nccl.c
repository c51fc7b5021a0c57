/* dg_cuda_nccl.c — the comm interface over NCCL (see dg_cuda_nccl.h). */
#include "dg_cuda_nccl.h"

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include "dg_cuda_check.h"

typedef struct nccl_impl {
    ncclComm_t comm;
    cudaStream_t own;   /* the backend's stream */
    cudaStream_t bound; /* a caller's stream (dg_comm_nccl_bind_stream), NULL: none */
    int broken; /* 1 after an abort: every later call fails at once */
} nccl_impl;

static nccl_impl *impl_of(dg_comm *c) { return c->impl; }

/* Where operations are enqueued: the bound stream if any, else our own. */
static cudaStream_t stream_of(dg_comm *c) {
    nccl_impl *im = impl_of(c);
    return im->bound ? im->bound : im->own;
}

/* Abort the communicator after a failure, so peers blocked in a collective
 * with this rank return with an error instead of hanging. */
static int fail(dg_comm *c, const char *what, ncclResult_t r, dg_err *err) {
    nccl_impl *im = impl_of(c);
    if (!im->broken) {
        ncclCommAbort(im->comm);
        im->broken = 1;
    }
    return dg_err_set(err, DG_EINTERNAL, "comm nccl: %s: %s (communicator aborted)", what,
                      ncclGetErrorString(r));
}

#define NCCL_OR_ABORT(c, call)                                                           \
    do {                                                                                 \
        ncclResult_t r_ = (call);                                                        \
        if (r_ != ncclSuccess) return fail((c), #call, r_, err);                         \
    } while (0)

static int nccl_type(dg_dtype dt, ncclDataType_t *t, dg_err *err) {
    switch (dt) {
    case DG_F32: *t = ncclFloat32; return DG_OK;
    case DG_BF16: *t = ncclBfloat16; return DG_OK;
    case DG_F16: *t = ncclFloat16; return DG_OK;
    case DG_I32: *t = ncclInt32; return DG_OK;
    case DG_I64: *t = ncclInt64; return DG_OK;
    case DG_U8: *t = ncclUint8; return DG_OK;
    default:
        return dg_err_set(err, DG_EINTERNAL, "comm nccl: no NCCL type for %s", dg_dtype_name(dt));
    }
}

static int usable(dg_comm *c, dg_err *err) {
    if (impl_of(c)->broken)
        return dg_err_set(err, DG_EINTERNAL, "comm nccl: the communicator was aborted after an error");
    return DG_OK;
}

/* The operation was enqueued: record an event the request waits on (none
 * on a bound stream, whose order is the caller's to keep). */
static int enqueued(dg_comm *c, dg_comm_req *req, dg_err *err) {
    req->impl = NULL;
    if (impl_of(c)->bound) return DG_OK;
    cudaEvent_t ev;
    DG_CUDA_TRY(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    cudaError_t ce = cudaEventRecord(ev, impl_of(c)->own);
    if (ce != cudaSuccess) {
        cudaEventDestroy(ev);
        return dg_err_set(err, DG_EINTERNAL, "CUDA: cudaEventRecord failed at %s:%d: %s", __FILE__,
                          __LINE__, cudaGetErrorString(ce));
    }
    req->impl = ev;
    return DG_OK;
}

static int n_all_reduce(dg_comm *c, const void *send, void *recv, int64_t count, dg_dtype dt,
                        dg_comm_req *req, dg_err *err) {
    ncclDataType_t t;
    DG_TRY(usable(c, err));
    DG_TRY(nccl_type(dt, &t, err));
    NCCL_OR_ABORT(c, ncclAllReduce(send, recv, (size_t)count, t, ncclSum, impl_of(c)->comm,
                                   stream_of(c)));
    return enqueued(c, req, err);
}

static int n_all_gather(dg_comm *c, const void *send, void *recv, int64_t count, dg_dtype dt,
                        dg_comm_req *req, dg_err *err) {
    ncclDataType_t t;
    DG_TRY(usable(c, err));
    DG_TRY(nccl_type(dt, &t, err));
    NCCL_OR_ABORT(c, ncclAllGather(send, recv, (size_t)count, t, impl_of(c)->comm, stream_of(c)));
    return enqueued(c, req, err);
}

static int n_reduce_scatter(dg_comm *c, const void *send, void *recv, int64_t count, dg_dtype dt,
                            dg_comm_req *req, dg_err *err) {
    ncclDataType_t t;
    DG_TRY(usable(c, err));
    DG_TRY(nccl_type(dt, &t, err));
    NCCL_OR_ABORT(c, ncclReduceScatter(send, recv, (size_t)count, t, ncclSum, impl_of(c)->comm,
                                       stream_of(c)));
    return enqueued(c, req, err);
}

/* One send and one receive per peer inside a group: NCCL's all-to-all(v). */
static int n_all_to_allv(dg_comm *c, const void *send, const int64_t *sc, const int64_t *sd,
                         void *recv, const int64_t *rc, const int64_t *rd, dg_dtype dt,
                         dg_comm_req *req, dg_err *err) {
    ncclDataType_t t;
    DG_TRY(usable(c, err));
    DG_TRY(nccl_type(dt, &t, err));
    size_t es = dg_dtype_size(dt);
    nccl_impl *im = impl_of(c);
    cudaStream_t st = stream_of(c);
    NCCL_OR_ABORT(c, ncclGroupStart());
    for (int p = 0; p < c->size; p++) {
        if (sc[p] > 0)
            NCCL_OR_ABORT(c, ncclSend((const char *)send + sd[p] * es, (size_t)sc[p], t, p, im->comm, st));
        if (rc[p] > 0)
            NCCL_OR_ABORT(c, ncclRecv((char *)recv + rd[p] * es, (size_t)rc[p], t, p, im->comm, st));
    }
    NCCL_OR_ABORT(c, ncclGroupEnd());
    return enqueued(c, req, err);
}

/* NCCL has no tags: messages between two ranks match in issue order, which
 * the comm stream's in-order issue already guarantees. */
static int n_send(dg_comm *c, const void *buf, int64_t count, dg_dtype dt, int peer, int tag,
                  dg_comm_req *req, dg_err *err) {
    (void)tag;
    ncclDataType_t t;
    DG_TRY(usable(c, err));
    DG_TRY(nccl_type(dt, &t, err));
    NCCL_OR_ABORT(c, ncclSend(buf, (size_t)count, t, peer, impl_of(c)->comm, stream_of(c)));
    return enqueued(c, req, err);
}

static int n_recv(dg_comm *c, void *buf, int64_t count, dg_dtype dt, int peer, int tag,
                  dg_comm_req *req, dg_err *err) {
    (void)tag;
    ncclDataType_t t;
    DG_TRY(usable(c, err));
    DG_TRY(nccl_type(dt, &t, err));
    NCCL_OR_ABORT(c, ncclRecv(buf, (size_t)count, t, peer, impl_of(c)->comm, stream_of(c)));
    return enqueued(c, req, err);
}

/* Poll the request's event; while it is pending, look for an asynchronous
 * NCCL error (a peer died, a network failure) and abort on one. */
static int n_test(dg_comm *c, dg_comm_req *req, int *done, dg_err *err) {
    *done = 1;
    if (!req->impl) return DG_OK;
    cudaError_t q = cudaEventQuery((cudaEvent_t)req->impl);
    if (q == cudaErrorNotReady) {
        *done = 0;
        ncclResult_t async = ncclSuccess;
        NCCL_OR_ABORT(c, ncclCommGetAsyncError(impl_of(c)->comm, &async));
        if (async != ncclSuccess) return fail(c, "asynchronous error", async, err);
        return DG_OK;
    }
    cudaEventDestroy((cudaEvent_t)req->impl);
    req->impl = NULL;
    if (q != cudaSuccess)
        return dg_err_set(err, DG_EINTERNAL, "comm nccl: %s", cudaGetErrorString(q));
    return DG_OK;
}

static int n_wait(dg_comm *c, dg_comm_req *req, dg_err *err) {
    int done = 0;
    while (1) {
        DG_TRY(n_test(c, req, &done, err));
        if (done) return DG_OK;
    }
}

static int n_barrier(dg_comm *c, dg_err *err) {
    /* an all-reduce of one float is NCCL's barrier */
    float *d = NULL;
    DG_CUDA_TRY(cudaMalloc((void **)&d, sizeof(float)));
    dg_comm_req r = {0};
    int st = n_all_reduce(c, d, d, 1, DG_F32, &r, err);
    if (st == DG_OK) st = n_wait(c, &r, err);
    /* on a bound stream the request finishes at once: wait for the stream */
    if (st == DG_OK && impl_of(c)->bound) {
        cudaError_t ce = cudaStreamSynchronize(impl_of(c)->bound);
        if (ce != cudaSuccess)
            st = dg_err_set(err, DG_EINTERNAL, "comm nccl: barrier: cudaStreamSynchronize: %s",
                            cudaGetErrorString(ce));
    }
    cudaFree(d);
    return st;
}

static int n_split(dg_comm *c, int color, int key, dg_comm **out, dg_err *err) {
    (void)c; (void)color; (void)key;
    *out = NULL;
    return dg_err_set(err, DG_EINTERNAL,
                      "comm nccl: split is not supported: split the MPI group and make a NCCL comm from it");
}

static void n_free(dg_comm *c) {
    nccl_impl *im = impl_of(c);
    if (!im->broken) ncclCommDestroy(im->comm);
    cudaStreamDestroy(im->own);
    dg_free(im);
    dg_free(c);
}

static const dg_comm_ops nccl_ops = {
    .name = "nccl",
    .all_reduce = n_all_reduce,
    .all_gather = n_all_gather,
    .reduce_scatter = n_reduce_scatter,
    .all_to_allv = n_all_to_allv,
    .send = n_send,
    .recv = n_recv,
    .wait = n_wait,
    .test = n_test,
    .barrier = n_barrier,
    .split = n_split,
    .free = n_free,
};

int dg_comm_nccl_new(dg_comm *mpi_group, void *mpi_comm, dg_comm **out, dg_err *err) {
    *out = NULL;
    MPI_Comm mc = *(MPI_Comm *)mpi_comm;
    int rank = 0, size = 1;
    DG_CHECK0(MPI_Comm_rank(mc, &rank));
    DG_CHECK0(MPI_Comm_size(mc, &size));
    if (mpi_group && (mpi_group->rank != rank || mpi_group->size != size))
        return dg_err_set(err, DG_EINTERNAL, "comm nccl: the MPI group (%d of %d) and MPI_Comm (%d of %d) differ",
                          mpi_group->rank, mpi_group->size, rank, size);
    /* bootstrap: rank 0's unique id reaches every rank over MPI */
    ncclUniqueId id;
    if (rank == 0) DG_NCCL_TRY(ncclGetUniqueId(&id));
    DG_CHECK0(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, mc));
    nccl_impl *im = dg_calloc(1, sizeof *im);
    cudaError_t ce = cudaStreamCreateWithFlags(&im->own, cudaStreamNonBlocking);
    if (ce != cudaSuccess) {
        dg_free(im);
        return dg_err_set(err, DG_EINTERNAL, "comm nccl: stream: %s", cudaGetErrorString(ce));
    }
    ncclResult_t r = ncclCommInitRank(&im->comm, size, id, rank);
    if (r != ncclSuccess) {
        cudaStreamDestroy(im->own);
        dg_free(im);
        return dg_err_set(err, DG_EINTERNAL, "comm nccl: ncclCommInitRank (rank %d of %d): %s", rank,
                          size, ncclGetErrorString(r));
    }
    dg_comm *c = dg_calloc(1, sizeof *c);
    c->ops = &nccl_ops;
    c->rank = rank;
    c->size = size;
    c->impl = im;
    *out = c;
    return DG_OK;
}

int dg_comm_is_nccl(const dg_comm *c) { return c && c->ops == &nccl_ops; }

void *dg_comm_nccl_bind_stream(dg_comm *c, void *stream) {
    nccl_impl *im = impl_of(c);
    void *prev = im->bound;
    im->bound = (cudaStream_t)stream;
    return prev;
}

int dg_comm_nccl_check(dg_comm *c, dg_err *err) {
    DG_TRY(usable(c, err));
    ncclResult_t async = ncclSuccess;
    NCCL_OR_ABORT(c, ncclCommGetAsyncError(impl_of(c)->comm, &async));
    if (async != ncclSuccess) return fail(c, "asynchronous error", async, err);
    return DG_OK;
}
