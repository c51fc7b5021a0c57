/* dg_cuda_device.cu — the CUDA device (dg_cuda_device.h; the interface and
 * its semantics are sched/dg_device.h's). */
#include <sched.h>

#include "dg_cuda_internal.h"

extern "C" {
#include "dg_cuda_device.h"
#include "dg_cuda_device_comm.h"
#include "dg_cuda_nccl.h"
}

enum { NS = DG_DEVICE_MAX_STREAMS }; /* stream 0 computes, the others communicate */

/* cuBLAS's recommended workspace on Hopper; given per handle so cuBLAS
 * never allocates one itself during a step. */
static const size_t blas_ws_bytes = (size_t)32 << 20;

typedef struct cuda_dev {
    int gpu;
    cudaStream_t stream[NS];
    dg_cuda_ctx ctx[NS];   /* what the table's kernels read from dg_exec_env.device */
    void *blas_ws[NS];
    void *ws[NS];          /* kernel and collective scratch, ws_bytes each */
    size_t ws_bytes;
    int *bad;              /* device: first node that met bad input, -1 none (all streams) */
    int *bad_host;         /* pinned: where sync reads it */
    int32_t *counts;       /* pinned: all_to_all_v counts come down through it */
    int64_t n_counts;
    const dg_graph *g;     /* the prepared graph (NULL: none) */
    int n_nodes;
    cudaEvent_t *t_ev;     /* node v's start 2v, end 2v+1 (timing) */
    int n_t_ev;
    cudaEvent_t *sync_ev;  /* record / wait (timing disabled) */
    int n_sync_ev;
    cudaEvent_t ref;       /* node_time's origin */
    int ref_recorded;
    int64_t *launch_seq;   /* per node: which launch since prepare was its last, 0 none */
    int64_t n_launches;
    dg_comm *groups[DG_AXIS_COUNT];
    int have_groups, any_nccl;
    int **host_status;     /* host calls since the last sync: their outcome */
    dg_err **host_err;
    int n_host, cap_host;
} cuda_dev;

static cuda_dev *dev_of(const dg_device *d) { return (cuda_dev *)d->impl; }

/* ---- creation and teardown ---------------------------------------------------------- */

static void events_destroy(cudaEvent_t **ev, int *n) {
    for (int i = 0; i < *n; i++) cudaEventDestroy((*ev)[i]);
    dg_free(*ev);
    *ev = NULL;
    *n = 0;
}

/* Replace *ev by `want` new events; *n counts those made, so a failure
 * part-way leaves what teardown needs. */
static int events_remake(cudaEvent_t **ev, int *n, int want, unsigned flags, dg_err *err) {
    events_destroy(ev, n);
    *ev = (cudaEvent_t *)dg_calloc((size_t)(want > 0 ? want : 1), sizeof(cudaEvent_t));
    for (int i = 0; i < want; i++) {
        DG_CUDA_TRY(cudaEventCreateWithFlags(&(*ev)[i], flags));
        (*n)++;
    }
    return DG_OK;
}

/* Teardown: nothing is left to report to, so results are not checked. */
static void dev_destroy(cuda_dev *D) {
    cudaSetDevice(D->gpu);
    for (int s = 0; s < NS; s++)
        if (D->stream[s]) cudaStreamSynchronize(D->stream[s]);
    events_destroy(&D->t_ev, &D->n_t_ev);
    events_destroy(&D->sync_ev, &D->n_sync_ev);
    if (D->ref) cudaEventDestroy(D->ref);
    for (int s = 0; s < NS; s++) {
        if (D->ctx[s].blas) cublasDestroy(D->ctx[s].blas);
        if (D->blas_ws[s]) cudaFree(D->blas_ws[s]);
        if (D->ws[s]) cudaFree(D->ws[s]);
        if (D->stream[s]) cudaStreamDestroy(D->stream[s]);
    }
    if (D->bad) cudaFree(D->bad);
    if (D->bad_host) cudaFreeHost(D->bad_host);
    if (D->counts) cudaFreeHost(D->counts);
    dg_free(D->launch_seq);
    dg_free(D->host_status);
    dg_free(D->host_err);
    dg_free(D);
}

/* Stream s at `priority`, its cuBLAS handle (fp32 math, no TF32) with a
 * workspace of its own, and its context. */
static int stream_init(cuda_dev *D, int s, int priority, dg_err *err) {
    DG_CUDA_TRY(cudaStreamCreateWithPriority(&D->stream[s], cudaStreamNonBlocking, priority));
    DG_CUDA_TRY(cudaMalloc(&D->blas_ws[s], blas_ws_bytes));
    dg_cuda_ctx *c = &D->ctx[s];
    c->device = D->gpu;
    c->stream = D->stream[s];
    c->bad = D->bad;
    DG_CUBLAS_TRY(cublasCreate(&c->blas));
    /* SetStream resets a user workspace, so the workspace comes after it */
    DG_CUBLAS_TRY(cublasSetStream(c->blas, c->stream));
    DG_CUBLAS_TRY(cublasSetWorkspace(c->blas, D->blas_ws[s], blas_ws_bytes));
    DG_CUBLAS_TRY(cublasSetMathMode(c->blas, CUBLAS_DEFAULT_MATH));
    return DG_OK;
}

static int dev_init(cuda_dev *D, dg_err *err) {
    DG_CUDA_TRY(cudaSetDevice(D->gpu));
    /* "least" is the lowest priority (the larger number), "greatest" the highest */
    int least = 0, greatest = 0;
    DG_CUDA_TRY(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    DG_CUDA_TRY(cudaMalloc((void **)&D->bad, sizeof(int)));
    DG_CUDA_TRY(cudaMallocHost((void **)&D->bad_host, sizeof(int)));
    for (int s = 0; s < NS; s++)
        DG_TRY(stream_init(D, s, s == DG_STREAM_COMPUTE ? least : greatest, err));
    DG_CUDA_TRY(cudaMemsetAsync(D->bad, 0xFF, sizeof(int), D->stream[DG_STREAM_COMPUTE])); /* -1 */
    DG_CUDA_TRY(cudaStreamSynchronize(D->stream[DG_STREAM_COMPUTE]));
    DG_CUDA_TRY(cudaEventCreate(&D->ref));
    return DG_OK;
}

/* ---- memory ------------------------------------------------------------------------------ */

static int zero_now(cuda_dev *D, void *p, size_t bytes, dg_err *err) {
    DG_CUDA_TRY(cudaMemsetAsync(p, 0, bytes, D->stream[DG_STREAM_COMPUTE]));
    DG_CUDA_TRY(cudaStreamSynchronize(D->stream[DG_STREAM_COMPUTE]));
    return DG_OK;
}

static int d_alloc(dg_device *d, size_t bytes, void **ptr, dg_err *err) {
    cuda_dev *D = dev_of(d);
    void *p = NULL;
    size_t n = bytes > 0 ? bytes : DG_DEVICE_ALIGN;
    *ptr = NULL;
    DG_CUDA_TRY(cudaSetDevice(D->gpu));
    DG_CUDA_TRY(cudaMalloc(&p, n));
    int st = zero_now(D, p, n, err);
    if (st == DG_OK && (uintptr_t)p % DG_DEVICE_ALIGN != 0)
        st = dg_err_set(err, DG_EINTERNAL, "CUDA device: cudaMalloc returned %p, not %d-byte aligned", p,
                        DG_DEVICE_ALIGN);
    if (st != DG_OK) {
        cudaFree(p);
        return st;
    }
    *ptr = p;
    return DG_OK;
}

static int free_device(void *p, dg_err *err) {
    DG_CUDA_TRY(cudaFree(p));
    return DG_OK;
}

static int free_host(void *p, dg_err *err) {
    DG_CUDA_TRY(cudaFreeHost(p));
    return DG_OK;
}

/* release has no error to return: a failing free is printed. */
static void d_release(dg_device *d, void *ptr) {
    dg_err e = {{0}};
    if (!ptr) return;
    cudaSetDevice(dev_of(d)->gpu);
    if (free_device(ptr, &e) != DG_OK) dg_err_print(&e);
}

static int d_host_alloc(dg_device *d, size_t bytes, void **ptr, dg_err *err) {
    *ptr = NULL;
    DG_CUDA_TRY(cudaSetDevice(dev_of(d)->gpu));
    DG_CUDA_TRY(cudaMallocHost(ptr, bytes > 0 ? bytes : DG_DEVICE_ALIGN));
    return DG_OK;
}

static void d_host_release(dg_device *d, void *ptr) {
    dg_err e = {{0}};
    (void)d;
    if (ptr && free_host(ptr, &e) != DG_OK) dg_err_print(&e);
}

/* ---- prepare ------------------------------------------------------------------------------- */

/* What g's nodes need: the largest workspace (kernel or collective
 * scratch) and the most all_to_all_v counts. */
static void needs_of(const dg_graph *g, size_t *ws, int64_t *counts) {
    *ws = 0;
    *counts = 0;
    for (int v = 0; v < g->n_nodes; v++) {
        const dg_node *n = &g->nodes[v];
        size_t w = 0;
        if (n->op->comm != DG_COMM_NONE) {
            w = dg_cuda_comm_scratch(g, n);
            *counts = DG_MAX(*counts, dg_cuda_comm_host_counts(g, n));
        } else {
            const dg_cuda_entry *en = dg_cuda_entry_for(n->op);
            if (en && en->workspace) w = en->workspace(g, n);
            w += dg_kernel_f32_bytes(g, n); /* 16-bit tensors' f32 copies */
        }
        *ws = DG_MAX(*ws, w);
    }
}

static int grow_buffers(cuda_dev *D, size_t ws, int64_t counts, dg_err *err) {
    if (ws > D->ws_bytes) {
        D->ws_bytes = 0;
        for (int s = 0; s < NS; s++) {
            if (D->ws[s]) DG_CUDA_TRY(cudaFree(D->ws[s]));
            D->ws[s] = NULL;
        }
        for (int s = 0; s < NS; s++) DG_CUDA_TRY(cudaMalloc(&D->ws[s], ws));
        D->ws_bytes = ws;
    }
    if (counts > D->n_counts) {
        D->n_counts = 0;
        if (D->counts) DG_CUDA_TRY(cudaFreeHost(D->counts));
        D->counts = NULL;
        DG_CUDA_TRY(cudaMallocHost((void **)&D->counts, sizeof(int32_t) * (size_t)counts));
        D->n_counts = counts;
    }
    return DG_OK;
}

static int d_prepare(dg_device *d, const dg_graph *g, dg_err *err) {
    cuda_dev *D = dev_of(d);
    DG_CUDA_TRY(cudaSetDevice(D->gpu));
    /* nothing may still use the buffers and events about to be replaced */
    for (int s = 0; s < NS; s++) DG_CUDA_TRY(cudaStreamSynchronize(D->stream[s]));
    D->g = NULL; /* until this succeeds, launches are refused */
    D->n_nodes = 0;
    size_t ws;
    int64_t counts;
    needs_of(g, &ws, &counts);
    DG_TRY(grow_buffers(D, ws, counts, err));
    DG_TRY(events_remake(&D->t_ev, &D->n_t_ev, 2 * g->n_nodes, cudaEventDefault, err));
    DG_TRY(events_remake(&D->sync_ev, &D->n_sync_ev, g->n_nodes + DG_DEVICE_EXTRA_EVENTS,
                         cudaEventDisableTiming, err));
    dg_free(D->launch_seq);
    D->launch_seq = (int64_t *)dg_calloc((size_t)(g->n_nodes > 0 ? g->n_nodes : 1), sizeof(int64_t));
    D->n_launches = 0;
    D->ref_recorded = 0;
    D->g = g;
    D->n_nodes = g->n_nodes;
    return DG_OK;
}

static int d_has_kernel(const dg_device *d, const dg_op_def *op) {
    if (op->comm != DG_COMM_NONE) return dev_of(d)->have_groups;
    return dg_cuda_entry_for(op) != NULL;
}

/* ---- copies and events ------------------------------------------------------------------------ */

static int stream_ok(int s, dg_err *err) {
    if (s < 0 || s >= NS)
        return dg_err_set(err, DG_EINTERNAL, "CUDA device: stream %d does not exist (%d streams)", s, NS);
    return DG_OK;
}

static int event_ok(const cuda_dev *D, int e, dg_err *err) {
    if (e < 0 || e >= D->n_sync_ev)
        return dg_err_set(err, DG_EINTERNAL, "CUDA device: event %d does not exist (prepare() made %d)", e,
                          D->n_sync_ev);
    return DG_OK;
}

static int d_copy(dg_device *d, int s, void *dst, const void *src, size_t bytes, dg_copy_dir dir,
                  dg_err *err) {
    cuda_dev *D = dev_of(d);
    DG_TRY(stream_ok(s, err));
    if (bytes == 0) return DG_OK;
    cudaMemcpyKind kind = dir == DG_COPY_UP     ? cudaMemcpyHostToDevice
                          : dir == DG_COPY_DOWN ? cudaMemcpyDeviceToHost
                                                : cudaMemcpyDeviceToDevice;
    DG_CUDA_TRY(cudaSetDevice(D->gpu));
    DG_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, kind, D->stream[s]));
    return DG_OK;
}

static int d_record(dg_device *d, int s, int event, dg_err *err) {
    cuda_dev *D = dev_of(d);
    DG_TRY(stream_ok(s, err));
    DG_TRY(event_ok(D, event, err));
    DG_CUDA_TRY(cudaEventRecord(D->sync_ev[event], D->stream[s]));
    return DG_OK;
}

/* An event never recorded has nothing to wait for: CUDA makes this a no-op. */
static int d_wait(dg_device *d, int s, int event, dg_err *err) {
    cuda_dev *D = dev_of(d);
    DG_TRY(stream_ok(s, err));
    DG_TRY(event_ok(D, event, err));
    DG_CUDA_TRY(cudaStreamWaitEvent(D->stream[s], D->sync_ev[event], 0));
    return DG_OK;
}

/* fn(arg) on CUDA's host thread when stream s gets there; its outcome is
 * read at the next sync. */
static int d_host_call(dg_device *d, int s, void (*fn)(void *), void *arg, int *status, dg_err *fn_err,
                       dg_err *err) {
    cuda_dev *D = dev_of(d);
    DG_TRY(stream_ok(s, err));
    if (D->n_host == D->cap_host) {
        D->cap_host = D->cap_host ? 2 * D->cap_host : 64;
        D->host_status = (int **)dg_realloc(D->host_status, sizeof(int *) * (size_t)D->cap_host);
        D->host_err = (dg_err **)dg_realloc(D->host_err, sizeof(dg_err *) * (size_t)D->cap_host);
    }
    D->host_status[D->n_host] = status;
    D->host_err[D->n_host++] = fn_err;
    DG_CUDA_TRY(cudaLaunchHostFunc(D->stream[s], fn, arg));
    return DG_OK;
}

/* ---- launch ----------------------------------------------------------------------------------- */

static int launch_compute(cuda_dev *D, int s, const dg_graph *g, const dg_node *n, void *const *in,
                          void *const *out, dg_err *err) {
    const dg_cuda_entry *en = dg_cuda_entry_for(n->op);
    if (!en)
        return dg_err_set(err, DG_EINPUT, "node %d '%s' (op %s) has no CUDA kernel", n->id, n->name,
                          n->op->name);
    size_t need = (en->workspace ? en->workspace(g, n) : 0) + dg_kernel_f32_bytes(g, n);
    if (need > D->ws_bytes)
        return dg_err_set(err, DG_EINTERNAL, "node %d '%s' (op %s): needs %zu bytes of workspace, the stream "
                                             "has %zu: prepare() was not called for this graph",
                          n->id, n->name, n->op->name, need, D->ws_bytes);
    dg_exec_env env = {NULL, D->ws[s], D->ws_bytes, DG_BACKEND_CUDA, &D->ctx[s]};
    return dg_cuda_call_kernel(en, &env, g, n, in, out, err);
}

static int launch_collective(cuda_dev *D, int s, const dg_graph *g, const dg_node *n, void *const *in,
                             void *const *out, dg_err *err) {
    dg_comm *c = D->have_groups ? (D->groups[n->group] ? D->groups[n->group] : D->groups[DG_AXIS_NONE]) : NULL;
    if (!c)
        return dg_err_set(err, DG_EINTERNAL, "node %d '%s' (op %s): no comm for the %s group (set_groups)",
                          n->id, n->name, n->op->name, dg_axis_name(n->group));
    return dg_cuda_comm_run_node(c, D->stream[s], D->ws[s], D->ws_bytes, D->counts, D->n_counts, g, n,
                                 in, out, err);
}

static int d_launch(dg_device *d, int s, const dg_graph *g, const dg_node *n, void *const *in,
                    void *const *out, dg_err *err) {
    cuda_dev *D = dev_of(d);
    DG_TRY(stream_ok(s, err));
    int v = n->id;
    if (D->g != g || v < 0 || v >= D->n_nodes)
        return dg_err_set(err, DG_EINTERNAL, "node %d '%s': the CUDA device was not prepared for graph '%s'",
                          v, n->name, g->name);
    DG_CUDA_TRY(cudaSetDevice(D->gpu));
    cudaStream_t st = D->stream[s];
    if (!D->ref_recorded) {
        DG_CUDA_TRY(cudaEventRecord(D->ref, st));
        D->ref_recorded = 1;
    }
    D->launch_seq[v] = 0; /* until its end event is recorded */
    DG_CUDA_TRY(cudaEventRecord(D->t_ev[2 * v], st));
    if (n->op->comm != DG_COMM_NONE) DG_TRY(launch_collective(D, s, g, n, in, out, err));
    else DG_TRY(launch_compute(D, s, g, n, in, out, err));
    DG_CUDA_TRY(cudaEventRecord(D->t_ev[2 * v + 1], st));
    D->launch_seq[v] = ++D->n_launches;
    return DG_OK;
}

/* ---- sync and timing ---------------------------------------------------------------------------- */

/* After an asynchronous NCCL error: prefix the message with the earliest
 * launched collective that has not finished (the one that was running). */
static void name_stuck_collective(const cuda_dev *D, dg_err *err) {
    int best = -1;
    for (int v = 0; v < D->n_nodes; v++) {
        if (!D->launch_seq[v] || D->g->nodes[v].op->comm == DG_COMM_NONE) continue;
        if (cudaEventQuery(D->t_ev[2 * v + 1]) != cudaErrorNotReady) continue;
        if (best < 0 || D->launch_seq[v] < D->launch_seq[best]) best = v;
    }
    (void)cudaGetLastError(); /* not-ready answers are not errors to keep */
    if (best < 0 || !err) return;
    const dg_node *n = &D->g->nodes[best];
    dg_err e2 = *err;
    dg_err_set(err, DG_EINTERNAL, "node %d '%s' (op %s): %s", n->id, n->name, n->op->name, e2.msg);
}

/* Wait for stream s. While a NCCL comm is in use, poll instead of blocking,
 * so an asynchronous NCCL error (a peer gone) aborts the communicator and
 * returns instead of hanging in cudaStreamSynchronize. */
static int wait_stream(cuda_dev *D, int s, dg_err *err) {
    if (!D->any_nccl) {
        DG_CUDA_TRY(cudaStreamSynchronize(D->stream[s]));
        return DG_OK;
    }
    for (;;) {
        cudaError_t q = cudaStreamQuery(D->stream[s]);
        if (q == cudaSuccess) return DG_OK;
        if (q != cudaErrorNotReady) DG_CUDA_TRY(cudaStreamSynchronize(D->stream[s])); /* its error */
        (void)cudaGetLastError();
        for (int a = 0; a < DG_AXIS_COUNT; a++) {
            if (!dg_comm_is_nccl(D->groups[a])) continue;
            if (dg_comm_nccl_check(D->groups[a], err) != DG_OK) {
                if (D->g) name_stuck_collective(D, err);
                return DG_EINTERNAL;
            }
        }
        sched_yield();
    }
}

static int d_sync(dg_device *d, dg_err *err) {
    cuda_dev *D = dev_of(d);
    DG_CUDA_TRY(cudaSetDevice(D->gpu));
    for (int s = 0; s < NS; s++) DG_TRY(wait_stream(D, s, err));
    int n_host = D->n_host;
    D->n_host = 0;
    for (int i = 0; i < n_host; i++) /* the first host call that failed */
        if (*D->host_status[i] != DG_OK) {
            if (err) *err = *D->host_err[i];
            return *D->host_status[i];
        }
    cudaStream_t c = D->stream[DG_STREAM_COMPUTE];
    DG_CUDA_TRY(cudaMemcpyAsync(D->bad_host, D->bad, sizeof(int), cudaMemcpyDeviceToHost, c));
    DG_CUDA_TRY(cudaStreamSynchronize(c));
    int bad = *D->bad_host;
    if (bad < 0) return DG_OK;
    DG_CUDA_TRY(cudaMemsetAsync(D->bad, 0xFF, sizeof(int), c)); /* cleared: -1 */
    DG_CUDA_TRY(cudaStreamSynchronize(c));
    const dg_node *n = D->g && bad < D->n_nodes ? &D->g->nodes[bad] : NULL;
    return dg_err_set(err, DG_EINPUT, "node %d '%s' (op %s): an index in its input is out of range", bad,
                      n ? n->name : "?", n ? n->op->name : "?");
}

static int d_node_time(const dg_device *d, int v, double *t0, double *t1) {
    const cuda_dev *D = dev_of(d);
    if (v < 0 || v >= D->n_nodes || !D->launch_seq[v] || !D->ref_recorded) return 0;
    float a = 0, b = 0;
    cudaError_t e0 = cudaEventElapsedTime(&a, D->ref, D->t_ev[2 * v]);
    cudaError_t e1 = e0 == cudaSuccess ? cudaEventElapsedTime(&b, D->ref, D->t_ev[2 * v + 1]) : e0;
    if (e1 != cudaSuccess) {
        (void)cudaGetLastError(); /* "not ready" here means "no time yet", not a fault */
        return 0;
    }
    *t0 = a * 1e-3;
    *t1 = b * 1e-3;
    return 1;
}

static void d_set_groups(dg_device *d, dg_comm *const *groups) {
    cuda_dev *D = dev_of(d);
    D->any_nccl = 0;
    for (int a = 0; a < DG_AXIS_COUNT; a++) {
        D->groups[a] = groups[a];
        D->any_nccl |= dg_comm_is_nccl(groups[a]);
    }
    D->have_groups = 1;
}

static void d_free(dg_device *d) {
    if (!d) return;
    dev_destroy(dev_of(d));
    dg_free(d);
}

static const dg_device_ops cuda_device_ops = {
    "cuda",       d_alloc,  d_release, d_host_alloc, d_host_release, d_prepare,      d_has_kernel,
    d_copy,       d_launch, d_record,  d_wait,       d_host_call,    d_sync,         d_node_time,
    d_set_groups, d_free,
};

extern "C" dg_device *dg_cuda_device_new(int gpu, dg_err *err) {
    int count = 0;
    if (dg_cuda_device_count(&count, err) != DG_OK) return NULL;
    if (gpu < 0) gpu = dg_cuda_local_device(count);
    if (gpu >= count) {
        dg_err_set(err, DG_EINPUT, "CUDA device: GPU %d does not exist (%d found)", gpu, count);
        return NULL;
    }
    cuda_dev *D = (cuda_dev *)dg_calloc(1, sizeof *D);
    D->gpu = gpu;
    if (dev_init(D, err) != DG_OK) {
        dev_destroy(D);
        return NULL;
    }
    dg_device *d = (dg_device *)dg_calloc(1, sizeof *d);
    d->ops = &cuda_device_ops;
    d->n_streams = NS;
    d->impl = D;
    return d;
}
