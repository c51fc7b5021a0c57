/* test_sched_exec.c — the executor: determinism across worker counts and
 * runs, agreement with the serial reference, dependency order, priorities,
 * collectives through the self comm, error propagation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "dg_buffers.h"
#include "dg_collective.h"
#include "dg_exec_serial.h"
#include "dg_sched.h"
#include "sched_test_ops.h"

#define R 48
#define C 40

typedef struct wide {
    dg_graph *g;
    int x, p[4], loss;
    int keep[64];
    int n_keep;
} wide;

/* L layers of a diamond: two branches from h, one of them through an
 * all_reduce on the comm stream, a third from the first, joined into the
 * next h. With comm = 0 the all_reduce is left out (the serial reference
 * cannot run collectives). */
static void build_wide(wide *w, int layers, int jitter, int comm) {
    memset(w, 0, sizeof *w);
    dg_graph *g = w->g = dg_graph_new("wide");
    w->x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(R, C));
    for (int j = 0; j < 4; j++) {
        char nm[16];
        snprintf(nm, sizeof nm, "p%d", j);
        w->p[j] = dg_param_new(g, nm, 2, DG_SHAPE(R, C));
    }
    int h = w->x;
    for (int l = 0; l < layers; l++) {
        dg_graph_set_layer(g, l);
        int b0 = t_mix(g, (int[]){h, w->p[0]}, 2, jitter, NULL);
        int b1 = t_mix(g, (int[]){h, w->p[1]}, 2, jitter, NULL);
        int b2 = t_mix(g, (int[]){b0, w->p[2]}, 2, jitter, NULL);
        int c = comm ? dg_all_reduce(g, b1, DG_AXIS_DP, 1) : t_mix(g, (int[]){b1}, 1, jitter, NULL);
        int c2 = comm ? dg_all_gather(g, b2, DG_AXIS_TP, 1, 1) : b2;
        h = t_mix(g, (int[]){c2, c, b1, h}, 4, jitter, NULL);
        w->keep[w->n_keep++] = h;
    }
    dg_graph_set_layer(g, -1);
    w->loss = t_sum(g, h, "loss");
    w->keep[w->n_keep++] = w->loss;
    assert_int_equal(g->status, DG_OK);
}

static void fill_leaves(const dg_graph *g, void *(*ptr)(void *, int), void *ctx) {
    for (int t = 0; t < g->n_tensors; t++)
        if (g->tensors[t].producer < 0) t_fill(ptr(ctx, t), dg_tensor_numel(&g->tensors[t]), (unsigned)t + 1);
}

static void *rt_ptr(void *rt, int t) { return dg_runtime_ptr(rt, t); }
static void *buf_ptr(void *b, int t) { return ((dg_buffers *)b)->ptr[t]; }

/* Run w once on a fresh runtime with `threads` workers `runs` times; copy
 * the kept tensors of every run into out[run]. */
static void run_on(const wide *w, const dg_sched_opts *o, int threads, int runs, float **out) {
    dg_err err = {{0}};
    dg_sched_plan *p = dg_sched_plan_new(w->g, o, &err);
    assert_non_null(p);
    dg_runtime_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.compute_threads = threads;
    dg_runtime *rt = dg_runtime_new(&ro, &err);
    assert_non_null(rt);
    assert_int_equal(dg_runtime_threads(rt), threads);
    assert_int_equal(dg_runtime_bind(rt, p, &err), DG_OK);
    fill_leaves(w->g, rt_ptr, rt);
    for (int r = 0; r < runs; r++) {
        int st = dg_sched_run(p, rt, NULL, &err);
        if (st != DG_OK) fail_msg("run failed: %s", err.msg);
        size_t o_ = 0;
        for (int k = 0; k < w->n_keep; k++) {
            size_t b = dg_tensor_bytes(dg_Tc(w->g, w->keep[k]));
            memcpy((char *)out[r] + o_, dg_runtime_ptr(rt, w->keep[k]), b);
            o_ += b;
        }
    }
    dg_runtime_free(rt);
    dg_sched_plan_free(p);
}

static size_t kept_bytes(const wide *w) {
    size_t n = 0;
    for (int k = 0; k < w->n_keep; k++) n += dg_tensor_bytes(dg_Tc(w->g, w->keep[k]));
    return n;
}

/* Acceptance 1 (on test ops): bitwise identical with 1 and 2 workers and
 * over 5 repeated runs, with timing jitter, with the memory plan on. */
static void test_bitwise_workers_and_runs(void **state) {
    (void)state;
    wide w;
    build_wide(&w, 8, 40, 1);
    dg_sched_opts o = {.keep = w.keep, .n_keep = w.n_keep};
    size_t nb = kept_bytes(&w);
    float *ref[1] = {malloc(nb)};
    float *runs[5];
    for (int r = 0; r < 5; r++) runs[r] = malloc(nb);
    run_on(&w, &o, 1, 1, ref);
    run_on(&w, &o, 2, 5, runs);
    for (int r = 0; r < 5; r++) assert_memory_equal(ref[0], runs[r], nb);
    run_on(&w, &o, 3, 2, runs); /* more workers than cores */
    assert_memory_equal(ref[0], runs[0], nb);
    assert_memory_equal(ref[0], runs[1], nb);
    /* and the same as with every tensor in its own buffer */
    dg_sched_opts o2 = o;
    o2.no_memory_plan = 1;
    run_on(&w, &o2, 2, 1, runs);
    assert_memory_equal(ref[0], runs[0], nb);
    free(ref[0]);
    for (int r = 0; r < 5; r++) free(runs[r]);
    dg_graph_free(w.g);
}

/* The planned, parallel executor gives exactly what the serial reference
 * (dg_run_serial on per-tensor buffers) gives. */
static void test_matches_serial_reference(void **state) {
    (void)state;
    wide w;
    build_wide(&w, 6, 20, 0);
    dg_sched_opts o = {.keep = w.keep, .n_keep = w.n_keep};
    size_t nb = kept_bytes(&w);
    float *got[1] = {malloc(nb)};
    run_on(&w, &o, 2, 1, got);
    dg_buffers b;
    dg_buffers_alloc(w.g, &b);
    fill_leaves(w.g, buf_ptr, &b);
    dg_err err = {{0}};
    assert_int_equal(dg_run_serial(w.g, NULL, &b, NULL, &err), DG_OK);
    size_t o_ = 0;
    for (int k = 0; k < w.n_keep; k++) {
        size_t sz = dg_tensor_bytes(dg_Tc(w.g, w.keep[k]));
        assert_memory_equal((char *)got[0] + o_, b.ptr[w.keep[k]], sz);
        o_ += sz;
    }
    dg_buffers_free(&b);
    free(got[0]);
    dg_graph_free(w.g);
}

/* Every data edge between compute nodes: the producer ended before the
 * consumer started (global stamps from the kernels). */
static void test_dependency_order(void **state) {
    (void)state;
    wide w;
    build_wide(&w, 10, 30, 1);
    dg_sched_opts o = {.keep = w.keep, .n_keep = w.n_keep};
    float *out[3];
    size_t nb = kept_bytes(&w);
    for (int r = 0; r < 3; r++) out[r] = malloc(nb);
    t_ops_reset_stamps();
    run_on(&w, &o, 2, 1, out);
    const dg_graph *g = w.g;
    int checked = 0;
    for (int v = 0; v < g->n_nodes; v++) {
        const dg_node *n = &g->nodes[v];
        if (n->op->comm != DG_COMM_NONE) continue;
        assert_true(t_ops_start[v] > 0 && t_ops_end[v] > t_ops_start[v]);
        for (int i = 0; i < n->n_in; i++) {
            int u = g->tensors[n->in[i]].producer;
            if (u < 0) continue;
            /* through a collective: its own producer */
            if (g->nodes[u].op->comm != DG_COMM_NONE) u = g->tensors[g->nodes[u].in[0]].producer;
            if (u < 0) continue;
            assert_true(t_ops_end[u] < t_ops_start[v]);
            checked++;
        }
    }
    assert_true(checked > 30);
    for (int r = 0; r < 3; r++) free(out[r]);
    dg_graph_free(w.g);
}

/* With one worker and all tasks ready at once, the compute stream runs them
 * in the order of the priorities a pass set; without, by bottom level. */
static void test_priorities(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("fan");
    int x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(8, 8));
    int leaf[8];
    for (int j = 0; j < 8; j++) leaf[j] = t_mix(g, &x, 1, 0, NULL);
    /* node 3 heads a longer chain: the largest bottom level */
    int tail = t_mix(g, &leaf[3], 1, 0, NULL);
    tail = t_mix(g, &tail, 1, 0, NULL);
    (void)tail;
    dg_err err = {{0}};
    dg_sched_plan *p = dg_sched_plan_new(g, NULL, &err);
    assert_non_null(p);
    assert_true(p->bottom[3] > p->bottom[0]);
    assert_int_equal(p->order[0], 3);
    dg_runtime_opts ro = {.compute_threads = 1};
    dg_runtime *rt = dg_runtime_new(&ro, &err);
    t_ops_reset_stamps();
    assert_int_equal(dg_sched_run(p, rt, NULL, &err), DG_OK);
    for (int j = 0; j < 8; j++)
        if (j != 3) assert_true(t_ops_start[3] < t_ops_start[j]);
    dg_sched_plan_free(p);

    /* explicit priorities: reverse id order among the leaves */
    for (int j = 0; j < 8; j++) g->nodes[j].priority = 100 + j;
    p = dg_sched_plan_new(g, NULL, &err);
    t_ops_reset_stamps();
    assert_int_equal(dg_sched_run(p, rt, NULL, &err), DG_OK);
    for (int j = 0; j < 7; j++) assert_true(t_ops_start[j + 1] < t_ops_start[j]);
    dg_sched_plan_free(p);
    dg_runtime_free(rt);
    dg_graph_free(g);
}

/* Rule 2's lower tier (dg_prio.h): a task whose only reader feeds a
 * collective (a weight gradient read only by its bucket's pack) runs before
 * ready compute with a longer path, so the pack and its reduction are not
 * held back to the end of backward. */
static void test_compute_feeding_feeder_next(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("feed2");
    int x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(8, 8));
    int h = t_mix(g, &x, 1, 0, "long0");
    int ln = g->tensors[h].producer;
    for (int i = 1; i < 100; i++) h = t_mix(g, &h, 1, 0, NULL); /* longer than the all-reduce's latency */
    int gr = t_mix(g, &x, 1, 0, "grad");
    int pk = t_mix(g, &gr, 1, 0, "pack");
    int gn = g->tensors[gr].producer, pn = g->tensors[pk].producer;
    int c = dg_all_reduce(g, pk, DG_AXIS_DP, 2); /* over one rank it would move nothing: no tier */
    t_mix(g, (int[]){h, c}, 2, 0, "join");
    dg_err err = {{0}};
    dg_sched_plan *p = dg_sched_plan_new(g, NULL, &err);
    assert_non_null(p);
    assert_true(p->bottom[ln] > p->bottom[gn]);
    assert_int_equal(p->feeds[pn], 2);
    assert_int_equal(p->feeds[gn], 1);
    assert_int_equal(p->feeds[ln], 0);
    assert_true(p->rank[gn] < p->rank[ln]);
    assert_true(p->sim_end[pn] <= p->sim_start[ln]); /* the plan runs the pack first */
    dg_sched_plan_free(p);
    /* over a group of one the all-reduce is a local copy: the gradient
     * keeps its bottom-level place */
    g->nodes[g->tensors[c].producer].attrs.i[0] = 1;
    p = dg_sched_plan_new(g, NULL, &err);
    assert_non_null(p);
    assert_int_equal(p->feeds[gn], 0);
    dg_sched_plan_free(p);
    dg_graph_free(g);
}

/* The policy's rule 2 (dg_prio.h): compute whose output a collective reads
 * runs before ready compute with a longer path to the end, so the transfer
 * starts early and runs beside that compute. */
static void test_compute_feeding_comm_first(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("feed");
    int x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(8, 8));
    int h = t_mix(g, &x, 1, 0, "long0");
    for (int i = 1; i < 4; i++) h = t_mix(g, &h, 1, 0, NULL);
    int f = t_mix(g, &x, 1, 0, "feeder");
    int fn = g->tensors[f].producer, ln = 0;
    int c = dg_all_reduce(g, f, DG_AXIS_DP, 1);
    t_mix(g, (int[]){h, c}, 2, 0, "join");
    dg_err err = {{0}};
    dg_sched_plan *p = dg_sched_plan_new(g, NULL, &err);
    assert_non_null(p);
    assert_true(p->bottom[ln] > p->bottom[fn]);
    assert_int_equal(p->feeds[fn], 2);
    assert_int_equal(p->feeds[ln], 0);
    assert_true(p->rank[fn] < p->rank[ln]);
    dg_runtime_opts ro = {.compute_threads = 1};
    dg_runtime *rt = dg_runtime_new(&ro, &err);
    t_ops_reset_stamps();
    assert_int_equal(dg_sched_run(p, rt, NULL, &err), DG_OK);
    assert_true(t_ops_end[fn] <= t_ops_start[ln]);
    dg_runtime_free(rt);
    dg_sched_plan_free(p);

    /* a cost model that is not one is refused */
    dg_cost_model m = dg_cost_model_default();
    m.comm_bytes_per_s = 0;
    dg_sched_opts o = {.cost = &m};
    assert_null(dg_sched_plan_new(g, &o, &err));
    assert_non_null(strstr(err.msg, "cost model"));
    dg_graph_free(g);
}

/* Issue 30: each group kind has an in-order comm lane of its own, so a DP
 * reduction in flight does not hold up a pipeline send. The all-reduce of x
 * (1 MiB) is ready at once and slow (a 1 GB/s dp link); the send (64
 * bytes) waits for a short
 * compute task. On one comm stream the send started after the all-reduce
 * ended (the step's virtual time was their sum); in the pp lane it starts
 * as soon as its input is ready, in the plan's simulated schedule and in the
 * executor. */
static void test_comm_lane_per_group_kind(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("lanes");
    int x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(1024, 256));
    int z = dg_input_new(g, "z", DG_F32, 2, DG_SHAPE(4, 4));
    int r = dg_all_reduce(g, x, DG_AXIS_DP, 2);
    int y = t_mix(g, &z, 1, 0, "act");
    int sn = dg_send(g, y, DG_AXIS_PP, 2, 1);
    t_sum(g, r, "use");
    assert_int_equal(g->status, DG_OK);
    int ar = g->tensors[r].producer;
    dg_cost_model m = dg_cost_model_default();
    m.axis_bytes_per_s[DG_AXIS_DP] = 1e9;
    m.axis_latency_s[DG_AXIS_DP] = m.comm_latency_s;
    dg_sched_opts o = {.cost = &m};
    dg_err err = {{0}};
    dg_sched_plan *p = dg_sched_plan_new(g, &o, &err);
    assert_non_null(p);
    assert_true(p->lane[ar] == 1 + DG_AXIS_DP && p->lane[sn] == 1 + DG_AXIS_PP);
    assert_true(p->lane[g->tensors[y].producer] == 0);
    assert_true(p->time[ar] > 10 * p->time[sn]);
    assert_true(p->sim_start[ar] < p->sim_start[sn]); /* the all-reduce went first */
    assert_true(p->sim_start[sn] < p->sim_end[ar]);   /* and the send did not wait for it */
    dg_sched_plan_free(p);
    dg_graph_free(g);
}

/* Ordering edges are dependencies like data edges: the plan, its simulated
 * schedule, the executor and the serial executor all obey them, across
 * streams too. The fan of 8 independent leaves (node 3 heads the longest
 * chain) is ordered 7 -> 6 -> ... -> 0, and the all_reduce of x must wait
 * for leaf 0. */
static void test_order_edges(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("ordered_fan");
    int x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(8, 8));
    int leaf[8];
    for (int j = 0; j < 8; j++) leaf[j] = t_mix(g, &x, 1, 0, NULL);
    int tail = t_mix(g, &leaf[3], 1, 0, NULL);
    t_mix(g, &tail, 1, 0, NULL);
    int ar = g->tensors[dg_all_reduce(g, x, DG_AXIS_DP, 1)].producer;
    for (int j = 7; j > 0; j--) dg_graph_add_order(g, j, j - 1);
    dg_graph_add_order(g, 0, ar);
    dg_graph_add_order(g, 4, 3); /* twice: counted once */
    dg_graph_add_order(g, 3, 8); /* parallel to the data edge leaf 3 -> tail: not counted */
    dg_err err = {{0}};
    dg_sched_plan *p = dg_sched_plan_new(g, NULL, &err);
    assert_non_null(p);
    assert_int_equal(p->n_order_edges, 8);
    for (int j = 7; j > 0; j--) {
        assert_true(p->pos[j] < p->pos[j - 1]);
        assert_true(p->sim_end[j] <= p->sim_start[j - 1]);
    }
    assert_true(p->sim_end[0] <= p->sim_start[ar]);
    dg_runtime_opts ro = {.compute_threads = 2};
    dg_runtime *rt = dg_runtime_new(&ro, &err);
    for (int rep = 0; rep < 3; rep++) {
        t_ops_reset_stamps();
        assert_int_equal(dg_sched_run(p, rt, NULL, &err), DG_OK);
        for (int j = 7; j > 0; j--) assert_true(t_ops_end[j] <= t_ops_start[j - 1]);
    }
    /* the serial executor's default order is the topological order over both kinds */
    g->n_nodes--; /* without the all_reduce (it has no CPU kernel): its edge is skipped */
    dg_buffers b;
    dg_buffers_alloc(g, &b);
    t_ops_reset_stamps();
    assert_int_equal(dg_run_serial(g, NULL, &b, NULL, &err), DG_OK);
    for (int j = 7; j > 0; j--) assert_true(t_ops_end[j] <= t_ops_start[j - 1]);
    dg_buffers_free(&b);
    g->n_nodes++;
    dg_sched_plan_free(p);
    dg_runtime_free(rt);
    dg_graph_free(g);
}

/* Collectives over a group of one are copies, including the permuting
 * paths (gather/scatter along an inner dim, all_to_all). */
static void test_self_collectives(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("coll");
    int x = dg_input_new(g, "x", DG_F32, 3, DG_SHAPE(4, 6, 5));
    int a = dg_all_reduce(g, x, DG_AXIS_TP, 1);
    int b = dg_all_gather(g, a, DG_AXIS_TP, 1, 1);
    int c = dg_reduce_scatter(g, b, DG_AXIS_TP, 1, 2);
    int d = dg_all_to_all(g, c, DG_AXIS_EP, 1, 1, 0);
    int e = dg_copy_to_group(g, d, DG_AXIS_TP, 1);
    /* send to self, then receive it (the self comm's mailbox) */
    int sn = dg_send(g, e, DG_AXIS_PP, 1, 1);
    g->nodes[sn].priority = 5;
    int r = dg_recv(g, DG_AXIS_PP, 1, 1, DG_F32, 3, DG_SHAPE(4, 6, 5));
    /* The send goes first, as dg_pass_pp orders its pairs: the pp lane is a
     * comm stream of its own, where the recv (no inputs) is ready at once. */
    dg_graph_add_order(g, sn, g->tensors[r].producer);
    assert_int_equal(g->status, DG_OK);
    dg_err err = {{0}};
    dg_sched_plan *p = dg_sched_plan_new(g, NULL, &err);
    assert_non_null(p);
    assert_int_equal(p->n_stream[DG_STREAM_COMM], 7);
    /* each group kind in a lane of its own: tp 4, ep 1, pp 2 */
    assert_int_equal(p->n_lane[1 + DG_AXIS_TP], 4);
    assert_int_equal(p->n_lane[1 + DG_AXIS_EP], 1);
    assert_int_equal(p->n_lane[1 + DG_AXIS_PP], 2);
    dg_runtime *rt = dg_runtime_new(NULL, &err);
    assert_int_equal(dg_runtime_bind(rt, p, &err), DG_OK);
    t_fill(dg_runtime_ptr(rt, x), 120, 7);
    assert_int_equal(dg_sched_run(p, rt, NULL, &err), DG_OK);
    assert_memory_equal(dg_runtime_ptr(rt, x), dg_runtime_ptr(rt, e), 120 * sizeof(float));
    assert_memory_equal(dg_runtime_ptr(rt, x), dg_runtime_ptr(rt, r), 120 * sizeof(float));
    dg_runtime_free(rt);
    dg_sched_plan_free(p);
    dg_graph_free(g);
}

/* A failing kernel: the step reports it by node, and the runtime still runs
 * the next plan. */
static void test_kernel_failure(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("bad");
    int x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(4, 4));
    int y = t_mix(g, &x, 1, 0, "ok");
    int z = dg_graph_add(g, &t_op_fail, NULL, &y, 1, NULL, "boom");
    t_mix(g, &z, 1, 0, "after");
    dg_err err = {{0}};
    dg_sched_plan *p = dg_sched_plan_new(g, NULL, &err);
    dg_runtime_opts ro = {.compute_threads = 2};
    dg_runtime *rt = dg_runtime_new(&ro, &err);
    assert_int_equal(dg_sched_run(p, rt, NULL, &err), DG_EINPUT);
    assert_non_null(strstr(err.msg, "boom"));

    wide w;
    build_wide(&w, 2, 0, 1);
    dg_sched_plan *p2 = dg_sched_plan_new(w.g, NULL, &err);
    assert_int_equal(dg_sched_run(p2, rt, NULL, &err), DG_OK);
    dg_sched_plan_free(p2);
    dg_graph_free(w.g);

    dg_runtime_free(rt);
    dg_sched_plan_free(p);
    dg_graph_free(g);
}

/* A compute op a pass moved to the comm stream runs there (one thread),
 * with the same result. */
static void test_compute_op_on_comm_stream(void **state) {
    (void)state;
    wide w;
    build_wide(&w, 4, 10, 1);
    dg_sched_opts o = {.keep = w.keep, .n_keep = w.n_keep};
    size_t nb = kept_bytes(&w);
    float *a[1] = {malloc(nb)}, *b[1] = {malloc(nb)};
    run_on(&w, &o, 2, 1, a);
    int moved = 0;
    for (int v = 0; v < w.g->n_nodes; v += 3)
        if (w.g->nodes[v].op->comm == DG_COMM_NONE) w.g->nodes[v].stream = DG_STREAM_COMM, moved++;
    assert_true(moved > 2);
    run_on(&w, &o, 2, 1, b);
    assert_memory_equal(a[0], b[0], nb);
    free(a[0]);
    free(b[0]);
    dg_graph_free(w.g);
}

static void test_empty_graph(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("empty");
    dg_err err = {{0}};
    dg_sched_plan *p = dg_sched_plan_new(g, NULL, &err);
    assert_non_null(p);
    dg_runtime *rt = dg_runtime_new(NULL, &err);
    dg_sched_stats st;
    assert_int_equal(dg_sched_run(p, rt, &st, &err), DG_OK);
    assert_int_equal(st.n_tasks, 0);
    dg_runtime_free(rt);
    dg_sched_plan_free(p);
    dg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bitwise_workers_and_runs),
        cmocka_unit_test(test_matches_serial_reference),
        cmocka_unit_test(test_dependency_order),
        cmocka_unit_test(test_priorities),
        cmocka_unit_test(test_order_edges),
        cmocka_unit_test(test_compute_feeding_comm_first),
        cmocka_unit_test(test_compute_feeding_feeder_next),
        cmocka_unit_test(test_self_collectives),
        cmocka_unit_test(test_comm_lane_per_group_kind),
        cmocka_unit_test(test_kernel_failure),
        cmocka_unit_test(test_compute_op_on_comm_stream),
        cmocka_unit_test(test_empty_graph),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
