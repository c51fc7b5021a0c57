/* dg_cuda_exec.cu — the CUDA context, the serial device executor and the
 * single-node staging used by the op tests (dg_cuda_exec.h). */
#include "dg_cuda_internal.h"

/* ---- context ------------------------------------------------------------------------------ */

/* The rank's device: its local rank (as the launcher names it) modulo the
 * device count, so mpirun puts one rank per GPU. */
int dg_cuda_local_device(int count) {
    const char *vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID",
                          "LOCAL_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return atoi(v) % count;
    }
    return 0;
}

extern "C" int dg_cuda_select_local(int *gpu, dg_err *err) {
    int count = 0;
    DG_TRY(dg_cuda_device_count(&count, err));
    int d = dg_cuda_local_device(count);
    DG_CUDA_TRY(cudaSetDevice(d));
    if (gpu) *gpu = d;
    return DG_OK;
}

extern "C" int dg_cuda_ctx_new(int device, dg_cuda_ctx **out, dg_err *err) {
    *out = NULL;
    int count = 0;
    DG_TRY(dg_cuda_device_count(&count, err));
    if (device < 0) device = dg_cuda_local_device(count);
    if (device >= count)
        return dg_err_set(err, DG_EINPUT, "CUDA backend: device %d does not exist (%d found)", device, count);
    DG_CUDA_TRY(cudaSetDevice(device));
    dg_cuda_ctx *c = (dg_cuda_ctx *)dg_calloc(1, sizeof *c);
    c->device = device;
    cudaError_t ce = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
    if (ce == cudaSuccess) ce = cudaMalloc(&c->bad, sizeof(int));
    if (ce == cudaSuccess) ce = cudaMemsetAsync(c->bad, 0xFF, sizeof(int), c->stream); /* -1: none */
    if (ce == cudaSuccess) ce = cudaStreamSynchronize(c->stream);
    cublasStatus_t bs = CUBLAS_STATUS_SUCCESS;
    if (ce == cudaSuccess) bs = cublasCreate(&c->blas);
    if (ce == cudaSuccess && bs == CUBLAS_STATUS_SUCCESS) bs = cublasSetStream(c->blas, c->stream);
    if (ce == cudaSuccess && bs == CUBLAS_STATUS_SUCCESS)
        bs = cublasSetMathMode(c->blas, CUBLAS_DEFAULT_MATH); /* fp32: no TF32 */
    if (ce != cudaSuccess || bs != CUBLAS_STATUS_SUCCESS) {
        dg_cuda_ctx_free(c);
        if (ce != cudaSuccess)
            return dg_err_set(err, DG_EINTERNAL, "CUDA backend: context on device %d: %s", device,
                              cudaGetErrorString(ce));
        return dg_err_set(err, DG_EINTERNAL, "CUDA backend: cuBLAS handle: status %d", (int)bs);
    }
    *out = c;
    return DG_OK;
}

extern "C" void dg_cuda_ctx_free(dg_cuda_ctx *c) {
    if (!c) return;
    cudaSetDevice(c->device);
    if (c->blas) cublasDestroy(c->blas);
    if (c->bad) cudaFree(c->bad);
    if (c->stream) cudaStreamDestroy(c->stream);
    dg_free(c);
}

/* Wait for the stream, then report (and clear) bad input a kernel flagged. */
static int ctx_sync(dg_cuda_ctx *c, const dg_graph *g, dg_err *err) {
    DG_CUDA_TRY(cudaStreamSynchronize(c->stream));
    int bad = -1;
    DG_CUDA_TRY(cudaMemcpyAsync(&bad, c->bad, sizeof bad, cudaMemcpyDeviceToHost, c->stream));
    DG_CUDA_TRY(cudaStreamSynchronize(c->stream));
    if (bad < 0) return DG_OK;
    DG_CUDA_TRY(cudaMemsetAsync(c->bad, 0xFF, sizeof(int), c->stream));
    DG_CUDA_TRY(cudaStreamSynchronize(c->stream));
    const dg_node *n = bad < g->n_nodes ? &g->nodes[bad] : NULL;
    return dg_err_set(err, DG_EINPUT, "node %d '%s' (op %s): an index in its input is out of range",
                      bad, n ? n->name : "?", n ? n->op->name : "?");
}

int dg_cuda_call_kernel(const dg_cuda_entry *en, const dg_exec_env *env, const dg_graph *g,
                        const dg_node *n, void *const *in, void *const *out, dg_err *err) {
    (void)cudaGetLastError(); /* the status read below is this kernel's alone */
    int st = dg_kernel_f32_bytes(g, n) ? dg_cuda_call_converted(en, env, g, n, in, out) : en->fn(env, g, n, in, out);
    if (st != DG_OK) {
        cudaError_t ce = cudaGetLastError();
        return dg_err_set(err, st, "node %d '%s' (op %s): CUDA kernel failed (status %d%s%s)", n->id,
                          n->name, n->op->name, st, ce != cudaSuccess ? ": " : "",
                          ce != cudaSuccess ? cudaGetErrorString(ce) : "");
    }
    return DG_OK;
}

/* Run node n's CUDA kernel (entry en) on device buffers din/dout, with a
 * device workspace grown in *ws / *ws_bytes. */
static int run_device_node(dg_cuda_ctx *c, const dg_cuda_entry *en, const dg_graph *g,
                           const dg_node *n, void *const *din, void *const *dout, void **ws,
                           size_t *ws_bytes, dg_err *err) {
    size_t need = (en->workspace ? en->workspace(g, n) : 0) + dg_kernel_f32_bytes(g, n);
    if (need > *ws_bytes) {
        DG_CUDA_TRY(cudaStreamSynchronize(c->stream));
        if (*ws) DG_CUDA_TRY(cudaFree(*ws));
        *ws = NULL;
        DG_CUDA_TRY(cudaMalloc(ws, need));
        *ws_bytes = need;
    }
    dg_exec_env env = {NULL, *ws, *ws_bytes, DG_BACKEND_CUDA, c};
    return dg_cuda_call_kernel(en, &env, g, n, din, dout, err);
}

/* Run node n's CPU kernel on host buffers hin/hout (a host workspace grown
 * in *ws / *ws_bytes; 16-bit tensors widened in *f32: dg_kernel_call.h). */
static int run_host_node(const dg_team *team, const dg_graph *g, const dg_node *n, void *const *hin,
                         void *const *hout, void **ws, size_t *ws_bytes, dg_kernel_scratch *f32, dg_err *err) {
    if (!n->op->kernel)
        return dg_err_set(err, DG_EINPUT, "node %d '%s' (op %s): no CUDA kernel and no CPU kernel",
                          n->id, n->name, n->op->name);
    size_t need = n->op->workspace ? n->op->workspace(g, n, team ? team->nthreads : 1) : 0;
    if (need > *ws_bytes) {
        dg_free(*ws);
        *ws = dg_aligned_alloc(need);
        *ws_bytes = need;
    }
    dg_exec_env env = {team, *ws, *ws_bytes, DG_BACKEND_CPU, NULL};
    int st = dg_kernel_call(&env, g, n, hin, hout, f32);
    if (st != DG_OK)
        return dg_err_set(err, st, "node %d '%s' (op %s): CPU kernel failed with status %d", n->id,
                          n->name, n->op->name, st);
    return DG_OK;
}

static size_t align256(size_t x) { return (x + 255) & ~(size_t)255; }

/* ---- the serial device executor -------------------------------------------------------- */

typedef struct run_state {
    char *arena;
    size_t *off;
    void *dws, *hws;
    size_t dws_bytes, hws_bytes;
    dg_kernel_scratch f32; /* host fallback: 16-bit tensors' f32 copies */
    int *order;
} run_state;

static void run_state_free(run_state *s) {
    if (s->arena) cudaFree(s->arena);
    if (s->dws) cudaFree(s->dws);
    dg_free(s->hws);
    dg_kernel_scratch_free(&s->f32);
    dg_free(s->off);
    dg_free(s->order);
}

/* Copy tensors [ids] between the arena and b (up: to the device). */
static int copy_tensors(const dg_graph *g, run_state *s, dg_buffers *b, const int *ids, int n, int up,
                        cudaStream_t st, dg_err *err) {
    for (int i = 0; i < n; i++) {
        int t = ids[i];
        size_t bytes = dg_tensor_bytes(&g->tensors[t]);
        if (!bytes) continue;
        if (up)
            DG_CUDA_TRY(cudaMemcpyAsync(s->arena + s->off[t], b->ptr[t], bytes, cudaMemcpyHostToDevice, st));
        else
            DG_CUDA_TRY(cudaMemcpyAsync(b->ptr[t], s->arena + s->off[t], bytes, cudaMemcpyDeviceToHost, st));
    }
    return DG_OK;
}

static int run_nodes(const dg_graph *g, run_state *s, dg_buffers *b, dg_cuda_ctx *c,
                     const dg_cuda_run_opts *o, dg_cuda_run_stats *stats, dg_err *err) {
    for (int k = 0; k < g->n_nodes; k++) {
        const dg_node *n = &g->nodes[s->order[k]];
        if (n->op->comm != DG_COMM_NONE)
            return dg_err_set(err, DG_EINPUT, "CUDA executor: node %d '%s' is a collective (%s): not supported here yet",
                              n->id, n->name, n->op->name);
        const dg_cuda_entry *en = dg_cuda_entry_for(n->op);
        if (en) {
            void *din[DG_MAX_INPUTS], *dout[DG_MAX_OUTPUTS];
            for (int i = 0; i < n->n_in; i++) din[i] = s->arena + s->off[n->in[i]];
            for (int j = 0; j < n->n_out; j++) dout[j] = s->arena + s->off[n->out[j]];
            DG_TRY(run_device_node(c, en, g, n, din, dout, &s->dws, &s->dws_bytes, err));
            stats->n_device++;
            continue;
        }
        if (!o->host_fallback)
            return dg_err_set(err, DG_EINPUT, "CUDA executor: node %d '%s' (op %s) has no CUDA kernel",
                              n->id, n->name, n->op->name);
        /* host fallback: inputs down, CPU kernel, outputs up */
        DG_TRY(copy_tensors(g, s, b, n->in, n->n_in, 0, c->stream, err));
        DG_TRY(ctx_sync(c, g, err));
        void *hin[DG_MAX_INPUTS], *hout[DG_MAX_OUTPUTS];
        for (int i = 0; i < n->n_in; i++) hin[i] = b->ptr[n->in[i]];
        for (int j = 0; j < n->n_out; j++) hout[j] = b->ptr[n->out[j]];
        DG_TRY(run_host_node(o->team, g, n, hin, hout, &s->hws, &s->hws_bytes, &s->f32, err));
        DG_TRY(copy_tensors(g, s, b, n->out, n->n_out, 1, c->stream, err));
        unsigned written = dg_cuda_inputs_written(n->op); /* in-place updates go up too */
        for (int i = 0; i < n->n_in; i++)
            if (written >> i & 1u) DG_TRY(copy_tensors(g, s, b, &n->in[i], 1, 1, c->stream, err));
        stats->n_host++;
    }
    return DG_OK;
}

extern "C" int dg_run_cuda(const dg_graph *g, const int *order, dg_buffers *b, dg_cuda_ctx *c,
                           const dg_cuda_run_opts *opts, dg_cuda_run_stats *stats_out, dg_err *err) {
    dg_cuda_run_opts dflt = {0, NULL, 0};
    const dg_cuda_run_opts *o = opts ? opts : &dflt;
    dg_cuda_run_stats stats = {0, 0, 0};
    run_state s;
    memset(&s, 0, sizeof s);
    s.order = (int *)dg_malloc(sizeof(int) * (size_t)(g->n_nodes > 0 ? g->n_nodes : 1));
    if (order)
        memcpy(s.order, order, sizeof(int) * (size_t)g->n_nodes);
    else if (dg_graph_topo_order(g, s.order, err) != DG_OK) {
        run_state_free(&s);
        return DG_EINPUT;
    }
    DG_CUDA_TRY(cudaSetDevice(c->device));
    /* the arena: one slot per tensor, no reuse */
    s.off = (size_t *)dg_malloc(sizeof(size_t) * (size_t)(g->n_tensors > 0 ? g->n_tensors : 1));
    size_t total = 0;
    for (int t = 0; t < g->n_tensors; t++) {
        s.off[t] = total;
        total += align256(dg_tensor_bytes(&g->tensors[t]));
    }
    stats.arena_bytes = total;
    int st = DG_OK;
    cudaError_t ce = cudaMalloc(&s.arena, total > 0 ? total : 256);
    if (ce != cudaSuccess)
        st = dg_err_set(err, DG_EINPUT, "CUDA executor: the arena of %zu bytes does not fit: %s", total,
                        cudaGetErrorString(ce));
    /* poison: NaN floats, -1 ints, so an element no kernel wrote shows */
    if (st == DG_OK && o->poison && cudaMemsetAsync(s.arena, 0xFF, total, c->stream) != cudaSuccess)
        st = dg_err_set(err, DG_EINTERNAL, "CUDA executor: poisoning the arena failed");
    int *ids = (int *)dg_malloc(sizeof(int) * (size_t)(g->n_tensors > 0 ? g->n_tensors : 1));
    int n_leaf = 0;
    for (int t = 0; t < g->n_tensors; t++) {
        if (g->tensors[t].producer < 0) ids[n_leaf++] = t;
    }
    if (st == DG_OK) st = copy_tensors(g, &s, b, ids, n_leaf, 1, c->stream, err);
    if (st == DG_OK) st = run_nodes(g, &s, b, c, o, &stats, err);
    if (st == DG_OK) st = ctx_sync(c, g, err);
    for (int t = 0; t < g->n_tensors; t++) ids[t] = t;
    if (st == DG_OK) st = copy_tensors(g, &s, b, ids, g->n_tensors, 0, c->stream, err);
    if (st == DG_OK) st = ctx_sync(c, g, err);
    cudaStreamSynchronize(c->stream);
    dg_free(ids);
    run_state_free(&s);
    if (stats_out) *stats_out = stats;
    return st;
}

/* ---- one node on device copies (the op tests) --------------------------------------------- */

/* Device staging for one node's buffers, and the kernels' workspaces. */
typedef struct staging {
    char *buf;
    size_t buf_bytes;
    void *dws, *hws;
    size_t dws_bytes, hws_bytes;
} staging;

static void staging_free(staging *sg) {
    if (sg->buf) cudaFree(sg->buf);
    if (sg->dws) cudaFree(sg->dws);
    dg_free(sg->hws);
    memset(sg, 0, sizeof *sg);
}

/* Device slots for n's inputs (copied up) and outputs (poisoned on request). */
static int stage_node(dg_cuda_ctx *c, staging *sg, const dg_graph *g, const dg_node *n,
                      void *const *in, void *const *out, int poison, void **din, void **dout,
                      dg_err *err) {
    size_t off[DG_MAX_INPUTS + DG_MAX_OUTPUTS], total = 0;
    for (int i = 0; i < n->n_in; i++) {
        off[i] = total;
        total += align256(dg_tensor_bytes(&g->tensors[n->in[i]]));
    }
    for (int j = 0; j < n->n_out; j++) {
        off[DG_MAX_INPUTS + j] = total;
        total += align256(dg_tensor_bytes(&g->tensors[n->out[j]]));
    }
    if (total > sg->buf_bytes) {
        DG_CUDA_TRY(cudaStreamSynchronize(c->stream));
        if (sg->buf) DG_CUDA_TRY(cudaFree(sg->buf));
        sg->buf = NULL;
        DG_CUDA_TRY(cudaMalloc((void **)&sg->buf, total));
        sg->buf_bytes = total;
    }
    for (int i = 0; i < n->n_in; i++) {
        din[i] = sg->buf + off[i];
        DG_CUDA_TRY(cudaMemcpyAsync(din[i], in[i], dg_tensor_bytes(&g->tensors[n->in[i]]),
                                    cudaMemcpyHostToDevice, c->stream));
    }
    for (int j = 0; j < n->n_out; j++) {
        dout[j] = sg->buf + off[DG_MAX_INPUTS + j];
        int shared = 0;
        for (int i = 0; i < n->n_in; i++)
            if (out[j] == in[i]) {
                dout[j] = din[i];
                shared = 1;
            }
        if (poison && !shared)
            DG_CUDA_TRY(cudaMemsetAsync(dout[j], 0xFF, dg_tensor_bytes(&g->tensors[n->out[j]]), c->stream));
    }
    return DG_OK;
}

static int run_node_staged(dg_cuda_ctx *c, staging *sg, const dg_cuda_entry *en, const dg_graph *g,
                           const dg_node *n, void *const *in, void *const *out, int poison, dg_err *err) {
    DG_CUDA_TRY(cudaSetDevice(c->device)); /* the calling thread's device */
    void *din[DG_MAX_INPUTS], *dout[DG_MAX_OUTPUTS];
    DG_TRY(stage_node(c, sg, g, n, in, out, poison, din, dout, err));
    DG_TRY(run_device_node(c, en, g, n, din, dout, &sg->dws, &sg->dws_bytes, err));
    for (int j = 0; j < n->n_out; j++)
        DG_CUDA_TRY(cudaMemcpyAsync(out[j], dout[j], dg_tensor_bytes(&g->tensors[n->out[j]]),
                                    cudaMemcpyDeviceToHost, c->stream));
    /* the optimizer's in-place updates come back too */
    unsigned written = dg_cuda_inputs_written(n->op);
    for (int i = 0; i < n->n_in; i++)
        if (written >> i & 1u)
            DG_CUDA_TRY(cudaMemcpyAsync(in[i], din[i], dg_tensor_bytes(&g->tensors[n->in[i]]),
                                        cudaMemcpyDeviceToHost, c->stream));
    return ctx_sync(c, g, err);
}

extern "C" int dg_cuda_run_node(dg_cuda_ctx *c, const dg_graph *g, const dg_node *n, void *const *in,
                                void *const *out, int poison, dg_err *err) {
    const dg_cuda_entry *en = dg_cuda_entry_for(n->op);
    if (!en)
        return dg_err_set(err, DG_EINPUT, "node %d '%s' (op %s) has no CUDA kernel", n->id, n->name,
                          n->op->name);
    staging sg;
    memset(&sg, 0, sizeof sg);
    int st = run_node_staged(c, &sg, en, g, n, in, out, poison, err);
    cudaStreamSynchronize(c->stream);
    staging_free(&sg);
    return st;
}

