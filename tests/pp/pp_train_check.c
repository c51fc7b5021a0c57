/* pp_train_check.c — pipeline-parallel training agrees with one rank
 * (issue 13, acceptance 1).
 *
 * usage: mpirun -np N pp_train_check [--check-schedules] flags...
 *
 * 1. Rank 0 trains alone (over MPI_COMM_SELF) with the same flags but every
 *    model-parallel size 1: the reference losses, grad norms and final
 *    parameters, broadcast to every rank.
 * 2. All N ranks train with the flags (PP, and whatever TP / EP / DP they
 *    give): the lm loss and grad norm of every iteration, as every rank
 *    sees them (the loss lives on the last stage and is summed over the
 *    pipeline group), must agree with the reference within 1e-5 relative;
 *    every parameter a rank holds (a slice under TP / EP, placed by
 *    dg_shard_global_index) must agree with the reference's within 1e-5
 *    relative (per tensor, ||a - b|| / ||a||), and every reference
 *    parameter must be held by some rank (a stage that lost its layers
 *    fails).
 * 3. With --check-schedules: the run again under
 *    --pipeline-schedule all-forward-all-backward and zero-bubble-h1 must
 *    give bitwise the same losses and parameters (a schedule orders work,
 *    it never changes what is added). With virtual stages (interleaved
 *    1F1B) all-forward-all-backward keeps the chunks and orders them every
 *    forward first; zero-bubble-h1 does not take them and is left out.
 * Prints the figures; exits non-zero on any mismatch. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "dg_layout.h"
#include "dg_train_record.h"
#include "dg_trainer.h"

#define RTOL 1e-5


/* single: every model-parallel size 1 (the reference). schedule: NULL or
 * the --pipeline-schedule to use. */
static int train(int argc, char **argv, int first, int single, const char *schedule, MPI_Comm comm,
                 dg_train_record *r,
                 dg_train_config *out) {
    dg_train_config c;
    dg_train_config_defaults(&c);
    dg_err err = {{0}};
    if (dg_train_config_parse(&c, argc, argv, first, &err) != DG_OK) {
        dg_err_print(&err);
        return 1;
    }
    if (single) {
        c.pipeline_model_parallel_size = c.tensor_model_parallel_size = c.expert_model_parallel_size = 1;
        c.decoder_first_pipeline_num_layers = c.decoder_last_pipeline_num_layers = 0;
        c.num_virtual_stages_per_pipeline_rank = c.num_layers_per_virtual_pipeline_stage = 0;
    }
    if (schedule) snprintf(c.pipeline_schedule, sizeof c.pipeline_schedule, "%s", schedule);
    memset(r, 0, sizeof *r);
    dg_train_hooks hooks = {.ctx = r, .on_iteration = dg_rec_on_iteration};
    dg_train_final fin = {r, dg_rec_on_final};
    dg_train_result res;
    int st = dg_train_on(&c, comm, &hooks, &fin, &res, &err);
    if (out) *out = c;
    if (st != DG_OK) {
        dg_err_print(&err);
        return 1;
    }
    return 0;
}

static double rel(double a, double b) { return fabs(a - b) / DG_MAX(fabs(a), 1e-30); }

/* The reference's parameters and losses from rank 0 to every rank. */
static void bcast_record(dg_train_record *r, int rank) {
    MPI_Bcast(&r->n_iters, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Bcast(r->loss, DG_REC_MAX_ITERS, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Bcast(r->gnorm, DG_REC_MAX_ITERS, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Bcast(&r->n_params, 1, MPI_INT, 0, MPI_COMM_WORLD);
    for (int i = 0; i < r->n_params; i++) {
        MPI_Bcast(r->name[i], DG_NAME_LEN, MPI_CHAR, 0, MPI_COMM_WORLD);
        MPI_Bcast(&r->numel[i], 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
        if (rank != 0) r->values[i] = dg_malloc(sizeof(float) * (size_t)DG_MAX(r->numel[i], 1));
        MPI_Bcast(r->values[i], (int)r->numel[i], MPI_FLOAT, 0, MPI_COMM_WORLD);
    }
}

/* This rank's coordinates on the grid (sched/dg_grid.h: tp fastest, then
 * cp, ep, dp, pp) and the mesh, for placing a slice in the global tensor. */
static void grid_of(const dg_train_config *c, int rank, int world, int *mesh, int *coord) {
    int tp = c->tensor_model_parallel_size, ep = c->expert_model_parallel_size, pp = c->pipeline_model_parallel_size;
    int dp = world / (tp * ep * pp);
    memset(mesh, 0, sizeof(int) * DG_AXIS_COUNT);
    memset(coord, 0, sizeof(int) * DG_AXIS_COUNT);
    mesh[DG_AXIS_TP] = tp, mesh[DG_AXIS_EP] = ep, mesh[DG_AXIS_DP] = dp, mesh[DG_AXIS_PP] = pp;
    coord[DG_AXIS_TP] = rank % tp;
    coord[DG_AXIS_EP] = rank / tp % ep;
    coord[DG_AXIS_DP] = rank / (tp * ep) % dp;
    coord[DG_AXIS_PP] = rank / (tp * ep * dp);
}

/* Compare what this rank holds with the reference; mark held[] the
 * reference parameters it holds. Returns 1 on a mismatch. */
static int compare_params(const dg_train_record *pp, const dg_train_record *ref, const int *mesh, const int *coord,
                          int *held,
                          double *worst) {
    int fail = 0;
    for (int i = 0; i < pp->n_params; i++) {
        int j = 0;
        while (j < ref->n_params && strcmp(ref->name[j], pp->name[i])) j++;
        if (j == ref->n_params) {
            fprintf(stderr, "FAIL: parameter %s is not in the reference\n", pp->name[i]);
            fail = 1;
            continue;
        }
        held[j] = 1;
        double d2 = 0, a2 = 0;
        for (int64_t k = 0; k < pp->numel[i]; k++) {
            int64_t gk = dg_shard_global_index(&pp->t[i], mesh, coord, k);
            double want = gk >= 0 && gk < ref->numel[j] ? ref->values[j][gk] : NAN;
            double d = (double)pp->values[i][k] - want;
            d2 += d * d;
            a2 += want * want;
        }
        double e = sqrt(d2) / DG_MAX(sqrt(a2), 1e-30);
        *worst = DG_MAX(*worst, e);
        if (!(e <= RTOL)) {
            fprintf(stderr, "FAIL: parameter %s: relative difference %.3e\n", pp->name[i], e);
            fail = 1;
        }
    }
    return fail;
}

int main(int argc, char **argv) {
    int provided, rank, world;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    int first = 1, schedules = 0, fail = 0;
    if (argc > 1 && !strcmp(argv[1], "--check-schedules")) schedules = 1, first = 2;

    dg_train_record ref = {0}, pp = {0}, pp2 = {0}, pp3 = {0};
    if (rank == 0) {
        printf("== reference: 1 rank\n");
        fflush(stdout);
        fail |= train(argc, argv, first, 1, NULL, MPI_COMM_SELF, &ref, NULL);
    }
    MPI_Bcast(&fail, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (fail) MPI_Abort(MPI_COMM_WORLD, 1);
    bcast_record(&ref, rank);

    if (rank == 0) printf("== pipeline parallel: %d ranks\n", world);
    fflush(stdout);
    dg_train_config c;
    fail |= train(argc, argv, first, 0, NULL, MPI_COMM_WORLD, &pp, &c);
    int interleaved = c.num_virtual_stages_per_pipeline_rank > 0 || c.num_layers_per_virtual_pipeline_stage > 0;
    if (schedules) {
        if (rank == 0) printf("== again with --pipeline-schedule all-forward-all-backward\n");
        fflush(stdout);
        fail |= train(argc, argv, first, 0, "all-forward-all-backward", MPI_COMM_WORLD, &pp2, NULL);
        if (!interleaved) {
            if (rank == 0) printf("== again with --pipeline-schedule zero-bubble-h1\n");
            fflush(stdout);
            fail |= train(argc, argv, first, 0, "zero-bubble-h1", MPI_COMM_WORLD, &pp3, NULL);
        }
    }
    const dg_train_record *third = interleaved ? &pp2 : &pp3;
    double worst_loss = 0, worst_param = 0;
    if (!fail && pp.n_iters != ref.n_iters) {
        fprintf(stderr, "FAIL: rank %d: %d iterations vs the reference's %d\n", rank, pp.n_iters, ref.n_iters);
        fail = 1;
    }
    for (int it = 0; !fail && it < pp.n_iters; it++) {
        double e = DG_MAX(rel(ref.loss[it], pp.loss[it]), rel(ref.gnorm[it], pp.gnorm[it]));
        worst_loss = DG_MAX(worst_loss, e);
        if (rank == 0)
            printf("iteration %d: lm loss 1 rank %.9e, %d ranks %.9e; grad norm %.9e vs %.9e (rel %.2e)\n", it + 1,
                   ref.loss[it], world, pp.loss[it], ref.gnorm[it], pp.gnorm[it], e);
        if (!(e <= RTOL)) {
            fprintf(stderr, "FAIL: rank %d: iteration %d differs from the reference\n", rank, it + 1);
            fail = 1;
        }
        if (schedules && (memcmp(&pp.loss[it], &pp2.loss[it], sizeof(double)) ||
                          memcmp(&pp.gnorm[it], &pp2.gnorm[it], sizeof(double)) ||
                          memcmp(&pp.loss[it], &third->loss[it], sizeof(double)) ||
                          memcmp(&pp.gnorm[it], &third->gnorm[it], sizeof(double)))) {
            fprintf(stderr, "FAIL: rank %d: iteration %d differs between the schedules\n", rank, it + 1);
            fail = 1;
        }
    }
    int *held = dg_calloc((size_t)DG_MAX(ref.n_params, 1), sizeof(int));
    int *all = dg_calloc((size_t)DG_MAX(ref.n_params, 1), sizeof(int));
    int mesh[DG_AXIS_COUNT], coord[DG_AXIS_COUNT];
    grid_of(&c, rank, world, mesh, coord);
    if (!fail) fail |= compare_params(&pp, &ref, mesh, coord, held, &worst_param);
    for (int i = 0; schedules && !fail && i < pp.n_params; i++)
        if (pp2.n_params != pp.n_params || third->n_params != pp.n_params ||
            memcmp(pp.values[i], pp2.values[i], sizeof(float) * (size_t)pp.numel[i]) ||
            memcmp(pp.values[i], third->values[i], sizeof(float) * (size_t)pp.numel[i])) {
            fprintf(stderr, "FAIL: rank %d: parameter %s differs between the schedules\n", rank, pp.name[i]);
            fail = 1;
        }
    MPI_Allreduce(held, all, ref.n_params, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    for (int j = 0; j < ref.n_params; j++)
        if (!all[j]) {
            if (rank == 0) fprintf(stderr, "FAIL: no rank holds parameter %s\n", ref.name[j]);
            fail = 1;
        }
    double w[2] = {worst_loss, worst_param}, wmax[2];
    MPI_Reduce(w, wmax, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("worst relative difference to 1 rank: losses and grad norms %.3e, parameters %.3e (tolerance %.0e); "
               "%d parameters held across %d ranks\n",
               wmax[0], wmax[1], RTOL, ref.n_params, world);
    dg_free(held);
    dg_free(all);
    dg_rec_free(&ref);
    dg_rec_free(&pp);
    dg_rec_free(&pp2);
    dg_rec_free(&pp3);
    int any = 0;
    MPI_Allreduce(&fail, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) printf("pp_train_check: %s\n", any ? "FAIL" : "ok");
    MPI_Finalize();
    return any ? 1 : 0;
}
