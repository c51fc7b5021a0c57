/* test_cuda_device.c — the CUDA device (kernels/cuda/dg_cuda_device.h) on a
 * GPU, driven through sched/dg_device.h the way the device executor drives
 * it: buffers, pinned staging, copies and events on both streams, launches.
 *
 *   - memory: alloc is zeroed and 256-byte aligned; a vector goes up on the
 *     compute stream, across to a second buffer on the comm stream (after an
 *     event), and down from both (after another): unchanged; an allocation
 *     that cannot fit fails with the CUDA call and file:line;
 *   - has_kernel: matmul yes, seq_last (no CUDA kernel) no, a collective
 *     only once set_groups() gave the comms;
 *   - a small graph (embedding, matmul on the comm stream, add) launched
 *     node by node, cross-stream edges as event record + wait, against
 *     dg_run_serial: the embedding's rows exactly, the rest dg_close_f32;
 *   - node_time after sync: every node has start <= end, and across every
 *     edge the consumer starts after its producer ended; after prepare()
 *     again, no node has a time until it is launched;
 *   - a token outside the vocabulary: sync() is DG_EINPUT naming the
 *     embedding node, and the next sync() is clean (the flag was cleared);
 *   - collectives over a group of one, with the "self" comm (device copies)
 *     and with NCCL at one rank (bootstrapped over MPI_COMM_WORLD, bound to
 *     the device's comm stream): all_reduce, all_gather along dim 1 (the
 *     rank-major permutation through scratch), all_to_all_v (its counts
 *     come down to the host) and an add after them on the compute stream,
 *     against what a group of one must give: the input, the counted rows
 *     then zeros (every output was poisoned first), twice the input.
 *
 * Run under mpirun -np 1 (NCCL's bootstrap). Registered only when a GPU is
 * usable (tests/cuda/CMakeLists.txt): without one every case fails. */
#include <math.h>
#include <mpi.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "dg_close.h"
#include "dg_collective.h"
#include "dg_collective_v.h"
#include "dg_comm_mpi.h"
#include "dg_cuda_device.h"
#include "dg_cuda_nccl.h"
#include "dg_exec_serial.h"
#include "dg_op_basic.h"
#include "dg_op_embedding.h"
#include "dg_op_kv.h"
#include "dg_op_matmul.h"

static dg_device *dev;

static void dev_free(dg_device *d) {
    if (d) d->ops->free(d);
}

enum { T = 64, V = 50, K = 48, N = 40 };

/* tokens -> embedding -> matmul (on the comm stream) -> add. */
static dg_graph *compute_graph(int *tokens, int *emb_out, int *mm_out, int *z_out) {
    dg_graph *g = dg_graph_new("device_compute");
    *tokens = dg_input_new(g, "tokens", DG_I32, 1, DG_SHAPE(T));
    int emb = dg_param_new(g, "emb", 2, DG_SHAPE(V, K));
    int w = dg_param_new(g, "w", 2, DG_SHAPE(K, N));
    int c = dg_input_new(g, "c", DG_F32, 2, DG_SHAPE(T, N));
    *emb_out = dg_embedding(g, emb, *tokens);
    *mm_out = dg_matmul(g, *emb_out, w, 0, 0);
    *z_out = dg_add(g, *mm_out, c);
    assert_true(*z_out >= 0);
    g->nodes[g->tensors[*mm_out].producer].stream = DG_STREAM_COMM; /* the comm stream's cuBLAS */
    return g;
}

static void fill_leaves(const dg_graph *g, dg_buffers *b, int tokens, uint64_t seed) {
    uint64_t s = seed;
    for (int t = 0; t < g->n_tensors; t++) {
        const dg_tensor *x = &g->tensors[t];
        int64_t n = dg_tensor_numel(x);
        if (x->producer >= 0) { /* poison: an output element not written shows */
            memset(b->ptr[t], 0xFF, dg_tensor_bytes(x));
            continue;
        }
        for (int64_t i = 0; i < n && x->dtype == DG_F32; i++)
            dg_buf_f32(b, t)[i] = (float)((dg_splitmix64(&s) >> 11) * 0x1.0p-53 * 2.0 - 1.0);
        if (t == tokens)
            for (int64_t i = 0; i < n; i++) dg_buf_i32(b, t)[i] = (int32_t)(dg_splitmix64(&s) % V);
    }
}

/* Run g on d as the device executor would: every tensor in a device buffer
 * (uploaded from b through pinned staging), nodes in topological order on
 * their own stream, a cross-stream input waited for through its producer's
 * event, everything copied back down into b. Returns sync()'s status (or a
 * launch's). */
static int run_on_device(dg_device *d, const dg_graph *g, dg_buffers *b, dg_err *err) {
    const dg_device_ops *o = d->ops;
    int nt = g->n_tensors, nn = g->n_nodes, st = DG_OK;
    int e_up = nn, e_comm_done = nn + 1; /* the executor's extra events */
    void **dp = dg_calloc((size_t)nt, sizeof(void *));
    size_t *off = dg_calloc((size_t)nt, sizeof(size_t)), total = 0;
    for (int t = 0; t < nt; t++) {
        off[t] = total;
        total += (dg_tensor_bytes(&g->tensors[t]) + 255) & ~(size_t)255;
    }
    char *pin = NULL;
    int *order = dg_malloc(sizeof(int) * (size_t)nn);
    assert_int_equal(o->prepare(d, g, err), DG_OK);
    assert_int_equal(o->host_alloc(d, total, (void **)&pin, err), DG_OK);
    assert_int_equal(dg_graph_topo_order(g, order, err), DG_OK);
    for (int t = 0; t < nt && st == DG_OK; t++) {
        size_t bytes = dg_tensor_bytes(&g->tensors[t]);
        st = o->alloc(d, bytes, &dp[t], err);
        memcpy(pin + off[t], b->ptr[t], bytes);
        if (st == DG_OK) st = o->copy(d, DG_STREAM_COMPUTE, dp[t], pin + off[t], bytes, DG_COPY_UP, err);
    }
    if (st == DG_OK) st = o->record(d, DG_STREAM_COMPUTE, e_up, err);
    if (st == DG_OK) st = o->wait(d, DG_STREAM_COMM, e_up, err);
    for (int k = 0; k < nn && st == DG_OK; k++) {
        const dg_node *n = &g->nodes[order[k]];
        int s = (int)n->stream;
        void *in[DG_MAX_INPUTS], *out[DG_MAX_OUTPUTS];
        for (int i = 0; i < n->n_in && st == DG_OK; i++) {
            int p = g->tensors[n->in[i]].producer;
            if (p >= 0 && (int)g->nodes[p].stream != s) st = o->wait(d, s, p, err);
            in[i] = dp[n->in[i]];
        }
        for (int j = 0; j < n->n_out; j++) out[j] = dp[n->out[j]];
        if (st == DG_OK) st = o->launch(d, s, g, n, in, out, err);
        if (st == DG_OK) st = o->record(d, s, n->id, err);
    }
    if (st == DG_OK) st = o->record(d, DG_STREAM_COMM, e_comm_done, err);
    if (st == DG_OK) st = o->wait(d, DG_STREAM_COMPUTE, e_comm_done, err);
    for (int t = 0; t < nt && st == DG_OK; t++)
        st = o->copy(d, DG_STREAM_COMPUTE, pin + off[t], dp[t], dg_tensor_bytes(&g->tensors[t]), DG_COPY_DOWN, err);
    dg_err serr = {{0}};
    int sst = o->sync(d, &serr); /* always: nothing may be in flight when buffers go */
    if (st == DG_OK && sst != DG_OK) {
        st = sst;
        *err = serr;
    }
    for (int t = 0; t < nt && st == DG_OK; t++) memcpy(b->ptr[t], pin + off[t], dg_tensor_bytes(&g->tensors[t]));
    for (int t = 0; t < nt; t++) o->release(d, dp[t]);
    o->host_release(d, pin);
    dg_free(order);
    dg_free(off);
    dg_free(dp);
    return st;
}

static void test_memory_and_copies(void **state) {
    (void)state;
    enum { M = 4099 }; /* not a multiple of anything */
    const dg_device_ops *o = dev->ops;
    dg_err err = {{0}};
    int tok, e, mm, z;
    dg_graph *g = compute_graph(&tok, &e, &mm, &z); /* prepare() makes the events */
    assert_int_equal(o->prepare(dev, g, &err), DG_OK);
    float *a = NULL, *bb = NULL, *h = NULL, *h2 = NULL, *h3 = NULL;
    assert_int_equal(o->alloc(dev, M * sizeof(float), (void **)&a, &err), DG_OK);
    assert_int_equal(o->alloc(dev, M * sizeof(float), (void **)&bb, &err), DG_OK);
    assert_int_equal((uintptr_t)a % DG_DEVICE_ALIGN, 0);
    assert_int_equal((uintptr_t)bb % DG_DEVICE_ALIGN, 0);
    assert_int_equal(o->host_alloc(dev, M * sizeof(float), (void **)&h, &err), DG_OK);
    assert_int_equal(o->host_alloc(dev, M * sizeof(float), (void **)&h2, &err), DG_OK);
    assert_int_equal(o->host_alloc(dev, M * sizeof(float), (void **)&h3, &err), DG_OK);
    /* zeroed */
    memset(h2, 0xFF, M * sizeof(float));
    assert_int_equal(o->copy(dev, DG_STREAM_COMM, h2, a, M * sizeof(float), DG_COPY_DOWN, &err), DG_OK);
    assert_int_equal(o->sync(dev, &err), DG_OK);
    for (int i = 0; i < M; i++) assert_true(h2[i] == 0.0f);
    /* up (compute) -> event -> across (comm) -> event -> down (compute); down (comm) */
    for (int i = 0; i < M; i++) h[i] = 0.5f * (float)i - 7.0f;
    memset(h2, 0, M * sizeof(float));
    assert_int_equal(o->copy(dev, DG_STREAM_COMPUTE, a, h, M * sizeof(float), DG_COPY_UP, &err), DG_OK);
    assert_int_equal(o->record(dev, DG_STREAM_COMPUTE, 0, &err), DG_OK);
    assert_int_equal(o->wait(dev, DG_STREAM_COMM, 0, &err), DG_OK);
    assert_int_equal(o->copy(dev, DG_STREAM_COMM, bb, a, M * sizeof(float), DG_COPY_DEVICE, &err), DG_OK);
    assert_int_equal(o->copy(dev, DG_STREAM_COMM, h3, a, M * sizeof(float), DG_COPY_DOWN, &err), DG_OK);
    assert_int_equal(o->record(dev, DG_STREAM_COMM, 1, &err), DG_OK);
    assert_int_equal(o->wait(dev, DG_STREAM_COMPUTE, 1, &err), DG_OK);
    assert_int_equal(o->copy(dev, DG_STREAM_COMPUTE, h2, bb, M * sizeof(float), DG_COPY_DOWN, &err), DG_OK);
    assert_int_equal(o->sync(dev, &err), DG_OK);
    assert_memory_equal(h2, h, M * sizeof(float));
    assert_memory_equal(h3, h, M * sizeof(float));
    /* waiting on an event never recorded (the last extra one) is a no-op */
    assert_int_equal(o->wait(dev, DG_STREAM_COMPUTE, g->n_nodes + DG_DEVICE_EXTRA_EVENTS - 1, &err), DG_OK);
    assert_int_equal(o->wait(dev, DG_STREAM_COMPUTE, g->n_nodes + DG_DEVICE_EXTRA_EVENTS, &err), DG_EINTERNAL);
    assert_int_equal(o->sync(dev, &err), DG_OK);
    /* too big: the CUDA call and where */
    void *huge = (void *)1;
    assert_int_equal(o->alloc(dev, (size_t)1 << 52, &huge, &err), DG_EINTERNAL);
    assert_null(huge);
    assert_non_null(strstr(err.msg, "cudaMalloc"));
    assert_non_null(strstr(err.msg, "dg_cuda_device.cu:"));
    assert_int_equal(o->sync(dev, &err), DG_OK); /* the failure did not stick */
    o->release(dev, a);
    o->release(dev, bb);
    o->host_release(dev, h);
    o->host_release(dev, h2);
    o->host_release(dev, h3);
    dg_graph_free(g);
}

static void test_has_kernel(void **state) {
    (void)state;
    dg_err err = {{0}};
    dg_device *d = dg_cuda_device_new(0, &err);
    assert_non_null(d);
    assert_true(d->ops->has_kernel(d, &dg_op_matmul));
    assert_false(d->ops->has_kernel(d, &dg_op_seq_last));
    assert_false(d->ops->has_kernel(d, &dg_op_all_reduce));
    dg_comm *self = dg_comm_self_new();
    dg_comm *groups[DG_AXIS_COUNT] = {self};
    d->ops->set_groups(d, groups);
    assert_true(d->ops->has_kernel(d, &dg_op_all_reduce));
    dev_free(d);
    dg_comm_free(self);
}

/* Across every edge, the consumer starts after the producer ended (2 us of
 * slack for the event timer's resolution); every node starts before it ends. */
static void check_times(const dg_graph *g) {
    for (int v = 0; v < g->n_nodes; v++) {
        double t0, t1;
        assert_int_equal(dev->ops->node_time(dev, v, &t0, &t1), 1);
        assert_true(t0 <= t1);
        const dg_node *n = &g->nodes[v];
        for (int i = 0; i < n->n_in; i++) {
            int p = g->tensors[n->in[i]].producer;
            double p0, p1;
            if (p < 0) continue;
            assert_int_equal(dev->ops->node_time(dev, p, &p0, &p1), 1);
            if (!(p1 <= t0 + 2e-6)) print_error("node %d starts at %.9f, its producer %d ends at %.9f\n", v, t0, p, p1);
            assert_true(p1 <= t0 + 2e-6);
        }
    }
}

static void test_compute_graph(void **state) {
    (void)state;
    dg_err err = {{0}};
    int tok, e, mm, z;
    dg_graph *g = compute_graph(&tok, &e, &mm, &z);
    dg_buffers cpu, gpu;
    dg_buffers_alloc(g, &cpu);
    dg_buffers_alloc(g, &gpu);
    fill_leaves(g, &cpu, tok, 11);
    fill_leaves(g, &gpu, tok, 11);
    assert_int_equal(dg_run_serial(g, NULL, &cpu, NULL, &err), DG_OK);
    int st = run_on_device(dev, g, &gpu, &err);
    if (st != DG_OK) print_error("device run: %s\n", err.msg);
    assert_int_equal(st, DG_OK);
    assert_memory_equal(gpu.ptr[e], cpu.ptr[e], dg_tensor_bytes(&g->tensors[e]));
    char why[256];
    int ok = dg_close_f32(dg_buf_f32(&gpu, mm), dg_buf_f32(&cpu, mm), T * N, 1e-5, 1e-3, why, sizeof why);
    if (!ok) print_error("matmul: %s\n", why);
    assert_true(ok);
    ok = dg_close_f32(dg_buf_f32(&gpu, z), dg_buf_f32(&cpu, z), T * N, 1e-5, 1e-3, why, sizeof why);
    if (!ok) print_error("add: %s\n", why);
    assert_true(ok);
    check_times(g);
    /* prepared again: no node has a time until launched */
    assert_int_equal(dev->ops->prepare(dev, g, &err), DG_OK);
    double t0, t1;
    for (int v = 0; v < g->n_nodes; v++) assert_int_equal(dev->ops->node_time(dev, v, &t0, &t1), 0);
    dg_buffers_free(&cpu);
    dg_buffers_free(&gpu);
    dg_graph_free(g);
}

static void test_bad_token(void **state) {
    (void)state;
    dg_err err = {{0}};
    int tok, e, mm, z;
    dg_graph *g = compute_graph(&tok, &e, &mm, &z);
    dg_buffers b;
    dg_buffers_alloc(g, &b);
    fill_leaves(g, &b, tok, 12);
    dg_buf_i32(&b, tok)[5] = V + 5;
    assert_int_equal(run_on_device(dev, g, &b, &err), DG_EINPUT);
    char want[64];
    snprintf(want, sizeof want, "node %d ", g->tensors[e].producer);
    assert_non_null(strstr(err.msg, want));
    assert_non_null(strstr(err.msg, "embedding"));
    assert_null(strchr(err.msg, '\n'));
    assert_int_equal(dev->ops->sync(dev, &err), DG_OK); /* cleared */
    dg_buffers_free(&b);
    dg_graph_free(g);
}

enum { R = 12, W = 8, G = 2, M_OUT = 10 };

/* The collectives over a group of one, on a device whose groups are comm. */
static void collectives_on(dg_device *d, dg_comm *comm) {
    dg_err err = {{0}};
    dg_comm *groups[DG_AXIS_COUNT];
    for (int a = 0; a < DG_AXIS_COUNT; a++) groups[a] = comm;
    d->ops->set_groups(d, groups);
    dg_graph *g = dg_graph_new("device_collectives");
    int x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(R, W));
    int sc = dg_input_new(g, "send_counts", DG_I32, 1, DG_SHAPE(G));
    int rc = dg_input_new(g, "recv_counts", DG_I32, 1, DG_SHAPE(G));
    int r = dg_all_reduce(g, x, DG_AXIS_DP, 1);
    int a = dg_all_gather(g, r, DG_AXIS_TP, 1, 1);
    int y = dg_all_to_all_v(g, a, sc, rc, DG_AXIS_EP, 1, M_OUT);
    int twice = dg_add(g, a, x); /* compute after comm: waits on its event */
    assert_true(y >= 0 && twice >= 0);
    dg_buffers b;
    dg_buffers_alloc(g, &b);
    fill_leaves(g, &b, -1, 13);
    const int32_t counts[G] = {3, 4};
    memcpy(b.ptr[sc], counts, sizeof counts);
    memcpy(b.ptr[rc], counts, sizeof counts);
    int st = run_on_device(d, g, &b, &err);
    if (st != DG_OK) print_error("%s: %s\n", comm->ops->name, err.msg);
    assert_int_equal(st, DG_OK);
    assert_memory_equal(b.ptr[r], b.ptr[x], sizeof(float) * R * W);
    assert_memory_equal(b.ptr[a], b.ptr[x], sizeof(float) * R * W);
    assert_memory_equal(b.ptr[y], b.ptr[x], sizeof(float) * 7 * W);
    for (int i = 7 * W; i < M_OUT * W; i++) assert_true(dg_buf_f32(&b, y)[i] == 0.0f);
    for (int i = 0; i < R * W; i++) assert_true(dg_buf_f32(&b, twice)[i] == 2.0f * dg_buf_f32(&b, x)[i]);
    dg_buffers_free(&b);
    dg_graph_free(g);
}

static void test_collectives_self(void **state) {
    (void)state;
    dg_err err = {{0}};
    dg_device *d = dg_cuda_device_new(0, &err);
    assert_non_null(d);
    dg_comm *self = dg_comm_self_new();
    collectives_on(d, self);
    dev_free(d);
    dg_comm_free(self);
}

static void test_collectives_nccl(void **state) {
    (void)state;
    dg_err err = {{0}};
    dg_device *d = dg_cuda_device_new(0, &err);
    assert_non_null(d);
    MPI_Comm world = MPI_COMM_WORLD;
    dg_comm *nccl = NULL;
    int st = dg_comm_nccl_new(NULL, &world, &nccl, &err);
    if (st != DG_OK) print_error("%s\n", err.msg);
    assert_int_equal(st, DG_OK);
    assert_true(dg_comm_is_nccl(nccl));
    collectives_on(d, nccl);
    dev_free(d);
    dg_comm_free(nccl);
}

static int setup(void **state) {
    (void)state;
    dg_err err = {{0}};
    dev = dg_cuda_device_new(0, &err);
    if (!dev) {
        fprintf(stderr, "test_cuda_device: %s\n", err.msg);
        return -1; /* cmocka fails every test: a GPU test never skips */
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    dev_free(dev);
    return 0;
}

int main(int argc, char **argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory_and_copies),
        cmocka_unit_test(test_has_kernel),
        cmocka_unit_test(test_compute_graph),
        cmocka_unit_test(test_bad_token),
        cmocka_unit_test(test_collectives_self),
        cmocka_unit_test(test_collectives_nccl),
    };
    int rc = cmocka_run_group_tests(tests, setup, teardown);
    MPI_Finalize();
    return rc;
}
