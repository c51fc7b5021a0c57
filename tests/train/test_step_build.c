/* test_step_build.c — train/dg_step_build.h: `dagatron train`, `simulate`
 * and `dump --graph step` build one rank's step through one builder, so
 * their graphs and plans are the same. Run with mpirun -np 2: each rank
 * checks its own step, train's from a real rank grid's comms.
 *  1. For a dense model on one rank, MoE with EP 2, PP 2 (both stages) and
 *     CP 2, with --emulate-link and selective recompute on one of them:
 *     train's use (the grid's comm sizes, the recompute report, the plan),
 *     simulate's (dg_sim_build_stage with the spec its engine times
 *     collectives with) and dump's (the whole step, named "step") give the
 *     same rank coordinates, the same graph (node count, ops and names in
 *     order, tensor count) and the same plan (order, streams, arena).
 *  2. Under --emulate-link the recompute budget planner measures on plans
 *     with the step's link cost model: its report's "no recompute" peak is
 *     the arena of the plan of the step up to the schedule stage, and the
 *     scheduler's defaults would give another (so the check can fail). */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "dg_grid.h"
#include "dg_sim_internal.h"
#include "dg_step_build.h"
#include "dg_step_opts.h"

static int failures, rank;
#define CHECK(c)                                                                             \
    do {                                                                                     \
        if (!(c)) {                                                                          \
            fprintf(stderr, "rank %d: %s:%d: CHECK failed: %s\n", rank, __FILE__, __LINE__, #c); \
            failures++;                                                                      \
        }                                                                                    \
    } while (0)

#define SMALL                                                                                             \
    "--mock-data --vocab-size 64 --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32 " \
    "--micro-batch-size 2 --global-batch-size 4 --train-iters 4"
#define MOE                                                                                               \
    " --num-experts 4 --moe-router-topk 2 --swiglu --disable-bias-linear --normalization RMSNorm "          \
    "--position-embedding-type rope --hidden-dropout 0 --attention-dropout 0"

typedef struct layout {
    const char *name;
    int world; /* 1: the trainer's run without MPI (no grid) */
    const char *flags;
} layout;

static const layout layouts[] = {
    {"dense", 1, SMALL},
    {"moe ep2", 2, SMALL MOE " --expert-model-parallel-size 2"},
    {"pp2", 2, SMALL " --pipeline-model-parallel-size 2 --num-layers 4 --global-batch-size 8"},
    {"cp2", 2, SMALL " --context-parallel-size 2"},
    {"moe ep2 links", 2,
     SMALL MOE " --expert-model-parallel-size 2 --emulate-link ep=25,10 --recompute-granularity selective"},
};

/* The checked config of `flags` for `world` ranks. */
static int config(const char *flags, int world, dg_train_config *c, dg_grid_sizes *sz) {
    char buf[1024];
    char *argv[128];
    int argc = 0;
    snprintf(buf, sizeof buf, "%s", flags);
    argv[argc++] = "test_step_build";
    for (char *tok = strtok(buf, " "); tok && argc < 127; tok = strtok(NULL, " ")) argv[argc++] = tok;
    argv[argc] = NULL;
    dg_train_config in;
    dg_train_config_defaults(&in);
    dg_err err = {{0}};
    int st = dg_train_config_parse(&in, argc, argv, 1, &err);
    if (st == DG_OK) st = dg_step_config(&in, world, c, sz, &err);
    if (st != DG_OK) fprintf(stderr, "rank %d: %s: %s\n", rank, flags, err.msg);
    return st;
}

/* g2 and p2 are g1 and p1: the same ops and names in order, the same
 * tensor count, the same plan order, streams and arena. */
static void same(const char *what, const dg_graph *g1, const dg_sched_plan *p1, const dg_graph *g2,
                 const dg_sched_plan *p2) {
    int ok = g1->n_nodes == g2->n_nodes && g1->n_tensors == g2->n_tensors;
    for (int v = 0; ok && v < g1->n_nodes; v++)
        ok = g1->nodes[v].op == g2->nodes[v].op && !strcmp(g1->nodes[v].name, g2->nodes[v].name) &&
             p1->order[v] == p2->order[v] && p1->stream[v] == p2->stream[v];
    ok = ok && p1->mem.arena_bytes == p2->mem.arena_bytes;
    if (!ok)
        fprintf(stderr, "rank %d: %s: %d nodes / %d tensors / %zu arena vs %d / %d / %zu, or ops or order differ\n",
                rank, what, g1->n_nodes, g1->n_tensors, p1->mem.arena_bytes, g2->n_nodes, g2->n_tensors,
                p2->mem.arena_bytes);
    CHECK(ok);
}

static void test_layout(const layout *l) {
    dg_train_config c;
    dg_grid_sizes sz;
    if (config(l->flags, l->world, &c, &sz) != DG_OK) {
        failures++;
        return;
    }
    dg_err err = {{0}};
    int me = l->world == 1 ? 0 : rank;
    /* train's: the rank grid's comms (train/dg_trainer.c), the recompute report, the plan */
    dg_grid *grid = NULL;
    if (l->world > 1) {
        int st;
        grid = dg_grid_new(MPI_COMM_WORLD, &sz, &st, &err);
        CHECK(grid != NULL);
        if (!grid) return;
    }
    dg_step_rank at_train, at;
    dg_step_rank_of_grid(grid, &at_train);
    int stage = dg_grid_coord_of(&sz, me).pp;
    dg_step_rank_of(&sz, stage, &at);
    CHECK(!memcmp(&at, &at_train, sizeof at));
    dg_recompute_report report;
    dg_step_build_opts to = {.recompute_report = &report};
    dg_step_built train;
    int st = dg_step_build(&c, &at_train, &to, &train, &err);
    if (st == DG_OK) st = dg_step_plan(&train, 1, &err);
    CHECK(st == DG_OK);
    /* simulate's: its stage, with the spec its engine uses (cli/cmd_simulate.c) */
    dg_link_spec spec;
    memset(&spec, 0, sizeof spec);
    if (c.emulate_link[0]) CHECK(dg_link_spec_parse(c.emulate_link, "--emulate-link", &spec, &err) == DG_OK);
    dg_sim_stage sim;
    int st_sim = dg_sim_build_stage(&c, &sz, stage, 1, &spec, &sim, &err);
    CHECK(st_sim == DG_OK);
    /* dump's: --graph step --rank me (cli/cmd_dump.c), planned here */
    dg_step_build_opts dopt = {.partial = 1, .stop_after = DG_STAGE_OPTIMIZER,
                               .n_microbatches = DG_MAX(c.num_microbatches, 1), .name = "step"};
    dg_step_built dump;
    int st_dump = dg_step_build(&c, &at, &dopt, &dump, &err);
    if (st_dump == DG_OK) st_dump = dg_step_plan(&dump, 1, &err);
    CHECK(st_dump == DG_OK);
    if (st != DG_OK || st_sim != DG_OK || st_dump != DG_OK)
        fprintf(stderr, "rank %d: %s: %s\n", rank, l->name, err.msg);
    char what[128];
    if (st == DG_OK && st_sim == DG_OK) {
        snprintf(what, sizeof what, "%s: train vs simulate", l->name);
        same(what, train.step.g, train.plan, sim.g, sim.plan);
    }
    if (st == DG_OK && st_dump == DG_OK) {
        snprintf(what, sizeof what, "%s: train vs dump", l->name);
        same(what, train.step.g, train.plan, dump.step.g, dump.plan);
        CHECK(train.n_mb == c.num_microbatches && !strcmp(dump.step.g->name, "step"));
    }
    if (st == DG_OK) CHECK(train.has_cost == (c.emulate_link[0] != 0));
    if (st_sim == DG_OK) dg_sim_stage_free(&sim);
    dg_step_built_free(&train);
    dg_step_built_free(&dump);
    dg_grid_free(grid);
}

/* The budget planner's "no recompute" peak is measured on the plan the run
 * makes: with the step's link cost model. */
static void test_budget_links(void) {
    dg_train_config c;
    dg_grid_sizes sz;
    if (config(SMALL MOE " --expert-model-parallel-size 2 --emulate-link ep=25,10 --recompute-memory-budget 1000", 2,
               &c, &sz) != DG_OK) {
        failures++;
        return;
    }
    dg_err err = {{0}};
    dg_step_rank at;
    dg_step_rank_of(&sz, 0, &at);
    dg_recompute_report report;
    dg_step_build_opts o = {.recompute_report = &report};
    dg_step_built b;
    CHECK(dg_step_build(&c, &at, &o, &b, &err) == DG_OK);
    dg_step_built_free(&b);
    /* the step up to the schedule stage, without recompute (the budget
     * fits it), planned with the step's model and with the defaults */
    dg_link_spec none;
    memset(&none, 0, sizeof none);
    c.recompute_memory_budget = 0;
    dg_step_build_opts upto = {.partial = 1, .stop_after = DG_STAGE_SCHEDULE};
    dg_step_build_opts upto_dflt = {.partial = 1, .stop_after = DG_STAGE_SCHEDULE, .links = &none};
    dg_step_built links, dflt;
    int st = dg_step_build(&c, &at, &upto, &links, &err);
    if (st == DG_OK) st = dg_step_plan(&links, 1, &err);
    if (st == DG_OK) st = dg_step_build(&c, &at, &upto_dflt, &dflt, &err);
    if (st == DG_OK) st = dg_step_plan(&dflt, 1, &err);
    CHECK(st == DG_OK);
    if (st == DG_OK) {
        size_t measured = report.none.peak, planned = links.plan->mem.arena_bytes;
        if (measured != planned)
            fprintf(stderr, "rank %d: the budget measured %zu bytes without recompute, the step's plan has %zu\n", rank,
                    measured, planned);
        CHECK(measured == planned);
        CHECK(dflt.plan->mem.arena_bytes != planned); /* the links matter to this plan */
    }
    dg_step_built_free(&links);
    dg_step_built_free(&dflt);
}

int main(int argc, char **argv) {
    int provided = 0, size = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (rank == 0) fprintf(stderr, "test_step_build: run with -np 2\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t i = 0; i < DG_ARRAY_LEN(layouts); i++) test_layout(&layouts[i]);
    test_budget_links();
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("test_step_build: %s (%d failures over all ranks)\n", total ? "FAILED" : "ok", total);
    MPI_Finalize();
    return total != 0;
}
