/* test_ep_a2av.c — the all_to_all_v graph op under mpirun -np 2.
 *
 *  1. forward: each rank sends a different number of rows per (rank,
 *     chunk) with the counts exchanged in the graph (all_to_all of the
 *     counts); y holds exactly the rows sent to it, grouped by source rank,
 *     and zeros past them; junk rows past what x sends are ignored.
 *  2. backward (gradcheck-style): with loss = sum(y * r), autodiff's dx must
 *     be the forward's transpose applied to r: dx[q] = r[row where x[q]
 *     landed] on the peer, zero for rows not sent; and the adjoint identity
 *     sum_ranks <y, r> == sum_ranks <x, dx> holds;
 *  3. a static bound that is too small fails with the node's name.
 * Plain checks; exits non-zero on any mismatch. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "dg_autodiff.h"
#include "dg_collective.h"
#include "dg_collective_v.h"
#include "dg_comm_mpi.h"
#include "dg_cpu_gemm.h"
#include "dg_op_basic.h"
#include "dg_sched.h"

static int failures, rank;
#include "dg_test_mpi.h"

enum { P = 2, G = 2, N = 6, M = 8, W = 3 };

/* send counts of rank s, in (destination, chunk) order */
static const int32_t SEND[P][P * G] = {{1, 2, 0, 3}, {2, 0, 1, 1}};

static float xval(int src, int row, int c) { return (float)(src * 100 + row * 10 + c); }
static float rval(int dst, int row, int c) { return (float)(0.5 + dst * 7 + row * 3 + c * 0.25); }

/* Rows rank s sends to rank d: its offset in s's x and count. */
static void sent(int s, int d, int *off, int *cnt) {
    *off = 0;
    for (int j = 0; j < d; j++) *off += SEND[s][j * G] + SEND[s][j * G + 1];
    *cnt = SEND[s][d * G] + SEND[s][d * G + 1];
}

static void test_graph(dg_comm *world) {
    dg_err err = {{0}};
    dg_graph *g = dg_graph_new("a2av");
    int x = dg_param_new(g, "x", 2, DG_SHAPE(N, W));
    int sc = dg_input_new(g, "send_counts", DG_I32, 1, DG_SHAPE(P * G));
    int r = dg_input_new(g, "r", DG_F32, 2, DG_SHAPE(M, W));
    int rc = dg_all_to_all(g, sc, DG_AXIS_EP, P, 0, 0);
    int y = dg_all_to_all_v(g, x, sc, rc, DG_AXIS_EP, P, M);
    int loss = dg_sum(g, dg_mul(g, y, r));
    CHECK(g->status == DG_OK);
    CHECK(dg_autodiff(g, loss, dg_ops_autodiff(), NULL, &err) == DG_OK);
    int dx = g->tensors[x].grad;
    CHECK(dx >= 0);
    int keep[] = {y, rc, loss};
    dg_sched_opts so = {.keep = keep, .n_keep = 3};
    dg_sched_plan *p = dg_sched_plan_new(g, &so, &err);
    CHECK(p != NULL);
    dg_runtime_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.compute_threads = 1;
    ro.no_pin = 1;
    ro.rank = rank;
    ro.groups[DG_AXIS_EP] = world;
    dg_runtime *rt = dg_runtime_new(&ro, &err);
    CHECK(dg_runtime_bind(rt, p, &err) == DG_OK);
    float *xv = dg_runtime_ptr(rt, x), *rv = dg_runtime_ptr(rt, r);
    int32_t *scv = dg_runtime_ptr(rt, sc);
    int n_sent = 0;
    for (int i = 0; i < P * G; i++) scv[i] = SEND[rank][i], n_sent += SEND[rank][i];
    for (int q = 0; q < N; q++)
        for (int c = 0; c < W; c++) xv[q * W + c] = q < n_sent ? xval(rank, q, c) : -999.0f;
    for (int q = 0; q < M; q++)
        for (int c = 0; c < W; c++) rv[q * W + c] = rval(rank, q, c);
    for (int step = 0; step < 2; step++) {
        int st = dg_sched_run(p, rt, NULL, &err);
        if (st != DG_OK) fprintf(stderr, "rank %d: %s\n", rank, err.msg);
        CHECK(st == DG_OK);
        /* 1. forward */
        const int32_t *rcv = dg_runtime_ptr(rt, rc);
        for (int s = 0; s < P; s++)
            for (int e = 0; e < G; e++) CHECK(rcv[s * G + e] == SEND[s][rank * G + e]);
        const float *yv = dg_runtime_ptr(rt, y);
        int pos = 0;
        for (int s = 0; s < P; s++) {
            int off, cnt;
            sent(s, rank, &off, &cnt);
            for (int q = 0; q < cnt; q++, pos++)
                for (int c = 0; c < W; c++) CHECK(yv[pos * W + c] == xval(s, off + q, c));
        }
        for (; pos < M; pos++)
            for (int c = 0; c < W; c++) CHECK(yv[pos * W + c] == 0.0f);
        /* 2. backward: dx rows are r's rows at the landing positions */
        const float *dxv = dg_runtime_ptr(rt, dx);
        for (int d = 0; d < P; d++) {
            int off, cnt, land = 0; /* where rank `rank`'s rows start in d's y */
            sent(rank, d, &off, &cnt);
            for (int s = 0; s < rank; s++) {
                int o2, c2;
                sent(s, d, &o2, &c2);
                land += c2;
            }
            for (int q = 0; q < cnt; q++)
                for (int c = 0; c < W; c++) CHECK(dxv[(off + q) * W + c] == rval(d, land + q, c));
        }
        for (int q = n_sent; q < N; q++)
            for (int c = 0; c < W; c++) CHECK(dxv[q * W + c] == 0.0f);
        double dots[2] = {0, 0}, tot[2];
        for (int i = 0; i < M * W; i++) dots[0] += (double)yv[i] * rv[i];
        for (int i = 0; i < n_sent * W; i++) dots[1] += (double)xv[i] * dxv[i];
        MPI_Allreduce(dots, tot, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        CHECK(fabs(tot[0] - tot[1]) <= 1e-9 * fabs(tot[0]));
        CHECK(fabs(*(float *)dg_runtime_ptr(rt, loss) - dots[0]) <= 1e-4 * fabs(dots[0]));
        if (rank == 0 && step == 0)
            printf("a2av: <Ax, r> = %.6f, <x, A^T r> = %.6f\n", tot[0], tot[1]);
    }
    dg_runtime_free(rt);
    dg_sched_plan_free(p);
    dg_graph_free(g);

    /* a bound too small is an error naming the node, never a truncation */
    dg_graph *g2 = dg_graph_new("a2av_small");
    int x2 = dg_input_new(g2, "x", DG_F32, 2, DG_SHAPE(N, W));
    int sc2 = dg_input_new(g2, "send_counts", DG_I32, 1, DG_SHAPE(P * G));
    int rc2 = dg_all_to_all(g2, sc2, DG_AXIS_EP, P, 0, 0);
    int y2 = dg_all_to_all_v(g2, x2, sc2, rc2, DG_AXIS_EP, P, 1);
    (void)y2;
    dg_sched_plan *p2 = dg_sched_plan_new(g2, NULL, &err);
    dg_runtime *rt2 = dg_runtime_new(&ro, &err);
    CHECK(dg_runtime_bind(rt2, p2, &err) == DG_OK);
    int32_t *s2 = dg_runtime_ptr(rt2, sc2);
    for (int i = 0; i < P * G; i++) s2[i] = 1; /* 2 rows from each rank, bound 1 */
    dg_err e2 = {{0}};
    CHECK(dg_sched_run(p2, rt2, NULL, &e2) != DG_OK);
    CHECK(strstr(e2.msg, "all_to_all_v") != NULL);
    if (rank == 0) printf("a2av: small bound -> %s\n", e2.msg);
    dg_runtime_free(rt2);
    dg_sched_plan_free(p2);
    dg_graph_free(g2);
}

int main(int argc, char **argv) {
    int provided, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != P) {
        fprintf(stderr, "run with -np %d\n", P);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    dg_cpu_init();
    dg_err err = {{0}};
    dg_comm *world = dg_comm_mpi_new(MPI_COMM_WORLD, &err);
    test_graph(world);
    dg_comm_free(world);
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("ep a2av: %s (%d failed checks)\n", total ? "FAIL" : "OK", total);
    MPI_Finalize();
    return total ? 1 : 0;
}
