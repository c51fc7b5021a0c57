/* test_emulate_link.c — link emulation (sched/dg_comm_emulate.h) under
 * mpirun -np 2:
 *  1. the --emulate-link parser: good specs give the links, malformed ones
 *     DG_EINPUT naming the flag and the word;
 *  2. the alpha-beta models against hand-computed figures, and the
 *     planner's cost model with an emulated axis's link;
 *  3. each operation through the wrapper moves the right data and takes at
 *     least its modelled time, and a long wait sleeps (the thread's CPU time
 *     stays well under the wall time) instead of spinning;
 *  4. a group of one (the self backend) takes no modelled time.
 * Plain checks (dg_test_mpi.h): every rank checks its own results. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "dg_comm_emulate.h"
#include "dg_comm_mpi.h"
#include "dg_collective.h"
#include "dg_prio.h"

static int rank, failures;
#include "dg_test_mpi.h"

static double now(clockid_t id) {
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void test_parse(void) {
    dg_link_spec s;
    dg_err err = {{0}};
    CHECK(dg_link_spec_parse("10,10", "--emulate-link", &s, &err) == DG_OK);
    for (int a = DG_AXIS_NONE + 1; a < DG_AXIS_COUNT; a++) CHECK(s.axis[a].gbps == 10 && s.axis[a].usec == 10);
    CHECK(s.axis[DG_AXIS_NONE].gbps == 0);
    CHECK(dg_link_spec_parse("tp=400,2 ep=25,10 dp=12.5,0", "--emulate-link", &s, &err) == DG_OK);
    CHECK(s.axis[DG_AXIS_TP].gbps == 400 && s.axis[DG_AXIS_TP].usec == 2);
    CHECK(s.axis[DG_AXIS_EP].gbps == 25 && s.axis[DG_AXIS_EP].usec == 10);
    CHECK(s.axis[DG_AXIS_DP].gbps == 12.5 && s.axis[DG_AXIS_DP].usec == 0);
    CHECK(s.axis[DG_AXIS_EDP].gbps == 12.5); /* edp follows dp */
    CHECK(s.axis[DG_AXIS_PP].gbps == 0 && s.axis[DG_AXIS_CP].gbps == 0);
    CHECK(dg_link_spec_any(&s));
    /* a bare word for every axis, then an override; an explicit edp stays */
    CHECK(dg_link_spec_parse("5,1 tp=100,1 edp=2,3 dp=7,7", "--emulate-link", &s, &err) == DG_OK);
    CHECK(s.axis[DG_AXIS_PP].gbps == 5 && s.axis[DG_AXIS_TP].gbps == 100 && s.axis[DG_AXIS_EDP].gbps == 2 &&
          s.axis[DG_AXIS_DP].gbps == 7);
    const char *bad[] = {"", "10", "10,", ",10", "0,10", "-1,10", "10,-1", "10,10x", "xx=10,10",
                         "tp=10", "tp=", "tp=10,10,", "10;10", "nan,1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        memset(&err, 0, sizeof err);
        int st = dg_link_spec_parse(bad[i], "--emulate-link", &s, &err);
        if (st != DG_EINPUT || !strstr(err.msg, "--emulate-link") || strchr(err.msg, '\n'))
            fprintf(stderr, "rank %d: spec '%s' gave %d: %s\n", rank, bad[i], st, err.msg);
        CHECK(st == DG_EINPUT && strstr(err.msg, "--emulate-link") && !strchr(err.msg, '\n'));
    }
}

static int near(double a, double b) { return fabs(a - b) <= 1e-12 + 1e-9 * fabs(b); }

static void test_models(void) {
    dg_link l = {10, 10}; /* 1e10 B/s, 1e-5 s */
    double n = 1e8;
    CHECK(near(dg_link_time(&l, DG_LINK_ALL_REDUCE, 4, n), 2 * 0.75 * 1e-2 + 6e-5));
    CHECK(near(dg_link_time(&l, DG_LINK_REDUCE_SCATTER, 4, n), 0.75 * 1e-2 + 3e-5));
    CHECK(near(dg_link_time(&l, DG_LINK_ALL_GATHER, 2, n), 0.5 * 1e-2 + 1e-5));
    CHECK(near(dg_link_time(&l, DG_LINK_ALL_TO_ALL, 8, n), 1e-2 + 7e-5));
    CHECK(near(dg_link_time(&l, DG_LINK_P2P, 2, n), 1e-2 + 1e-5));
    CHECK(dg_link_time(&l, DG_LINK_ALL_REDUCE, 1, n) == 0);
    dg_link off = {0, 0};
    CHECK(dg_link_time(&off, DG_LINK_ALL_REDUCE, 4, n) == 0);
}

/* The planner's cost model under emulation: a collective on an emulated
 * axis costs its link's time, one on another axis the default. */
static void test_cost_model(void) {
    dg_link_spec s;
    dg_err err = {{0}};
    CHECK(dg_link_spec_parse("ep=0.05,10", "--emulate-link", &s, &err) == DG_OK);
    dg_cost_model m, d = dg_cost_model_default();
    dg_link_cost_model(&s, &m);
    CHECK(m.axis_bytes_per_s[DG_AXIS_EP] == 0.05e9 && near(m.axis_latency_s[DG_AXIS_EP], 1e-5));
    CHECK(m.axis_bytes_per_s[DG_AXIS_DP] == 0 && m.comm_bytes_per_s == d.comm_bytes_per_s);
    dg_graph *g = dg_graph_new("cost");
    int x = dg_input_new(g, "x", DG_F32, 1, DG_SHAPE(1 << 16));
    int ep = g->tensors[dg_all_reduce(g, x, DG_AXIS_EP, 2)].producer;
    int dp = g->tensors[dg_all_reduce(g, x, DG_AXIS_DP, 2)].producer;
    dg_cost c = {0, 0};
    g->nodes[ep].op->cost(g, &g->nodes[ep], &c);
    CHECK(c.bytes > 0);
    CHECK(near(dg_prio_node_time(&m, g, &g->nodes[ep]), m.task_s + 1e-5 + c.bytes / 0.05e9));
    CHECK(near(dg_prio_node_time(&m, g, &g->nodes[dp]), dg_prio_node_time(&d, g, &g->nodes[dp])));
    dg_graph_free(g);
}

/* Start-and-wait through the wrapper; returns wall seconds, *cpu gets the
 * calling thread's CPU seconds. */
typedef enum { AR, AG, RS, A2A, P2P } which;

static double timed(dg_comm *c, which w, float *send, float *recv, int64_t n, double *cpu) {
    dg_err err = {{0}};
    dg_comm_req req = {0}, req2 = {0};
    int64_t sc[2] = {n / 2, n / 2}, sd[2] = {0, n / 2};
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_THREAD_CPUTIME_ID);
    int st = DG_OK;
    switch (w) {
    case AR: st = c->ops->all_reduce(c, send, recv, n, DG_F32, &req, &err); break;
    case AG: st = c->ops->all_gather(c, send, recv, n, DG_F32, &req, &err); break;
    case RS: st = c->ops->reduce_scatter(c, send, recv, n / 2, DG_F32, &req, &err); break;
    case A2A: st = c->ops->all_to_allv(c, send, sc, sd, recv, sc, sd, DG_F32, &req, &err); break;
    case P2P: /* a ring of two: each rank sends to and receives from the other */
        st = c->ops->send(c, send, n, DG_F32, 1 - rank, 7, &req2, &err);
        if (st == DG_OK) st = c->ops->recv(c, recv, n, DG_F32, 1 - rank, 7, &req, &err);
        break;
    }
    if (st == DG_OK) st = c->ops->wait(c, &req, &err);
    if (st == DG_OK && w == P2P) {
        int done = 0;
        while (st == DG_OK && !done) st = c->ops->test(c, &req2, &done, &err);
    }
    CHECK(st == DG_OK);
    *cpu = now(CLOCK_THREAD_CPUTIME_ID) - c0;
    return now(CLOCK_MONOTONIC) - t0;
}

static void test_timing(dg_comm *world) {
    enum { N = 1 << 20 }; /* 4 MB of f32 */
    static float send[N], recv[N];
    dg_link l = {0.1, 2000}; /* 100 MB/s, 2 ms: every model here is >= 12 ms */
    dg_comm *c = dg_comm_emulate_new(world, l);
    CHECK(c->rank == rank && c->size == 2);
    double bytes = 4.0 * N;
    struct {
        which w;
        dg_link_op op;
        double bytes;
        const char *name;
    } cases[] = {{AR, DG_LINK_ALL_REDUCE, bytes, "all_reduce"},
                 {AG, DG_LINK_ALL_GATHER, bytes, "all_gather"}, /* the output: N/2 per rank x 2 */
                 {RS, DG_LINK_REDUCE_SCATTER, bytes, "reduce_scatter"},
                 {A2A, DG_LINK_ALL_TO_ALL, bytes / 2, "all_to_allv"},
                 {P2P, DG_LINK_P2P, bytes, "send/recv"}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        for (int i = 0; i < N; i++) send[i] = (float)(rank * 1000 + i % 977);
        memset(recv, 0, sizeof recv);
        int64_t n = cases[k].w == AG ? N / 2 : N;
        double cpu = 0, t = timed(c, cases[k].w, send, recv, n, &cpu);
        double model = dg_link_time(&l, cases[k].op, 2, cases[k].bytes);
        if (rank == 0)
            printf("%-15s modelled %.2f ms, took %.2f ms, CPU %.2f ms\n", cases[k].name, 1e3 * model, 1e3 * t,
                   1e3 * cpu);
        CHECK(model >= 0.012 && t >= model);
        CHECK(cpu < 0.5 * t); /* slept, did not spin */
        /* the data moved as without emulation */
        int ok = 1;
        for (int i = 0; i < N && ok; i++) {
            float a = (float)(i % 977), other = (float)((1 - rank) * 1000 + i % 977);
            float want = 0;
            switch (cases[k].w) {
            case AR: want = 1000 + 2 * a; break;
            case AG: want = i < N / 2 ? (float)(i % 977) : (float)(1000 + (i - N / 2) % 977); break;
            case RS: want = i < N / 2 ? 1000 + 2 * (float)((rank * (N / 2) + i) % 977) : 0; break;
            case A2A: {
                /* block j of recv comes from rank j's block `rank` */
                int j = i / (N / 2), off = rank * (N / 2) + i % (N / 2);
                want = (float)(j * 1000 + off % 977);
                break;
            }
            case P2P: want = other; break;
            }
            ok = recv[i] == want;
        }
        CHECK(ok);
    }
    dg_comm_free(c); /* frees world too */
}

static void test_self(void) {
    dg_link l = {0.001, 100000}; /* would be 100 ms per call on two ranks */
    dg_comm *c = dg_comm_emulate_new(dg_comm_self_new(), l);
    float a[4] = {1, 2, 3, 4}, b[4] = {0};
    dg_err err = {{0}};
    dg_comm_req req = {0};
    double t0 = now(CLOCK_MONOTONIC);
    CHECK(c->ops->all_reduce(c, a, b, 4, DG_F32, &req, &err) == DG_OK);
    CHECK(c->ops->wait(c, &req, &err) == DG_OK);
    CHECK(now(CLOCK_MONOTONIC) - t0 < 0.05 && b[3] == 4);
    dg_comm_free(c);
}

int main(int argc, char **argv) {
    int provided, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        fprintf(stderr, "run with -np 2\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    dg_err err = {{0}};
    test_parse();
    test_models();
    test_cost_model();
    test_self();
    dg_comm *world = dg_comm_mpi_new(MPI_COMM_WORLD, &err);
    CHECK(world != NULL);
    if (world) test_timing(world);
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("%s: %d failure(s)\n", total ? "FAIL" : "ok", total);
    MPI_Finalize();
    return total != 0;
}
