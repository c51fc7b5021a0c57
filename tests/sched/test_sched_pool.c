/* test_sched_pool.c — the compute team and the topology. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdatomic.h>
#include <string.h>
#include <stdlib.h>
#include <time.h>

#include <cmocka.h>
#include <hwloc.h>

#include "dg_pool.h"
#include "dg_topo.h"

typedef struct cover {
    atomic_int *hits;
    atomic_int calls;
} cover;

static void mark(void *arg, int64_t b, int64_t e) {
    cover *c = arg;
    atomic_fetch_add(&c->calls, 1);
    for (int64_t i = b; i < e; i++) atomic_fetch_add(&c->hits[i], 1);
}

/* Every index of [0, n) exactly once, one range per thread, any n. */
static void test_team_covers_range(void **state) {
    (void)state;
    for (int nth = 1; nth <= 4; nth++) {
        dg_pool *p = dg_pool_new(nth, NULL, 0, "t");
        const dg_team *t = dg_pool_team(p);
        assert_int_equal(t->nthreads, nth);
        for (int64_t n = 1; n <= 37; n += 3) {
            cover c;
            c.hits = calloc((size_t)n, sizeof(atomic_int));
            atomic_init(&c.calls, 0);
            dg_team_run(t, n, mark, &c);
            for (int64_t i = 0; i < n; i++) assert_int_equal(atomic_load(&c.hits[i]), 1);
            int nonempty = n < nth ? (int)n : nth;
            assert_int_equal(atomic_load(&c.calls), nonempty);
            free(c.hits);
        }
        dg_pool_free(p);
    }
}

static void count(void *arg, int64_t b, int64_t e) { atomic_fetch_add((atomic_long *)arg, e - b); }

/* Many back-to-back jobs (the spin/sleep hand-off under stress). */
static void test_team_many_jobs(void **state) {
    (void)state;
    dg_pool *p = dg_pool_new(3, NULL, 0, "t");
    atomic_long total;
    atomic_init(&total, 0);
    for (int k = 0; k < 20000; k++) dg_team_run(dg_pool_team(p), 5, count, &total);
    assert_int_equal(atomic_load(&total), 100000);
    dg_pool_free(p);
}

static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* An idle team sleeps: 300 ms of idleness costs (almost) no CPU. */
static void test_idle_team_sleeps(void **state) {
    (void)state;
    dg_pool *p = dg_pool_new(4, NULL, 0, "t");
    atomic_long total;
    atomic_init(&total, 0);
    dg_team_run(dg_pool_team(p), 100, count, &total);
    struct timespec settle = {0, 50 * 1000 * 1000};
    nanosleep(&settle, NULL); /* past the bounded spin */
    double c0 = cpu_seconds();
    struct timespec idle = {0, 300 * 1000 * 1000};
    nanosleep(&idle, NULL);
    double used = cpu_seconds() - c0;
    printf("idle team: %.3f ms CPU over 300 ms\n", 1e3 * used);
    assert_true(used < 0.030);
    dg_pool_free(p);
}

static void test_topo(void **state) {
    (void)state;
    dg_err err = {{0}};
    dg_topo *t = dg_topo_new(&err);
    assert_non_null(t);
    dg_topo_info in;
    dg_topo_get_info(t, &in);
    assert_true(in.n_cores >= 1 && in.n_pus >= in.n_cores);
    assert_true(in.rank_cores >= 1 && in.rank_cores <= in.n_cores);
    dg_pool *p = dg_pool_new(2, t, 0, "compute");
    dg_topo_bind_self(t, 0, "compute.0");
    /* helpers bind on start; wait for their log entries */
    for (int k = 0; k < 1000 && dg_topo_n_places(t) < 2; k++) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    assert_int_equal(dg_topo_n_places(t), 2);
    dg_topo_place pl;
    for (int i = 0; i < 2; i++) {
        dg_topo_place_get(t, i, &pl);
        assert_true(pl.core >= 0 || in.rank_cores == 1);
    }
    dg_topo_print(t, stdout, "test: ");
    dg_pool_free(p);
    dg_topo_free(t);
}

/* Bound to the whole machine while mpirun says two ranks share the node:
 * each takes its own block of cores. The test makes its precondition itself:
 * a process bound to the machine's allowed cores and no launcher variables
 * (ctest may run it under taskset or inside mpirun); it fails, never skips,
 * where that cannot be had (one core). */
static void unbind_whole(void) {
    hwloc_topology_t topo;
    assert_int_equal(hwloc_topology_init(&topo), 0);
    assert_int_equal(hwloc_topology_load(topo), 0);
    assert_int_equal(hwloc_set_cpubind(topo, hwloc_topology_get_allowed_cpuset(topo), HWLOC_CPUBIND_PROCESS), 0);
    hwloc_topology_destroy(topo);
    static const char *const launcher[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
                                           "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "SLURM_LOCALID",
                                           "SLURM_NTASKS_PER_NODE"};
    for (size_t i = 0; i < sizeof launcher / sizeof launcher[0]; i++) unsetenv(launcher[i]);
}

static void test_topo_split_by_local_rank(void **state) {
    (void)state;
    unbind_whole();
    dg_err err = {{0}};
    dg_topo *t = dg_topo_new(&err);
    dg_topo_info in;
    dg_topo_get_info(t, &in);
    dg_topo_free(t);
    if (in.n_cores < 2) fail_msg("needs a machine with 2 cores or more to split; this one has %d", in.n_cores);
    assert_int_equal(in.source, DG_TOPO_WHOLE);
    char sets[2][64];
    for (int r = 0; r < 2; r++) {
        char rs[8];
        snprintf(rs, sizeof rs, "%d", r);
        setenv("OMPI_COMM_WORLD_LOCAL_RANK", rs, 1);
        setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
        t = dg_topo_new(&err);
        dg_topo_get_info(t, &in);
        assert_int_equal(in.source, DG_TOPO_SPLIT);
        assert_int_equal(in.local_rank, r);
        assert_int_equal(in.rank_cores, in.n_cores / 2 + (r < in.n_cores % 2));
        snprintf(sets[r], sizeof sets[r], "%s", in.rank_set);
        dg_topo_free(t);
    }
    unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
    unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    printf("split: rank 0 -> %s, rank 1 -> %s\n", sets[0], sets[1]);
    assert_string_not_equal(sets[0], sets[1]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_team_covers_range),
        cmocka_unit_test(test_team_many_jobs),
        cmocka_unit_test(test_idle_team_sleeps),
        cmocka_unit_test(test_topo_split_by_local_rank),
        cmocka_unit_test(test_topo),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
