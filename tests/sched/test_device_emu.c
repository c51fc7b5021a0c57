/* test_device_emu.c — the device interface on the emulated device, and the
 * runtime's device path (sched/dg_device.h, dg_device_emu.h,
 * dg_device_exec.h, dg_sched.h "On a device"):
 *   - events order two streams: a wait holds its stream until the record,
 *     with random delays; a wait on an event never recorded is a no-op;
 *   - the executor's waits cover every cross-stream edge of a plan, and
 *     only the latest producer per stream is waited for;
 *   - the device runtime gives the CPU runtime's results bit for bit, with
 *     delays, for any worker count and over repeated steps;
 *   - state is device-resident: parameters set in the host view reach the
 *     kernels only through dg_runtime_upload; inputs go up every step;
 *   - a failing kernel is reported naming its node, and the runtime runs
 *     the next step; an op without a kernel on the device is refused at bind.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dg_collective.h"
#include "dg_device_emu.h"
#include "dg_device_exec.h"
#include "dg_sched.h"
#include "sched_test_ops.h"

#define R 16
#define C 32

static dg_device *emu(int delay_us) {
    dg_err err = {{0}};
    dg_device_emu_opts o = {NULL, delay_us, 7, NULL};
    dg_device *d = dg_device_emu_new(&o, &err);
    assert_non_null(d);
    return d;
}

/* A record on one stream and a wait on the other order a copy up before a
 * copy down of the same device buffer, whatever the delays. */
static void test_events_order_streams(void **state) {
    (void)state;
    dg_device *d = emu(300);
    dg_err err = {{0}};
    dg_graph *g = dg_graph_new("events"); /* only sizes the events */
    int x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(R, C));
    t_mix(g, &x, 1, 0, NULL);
    assert_int_equal(d->ops->prepare(d, g, &err), DG_OK);
    int *dev = NULL;
    assert_int_equal(d->ops->alloc(d, sizeof(int), (void **)&dev, &err), DG_OK);
    for (int i = 1; i <= 40; i++) {
        int src = i, got = -1;
        assert_int_equal(d->ops->copy(d, DG_STREAM_COMM, dev, &src, sizeof src, DG_COPY_UP, &err), DG_OK);
        assert_int_equal(d->ops->record(d, DG_STREAM_COMM, 0, &err), DG_OK);
        assert_int_equal(d->ops->wait(d, DG_STREAM_COMPUTE, 0, &err), DG_OK);
        assert_int_equal(d->ops->copy(d, DG_STREAM_COMPUTE, &got, dev, sizeof got, DG_COPY_DOWN, &err), DG_OK);
        assert_int_equal(d->ops->sync(d, &err), DG_OK);
        assert_int_equal(got, i);
    }
    /* The other way round: the compute stream reads, then records; the
     * comm stream waits for that record before it overwrites. */
    int old = 0, neu = 99, got = -1;
    assert_int_equal(d->ops->copy(d, DG_STREAM_COMPUTE, dev, &old, sizeof old, DG_COPY_UP, &err), DG_OK);
    assert_int_equal(d->ops->sync(d, &err), DG_OK);
    for (int i = 0; i < 10; i++) {
        assert_int_equal(d->ops->copy(d, DG_STREAM_COMPUTE, &got, dev, sizeof got, DG_COPY_DOWN, &err), DG_OK);
        assert_int_equal(d->ops->record(d, DG_STREAM_COMPUTE, 2, &err), DG_OK);
        assert_int_equal(d->ops->wait(d, DG_STREAM_COMM, 3, &err), DG_OK); /* never recorded: no-op */
        assert_int_equal(d->ops->wait(d, DG_STREAM_COMM, 2, &err), DG_OK);
        assert_int_equal(d->ops->copy(d, DG_STREAM_COMM, dev, &neu, sizeof neu, DG_COPY_UP, &err), DG_OK);
        assert_int_equal(d->ops->sync(d, &err), DG_OK);
        assert_int_equal(got, old);
        assert_int_equal(d->ops->copy(d, DG_STREAM_COMPUTE, &got, dev, sizeof got, DG_COPY_DOWN, &err), DG_OK);
        assert_int_equal(d->ops->sync(d, &err), DG_OK);
        assert_int_equal(got, neu);
        old = neu++;
    }
    assert_int_equal(d->ops->wait(d, DG_STREAM_COMM, 1 << 20, &err), DG_EINPUT); /* no such event */
    d->ops->release(d, dev);
    dg_device_free(d);
    dg_graph_free(g);
}

typedef struct wide {
    dg_graph *g;
    int p[3];
    int keep[64];
    int n_keep;
} wide;

/* Layers of a diamond whose branches cross the comm stream (an all-reduce
 * and an all-gather on groups of one). */
static void build_wide(wide *w, int layers, int jitter) {
    memset(w, 0, sizeof *w);
    dg_graph *g = w->g = dg_graph_new("wide");
    int h = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(R, C));
    for (int j = 0; j < 3; j++) {
        char nm[16];
        snprintf(nm, sizeof nm, "p%d", j);
        w->p[j] = dg_param_new(g, nm, 2, DG_SHAPE(R, C));
    }
    for (int l = 0; l < layers; l++) {
        int b0 = t_mix(g, (int[]){h, w->p[0]}, 2, jitter, NULL);
        int b1 = t_mix(g, (int[]){h, w->p[1]}, 2, jitter, NULL);
        int b2 = t_mix(g, (int[]){b0, w->p[2]}, 2, jitter, NULL);
        int c = dg_all_reduce(g, b1, DG_AXIS_DP, 1);
        int c2 = dg_all_gather(g, b2, DG_AXIS_TP, 1, 1);
        h = t_mix(g, (int[]){c2, c, b1, h}, 4, jitter, NULL);
        w->keep[w->n_keep++] = h;
    }
    w->keep[w->n_keep++] = t_sum(g, h, "loss");
    assert_int_equal(g->status, DG_OK);
}

static size_t kept_bytes(const wide *w) {
    size_t n = 0;
    for (int k = 0; k < w->n_keep; k++) n += dg_tensor_bytes(dg_Tc(w->g, w->keep[k]));
    return n;
}

/* The runtime's comm groups in run_on (NULL: the runtime's group of one). */
static dg_comm *g_groups[DG_AXIS_COUNT];

static dg_device *make_emu(const dg_team *team, void *arg, dg_err *err) {
    dg_device_emu_opts o = {team, *(int *)arg, 11, NULL};
    return dg_device_emu_new(&o, err);
}

/* Run w `steps` times on a runtime (delay < 0: the CPU runtime; else the
 * emulated device with that delay); out gets the kept tensors of each step.
 * upload = 0 leaves the parameters in the host view only. */
static void run_on(const wide *w, int threads, int delay, int steps, int upload, char *out) {
    dg_err err = {{0}};
    dg_sched_opts so = {.keep = w->keep, .n_keep = w->n_keep};
    dg_sched_plan *p = dg_sched_plan_new(w->g, &so, &err);
    assert_non_null(p);
    dg_runtime_opts ro = {.compute_threads = threads};
    for (int a = 0; a < DG_AXIS_COUNT; a++) ro.groups[a] = g_groups[a];
    if (delay >= 0) ro.make_device = make_emu, ro.make_device_arg = &delay;
    dg_runtime *rt = dg_runtime_new(&ro, &err);
    assert_non_null(rt);
    assert_int_equal(dg_runtime_bind(rt, p, &err), DG_OK);
    for (int t = 0; t < w->g->n_tensors; t++)
        if (w->g->tensors[t].producer < 0) t_fill(dg_runtime_ptr(rt, t), dg_tensor_numel(&w->g->tensors[t]), (unsigned)t + 1);
    if (upload) assert_int_equal(dg_runtime_upload(rt, DG_ROLES_STATE, &err), DG_OK);
    size_t o = 0;
    for (int s = 0; s < steps; s++) {
        dg_sched_stats st;
        if (dg_sched_run(p, rt, &st, &err) != DG_OK) fail_msg("step failed: %s", err.msg);
        assert_int_equal(st.n_tasks, w->g->n_nodes);
        if (delay >= 0) { /* the input goes up, the kept tensors come down */
            assert_int_equal(st.bytes_up, sizeof(float) * R * C);
            assert_true(st.bytes_down >= kept_bytes(w));
        }
        for (int k = 0; k < w->n_keep; k++) {
            size_t b = dg_tensor_bytes(dg_Tc(w->g, w->keep[k]));
            memcpy(out + o, dg_runtime_ptr(rt, w->keep[k]), b);
            o += b;
        }
        /* the next step's input, written into the host view */
        float *x = dg_runtime_ptr(rt, 0);
        x[s] += 1.0f;
    }
    dg_runtime_free(rt);
    dg_sched_plan_free(p);
}

static void test_runtime_bitwise(void **state) {
    (void)state;
    wide w;
    build_wide(&w, 6, 20);
    size_t nb = kept_bytes(&w) * 3;
    char *ref = malloc(nb), *got = malloc(nb);
    run_on(&w, 2, -1, 3, 1, ref);
    const int cases[][2] = {{1, 0}, {2, 0}, {1, 200}, {2, 200}, {3, 50}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memset(got, 0, nb);
        run_on(&w, cases[i][0], cases[i][1], 3, 1, got);
        assert_memory_equal(ref, got, nb);
    }
    /* Without the upload, the device's parameters are still zeros. */
    run_on(&w, 2, 0, 3, 0, got);
    assert_memory_not_equal(ref, got, nb);
    free(ref);
    free(got);
    dg_graph_free(w.g);
}

/* Every cross-stream edge u -> v is covered by a wait of v's stream, at or
 * before v, on a node of u's stream at or after u; no stream waits twice
 * for the same other-stream prefix; and each comm group has a device stream
 * of its own (the DP all-reduces and the TP all-gathers here). */
static void test_waits_cover_edges(void **state) {
    (void)state;
    wide w;
    build_wide(&w, 8, 0);
    dg_err err = {{0}};
    dg_sched_plan *p = dg_sched_plan_new(w.g, NULL, &err);
    assert_non_null(p);
    dg_comm *self = dg_comm_self_new(), *dp = dg_comm_self_new(), *tp = dg_comm_self_new();
    dg_comm *groups[DG_AXIS_COUNT];
    for (int a = 0; a < DG_AXIS_COUNT; a++) groups[a] = self;
    groups[DG_AXIS_DP] = dp, groups[DG_AXIS_TP] = tp;
    dg_device_step ds;
    dg_device_step_init(&ds, p, groups, DG_DEVICE_MAX_STREAMS);
    assert_int_equal(ds.n_streams, 3);
    int ns = ds.n_streams;
    for (int v = 0; v < p->n_nodes; v++) {
        const dg_node *n = &w.g->nodes[v];
        if (n->op->comm == DG_COMM_ALL_REDUCE || n->op->comm == DG_COMM_ALL_GATHER)
            assert_int_equal(ds.stream[v], 1 + (n->op->comm != w.g->nodes[p->seq[DG_STREAM_COMM][0]].op->comm));
        else
            assert_int_equal(ds.stream[v], DG_STREAM_COMPUTE);
    }
    int cross = 0;
    for (int u = 0; u < p->n_nodes; u++)
        for (int e = p->succ_off[u]; e < p->succ_off[u + 1]; e++) {
            int v = p->succ[e], su = ds.stream[u], sv = ds.stream[v];
            if (su == sv) continue;
            cross++;
            int covered = 0;
            for (int k = 0; k <= p->pos[v] && !covered; k++) {
                int x = p->order[k];
                int y = ds.stream[x] == sv ? ds.wait_on[x * ns + su] : -1;
                covered = y >= 0 && p->pos[y] >= p->pos[u];
            }
            if (!covered) fail_msg("edge %d -> %d crosses streams without a wait", u, v);
        }
    assert_true(cross > 0);
    assert_true(ds.n_waits > 0 && ds.n_waits <= cross);
    int last[DG_DEVICE_MAX_STREAMS][DG_DEVICE_MAX_STREAMS];
    memset(last, -1, sizeof last);
    for (int k = 0; k < p->n_nodes; k++) {
        int v = p->order[k];
        for (int o = 0; o < ns; o++) {
            int y = ds.wait_on[v * ns + o];
            if (y < 0) continue;
            assert_true(ds.record[y]);                     /* what is waited for is recorded */
            assert_true(p->pos[y] > last[ds.stream[v]][o]); /* never a wait already implied */
            last[ds.stream[v]][o] = p->pos[y];
        }
    }
    dg_device_step_free(&ds);
    /* A device with two streams folds every group into its one comm stream. */
    dg_device_step_init(&ds, p, groups, 2);
    assert_int_equal(ds.n_streams, 2);
    dg_device_step_free(&ds);
    dg_comm_free(self);
    dg_comm_free(dp);
    dg_comm_free(tp);
    dg_sched_plan_free(p);
    dg_graph_free(w.g);
}

/* The runtime with distinct DP and TP groups: three device streams, the
 * CPU runtime's results. */
static void test_runtime_comm_streams(void **state) {
    (void)state;
    wide w;
    build_wide(&w, 6, 20);
    size_t nb = kept_bytes(&w) * 3;
    char *ref = malloc(nb), *got = malloc(nb);
    run_on(&w, 2, -1, 3, 1, ref);
    dg_comm *dp = dg_comm_self_new(), *tp = dg_comm_self_new();
    g_groups[DG_AXIS_DP] = dp, g_groups[DG_AXIS_TP] = tp;
    run_on(&w, 2, 300, 3, 1, got);
    g_groups[DG_AXIS_DP] = g_groups[DG_AXIS_TP] = NULL;
    assert_memory_equal(ref, got, nb);
    dg_comm_free(dp);
    dg_comm_free(tp);
    free(ref);
    free(got);
    dg_graph_free(w.g);
}

static void test_failure_and_refusal(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("bad");
    int x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(4, 4));
    int y = t_mix(g, &x, 1, 0, "ok");
    int z = dg_graph_add(g, &t_op_fail, NULL, &y, 1, NULL, "boom");
    t_mix(g, &z, 1, 0, "after");
    dg_err err = {{0}};
    dg_sched_plan *p = dg_sched_plan_new(g, NULL, &err);
    int delay = 50;
    dg_runtime_opts ro = {.compute_threads = 2, .make_device = make_emu, .make_device_arg = &delay};
    dg_runtime *rt = dg_runtime_new(&ro, &err);
    assert_string_equal(dg_runtime_device(rt), "emulated");
    assert_int_equal(dg_sched_run(p, rt, NULL, &err), DG_EINPUT);
    assert_non_null(strstr(err.msg, "boom"));

    wide w;
    build_wide(&w, 2, 0);
    dg_sched_plan *p2 = dg_sched_plan_new(w.g, NULL, &err);
    assert_int_equal(dg_sched_run(p2, rt, NULL, &err), DG_OK);

    /* an op whose kernel the device lacks: refused at bind, naming it */
    static dg_op_def hostless;
    hostless = t_op_mix;
    hostless.name = "t_hostless";
    hostless.kernel = NULL;
    dg_graph *g3 = dg_graph_new("hostless");
    int a = dg_input_new(g3, "a", DG_F32, 2, DG_SHAPE(4, 4));
    dg_graph_add(g3, &hostless, NULL, &a, 1, NULL, "needs_host");
    dg_sched_plan *p3 = dg_sched_plan_new(g3, NULL, &err);
    assert_non_null(p3);
    assert_int_equal(dg_sched_run(p3, rt, NULL, &err), DG_EINPUT);
    assert_non_null(strstr(err.msg, "t_hostless"));
    assert_non_null(strstr(err.msg, "emulated"));

    dg_runtime_free(rt);
    dg_sched_plan_free(p);
    dg_sched_plan_free(p2);
    dg_sched_plan_free(p3);
    dg_graph_free(g);
    dg_graph_free(g3);
    dg_graph_free(w.g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_events_order_streams),
        cmocka_unit_test(test_waits_cover_edges),
        cmocka_unit_test(test_runtime_bitwise),
        cmocka_unit_test(test_runtime_comm_streams),
        cmocka_unit_test(test_failure_and_refusal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
