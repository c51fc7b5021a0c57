/* test_sched_comm_mpi.c — the MPI comm backend under mpirun -np 2: every
 * collective node through dg_comm_run_node, then a whole step through the
 * scheduler with the comm stream on MPI. Plain asserts (not cmocka): each
 * rank checks its own results and exits non-zero on failure. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "dg_collective.h"
#include "dg_comm_mpi.h"
#include "dg_sched.h"
#include "sched_test_ops.h"

static int failures;
#include "dg_test_mpi.h"

static int rank;

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    int size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        fprintf(stderr, "run with -np 2\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    dg_err err = {{0}};
    dg_comm *world = dg_comm_mpi_new(MPI_COMM_WORLD, &err);
    CHECK(world && world->size == 2 && world->rank == rank);

    /* 1. a graph of every collective over a group of 2 */
    dg_graph *g = dg_graph_new("coll2");
    int x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(4, 6));
    int ar = dg_all_reduce(g, x, DG_AXIS_DP, 2);
    int ag = dg_all_gather(g, x, DG_AXIS_TP, 2, 1);             /* [4, 12] */
    int rs = dg_reduce_scatter(g, ag, DG_AXIS_TP, 2, 1);        /* [4, 6] = 2 x_rank */
    int a2a = dg_all_to_all(g, x, DG_AXIS_EP, 2, 0, 1);         /* [2, 12] */
    dg_send(g, x, DG_AXIS_PP, 2, 1);
    int rv = dg_recv(g, DG_AXIS_PP, 2, 1, DG_F32, 2, DG_SHAPE(4, 6));
    int y = t_mix(g, (int[]){ar, rs}, 2, 0, "mix");
    int loss = t_sum(g, y, "loss");
    CHECK(g->status == DG_OK);
    int keep[] = {ar, ag, rs, a2a, rv};
    dg_sched_opts so = {.keep = keep, .n_keep = 5};
    dg_sched_plan *p = dg_sched_plan_new(g, &so, &err);
    CHECK(p != NULL);
    dg_runtime_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.compute_threads = 1;
    ro.rank = rank;
    for (int a = 0; a < DG_AXIS_COUNT; a++) ro.groups[a] = world;
    dg_runtime *rt = dg_runtime_new(&ro, &err);
    dg_runtime_bind(rt, p, &err);
    float *xv = dg_runtime_ptr(rt, x);
    for (int i = 0; i < 24; i++) xv[i] = (float)(rank * 100 + i);
    float first_loss = 0;
    for (int step = 0; step < 3; step++) {
        int st = dg_sched_run(p, rt, NULL, &err);
        if (st != DG_OK) fprintf(stderr, "rank %d: %s\n", rank, err.msg);
        CHECK(st == DG_OK);
        const float *v;
        v = dg_runtime_ptr(rt, ar);
        for (int i = 0; i < 24; i++) CHECK(v[i] == (float)(100 + 2 * i));
        v = dg_runtime_ptr(rt, ag);
        for (int r = 0; r < 4; r++)
            for (int c = 0; c < 12; c++) CHECK(v[r * 12 + c] == (float)((c / 6) * 100 + r * 6 + c % 6));
        v = dg_runtime_ptr(rt, rs);
        for (int i = 0; i < 24; i++) CHECK(v[i] == 2 * xv[i]);
        v = dg_runtime_ptr(rt, a2a);
        for (int r = 0; r < 2; r++)
            for (int c = 0; c < 12; c++)
                CHECK(v[r * 12 + c] == (float)((c / 6) * 100 + (rank * 2 + r) * 6 + c % 6));
        v = dg_runtime_ptr(rt, rv);
        for (int i = 0; i < 24; i++) CHECK(v[i] == (float)((1 - rank) * 100 + i));
        float l = *(float *)dg_runtime_ptr(rt, loss);
        if (step == 0) first_loss = l;
        CHECK(memcmp(&l, &first_loss, sizeof l) == 0);
    }
    dg_runtime_free(rt);
    dg_sched_plan_free(p);
    dg_graph_free(g);

    /* 2. both ranks send 4 MB to each other before receiving: far past the
     * eager limit, so this deadlocks unless sends complete asynchronously */
    {
        dg_graph *g2 = dg_graph_new("cross");
        int big = dg_input_new(g2, "big", DG_F32, 1, DG_SHAPE(1 << 20));
        int sn = dg_send(g2, big, DG_AXIS_PP, 2, 1);
        g2->nodes[sn].priority = 10; /* the send first on the comm stream */
        int got = dg_recv(g2, DG_AXIS_PP, 2, 1, DG_F32, 1, DG_SHAPE(1 << 20));
        int chk = t_sum(g2, got, "chk");
        CHECK(g2->status == DG_OK);
        dg_sched_plan *p2 = dg_sched_plan_new(g2, NULL, &err);
        dg_runtime *rt2 = dg_runtime_new(&ro, &err);
        dg_runtime_bind(rt2, p2, &err);
        float *bv = dg_runtime_ptr(rt2, big);
        for (int i = 0; i < (1 << 20); i++) bv[i] = (float)(rank + 1);
        for (int step = 0; step < 2; step++) {
            int st = dg_sched_run(p2, rt2, NULL, &err);
            if (st != DG_OK) fprintf(stderr, "rank %d: %s\n", rank, err.msg);
            CHECK(st == DG_OK);
            CHECK(*(float *)dg_runtime_ptr(rt2, chk) == (float)((2 - rank) * (1 << 20)));
        }
        dg_runtime_free(rt2);
        dg_sched_plan_free(p2);
        dg_graph_free(g2);
    }

    /* 3. split: two groups of one */
    dg_comm *sub = NULL;
    CHECK(world->ops->split(world, rank, 0, &sub, &err) == DG_OK);
    CHECK(sub && sub->size == 1 && sub->rank == 0);
    dg_comm_free(sub);
    CHECK(world->ops->barrier(world, &err) == DG_OK);
    dg_comm_free(world);

    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("comm mpi: %s (%d failed checks)\n", total ? "FAIL" : "OK", total);
    MPI_Finalize();
    return total ? 1 : 0;
}
