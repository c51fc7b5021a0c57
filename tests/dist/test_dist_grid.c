/* test_dist_grid.c — the rank grid under mpirun -np 4: for several
 * (tp, cp, ep, pp) sizes, every group has the ranks dg_grid.h's table says
 * (checked by all-gathering world ranks over each group and comparing with
 * the coordinates), the data shard is ep + EP dp, every axis' coordinate
 * (dg_grid_axis_coord, dg_grid_coords) is the rank in the runtime's group
 * of that axis (ETP 1's expert-data group included), the first replica is
 * the rank at cp = ep = dp = 0, and sizes that do not fit are one-line
 * DG_EINPUT errors. Plain asserts; exits non-zero on failure. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "dg_grid.h"

static int failures, me;
#define CHECK(c)                                                                              \
    do {                                                                                      \
        if (!(c)) {                                                                           \
            fprintf(stderr, "rank %d: %s:%d: check failed: %s\n", me, __FILE__, __LINE__, #c); \
            failures++;                                                                       \
        }                                                                                     \
    } while (0)

/* Does world rank r belong to my group along the coordinates in vary? */
static int same_group(const dg_grid_sizes *s, int a, int b, const int vary[5]) {
    dg_grid_coord x = dg_grid_coord_of(s, a), y = dg_grid_coord_of(s, b);
    return (vary[0] || x.tp == y.tp) && (vary[1] || x.cp == y.cp) && (vary[2] || x.ep == y.ep) &&
           (vary[3] || x.dp == y.dp) && (vary[4] || x.pp == y.pp);
}

static void check_group(const dg_grid *g, dg_comm *c, const int vary[5], const char *what) {
    int want[64], n = 0;
    for (int r = 0; r < g->world; r++)
        if (same_group(&g->sizes, g->rank, r, vary)) want[n++] = r;
    CHECK(c != NULL && c->size == n);
    if (!c || c->size != n) {
        fprintf(stderr, "rank %d: group %s has %d ranks, want %d\n", me, what, c ? c->size : -1, n);
        return;
    }
    int32_t mine = g->rank, got[64];
    dg_comm_req req = {0};
    dg_err err = {{0}};
    CHECK(c->ops->all_gather(c, &mine, got, 1, DG_I32, &req, &err) == DG_OK);
    CHECK(c->ops->wait(c, &req, &err) == DG_OK);
    for (int i = 0; i < n; i++)
        if (got[i] != want[i]) {
            fprintf(stderr, "rank %d: group %s member %d is rank %d, want %d\n", me, what, i, got[i], want[i]);
            failures++;
        }
}

static void run_etp(int tp, int cp, int ep, int pp, int etp) {
    dg_grid_sizes s = {tp, cp, ep, pp, 0, etp};
    dg_err err = {{0}};
    int st = -1;
    dg_grid *g = dg_grid_new(MPI_COMM_WORLD, &s, &st, &err);
    CHECK(g != NULL && st == DG_OK);
    if (!g) return;
    int world = g->world;
    CHECK(g->sizes.dp * tp * cp * ep * pp == world);
    CHECK(dg_grid_rank_of(&g->sizes, g->coord) == g->rank);
    CHECK(g->data_size == ep * g->sizes.dp);
    CHECK(g->data_rank == g->coord.ep + ep * g->coord.dp);
    static const int V[7][5] = {{1, 0, 0, 0, 0}, {0, 1, 0, 0, 0}, {0, 0, 1, 0, 0}, {0, 0, 1, 1, 0},
                                {0, 0, 0, 0, 1}, {0, 1, 0, 1, 0}, {0, 1, 1, 1, 0}};
    static const int EDP_ETP1[5] = {1, 1, 0, 1, 0}; /* ETP 1: the experts are whole on every tp rank */
    check_group(g, g->group[DG_AXIS_TP], V[0], "tp");
    check_group(g, g->group[DG_AXIS_CP], V[1], "cp");
    check_group(g, g->group[DG_AXIS_EP], V[2], "ep");
    check_group(g, g->group[DG_AXIS_DP], V[3], "dp");
    check_group(g, g->group[DG_AXIS_PP], V[4], "pp");
    check_group(g, g->group[DG_AXIS_EDP], g->sizes.etp == 1 ? EDP_ETP1 : V[5], "edp");
    check_group(g, g->dp_cp, V[6], "dp_cp");
    dg_comm *rg[DG_AXIS_COUNT];
    dg_grid_runtime_groups(g, rg);
    CHECK(rg[DG_AXIS_DP] == g->dp_cp && rg[DG_AXIS_EP] == g->group[DG_AXIS_EP] && rg[DG_AXIS_NONE] == NULL);
    int coord[DG_AXIS_COUNT];
    dg_grid_coords(g, coord);
    CHECK(coord[DG_AXIS_NONE] == 0 && dg_grid_axis_coord(g, DG_AXIS_NONE) == 0);
    for (int a = DG_AXIS_NONE + 1; a < DG_AXIS_COUNT; a++) {
        CHECK(coord[a] == dg_grid_axis_coord(g, (dg_axis)a));
        if (rg[a] && coord[a] != rg[a]->rank)
            fprintf(stderr, "rank %d: coordinate %d on axis %s, its rank in the group %d\n", me, coord[a],
                    dg_axis_name((dg_axis)a), rg[a]->rank);
        CHECK(rg[a] && coord[a] == rg[a]->rank);
    }
    CHECK(coord[DG_AXIS_TP] == g->coord.tp && coord[DG_AXIS_PP] == g->coord.pp);
    CHECK(dg_grid_first_replica(g) == (g->coord.cp == 0 && g->coord.ep == 0 && g->coord.dp == 0));
    dg_grid_free(g);
}

static void run(int tp, int cp, int ep, int pp) { run_etp(tp, cp, ep, pp, 0); }

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    int world;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (world != 4) {
        fprintf(stderr, "run with -np 4\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* sizes that do not fit: one line, DG_EINPUT, no MPI needed */
    dg_err err = {{0}};
    dg_grid_sizes bad = {1, 1, 2, 1, 0, 0};
    CHECK(dg_grid_sizes_check(3, &bad, &err) == DG_EINPUT);
    CHECK(strstr(err.msg, "world size 3 is not divisible by") && strstr(err.msg, "--expert-model-parallel-size 2"));
    CHECK(!strchr(err.msg, '\n'));
    dg_grid_sizes zero = {0, 1, 1, 1, 0, 0};
    CHECK(dg_grid_sizes_check(4, &zero, &err) == DG_EINPUT && strstr(err.msg, "--tensor-model-parallel-size"));
    int st = 0;
    dg_grid_sizes three = {3, 1, 1, 1, 0, 0};
    CHECK(dg_grid_new(MPI_COMM_WORLD, &three, &st, &err) == NULL && st == DG_EINPUT);
    /* the layouts 4 ranks allow */
    run(1, 1, 1, 1); /* dp 4 */
    run(1, 1, 2, 1); /* ep 2 x dp 2 */
    run(2, 1, 1, 2); /* tp 2 x pp 2 */
    run(1, 2, 2, 1); /* cp 2 x ep 2 */
    run(2, 2, 1, 1);
    run(1, 1, 4, 1);
    run_etp(2, 1, 2, 1, 1); /* ETP 1: the expert-data group spans tp */
    run_etp(2, 2, 1, 1, 1);
    /* no grid: a world of one */
    int none[DG_AXIS_COUNT];
    dg_grid_coords(NULL, none);
    for (int a = 0; a < DG_AXIS_COUNT; a++) CHECK(none[a] == 0);
    CHECK(dg_grid_first_replica(NULL));
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (me == 0) printf("test_dist_grid: %s (%d failures over all ranks)\n", total ? "FAIL" : "ok", total);
    MPI_Finalize();
    return total ? 1 : 0;
}
