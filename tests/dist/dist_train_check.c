/* dist_train_check.c — data-parallel training agrees with one rank
 * (issue 7, acceptance 1 for DP and the distributed optimizer).
 *
 * usage: mpirun -np N dist_train_check [--use-distributed-optimizer] [--overlap-grad-reduce] [flags...]
 *
 * 1. Rank 0 trains alone (over MPI_COMM_SELF) on the same global batch: the
 *    reference losses, final parameters and optimizer-state bytes.
 * 2. All N ranks train together (over MPI_COMM_WORLD, DP = N): the losses of
 *    every iteration and every final parameter must agree with the reference
 *    within 1e-5 relative (parameters: per tensor, ||a - b|| / ||a||), and
 *    every rank must end with the same parameters bit for bit.
 * 3. The same DP run again, with --overlap-grad-reduce (and, with the
 *    distributed optimizer, --overlap-param-gather) toggled: losses and
 *    parameters bitwise identical to run 2 (overlap changes when buckets are
 *    reduced and parameters gathered, never what is added).
 * 4. With --use-distributed-optimizer, the optimizer state per rank is the
 *    reference's / N, up to one padding element per bucket and rank.
 * Prints the figures; exits non-zero on any mismatch. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "dg_train_record.h"
#include "dg_trainer.h"

#define RTOL 1e-5


static int train(int argc, char **argv, int flip_overlap, MPI_Comm comm, dg_train_record *r, dg_train_result *res) {
    dg_train_config c;
    dg_train_config_defaults(&c);
    dg_err err = {{0}};
    if (dg_train_config_parse(&c, argc, argv, 1, &err) != DG_OK) {
        dg_err_print(&err);
        return 1;
    }
    if (flip_overlap) {
        c.overlap_grad_reduce = !c.overlap_grad_reduce;
        if (c.use_distributed_optimizer) c.overlap_param_gather = !c.overlap_param_gather;
    }
    memset(r, 0, sizeof *r);
    dg_train_hooks hooks = {.ctx = r, .on_iteration = dg_rec_on_iteration};
    dg_train_final fin = {r, dg_rec_on_final};
    if (dg_train_on(&c, comm, &hooks, &fin, res, &err) != DG_OK) {
        dg_err_print(&err);
        return 1;
    }
    return 0;
}

static double rel(double a, double b) { return fabs(a - b) / DG_MAX(fabs(a), 1e-30); }

int main(int argc, char **argv) {
    int provided, rank, world;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    int fail = 0, distopt = 0;
    for (int i = 1; i < argc; i++) distopt |= !strcmp(argv[i], "--use-distributed-optimizer");

    /* 1. the single-rank reference, on rank 0 */
    dg_train_record ref = {0}, dp = {0}, dp2 = {0};
    dg_train_result rres = {0}, dres = {0}, dres2 = {0};
    if (rank == 0) {
        printf("== reference: 1 rank\n");
        fflush(stdout);
        fail |= train(argc, argv, 0, MPI_COMM_SELF, &ref, &rres);
    }
    MPI_Bcast(&fail, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (fail) MPI_Abort(MPI_COMM_WORLD, 1);

    /* 2. data parallel over the world, 3. again with the overlap toggled */
    if (rank == 0) printf("== data parallel: %d ranks\n", world);
    fflush(stdout);
    fail |= train(argc, argv, 0, MPI_COMM_WORLD, &dp, &dres);
    if (rank == 0) printf("== data parallel: %d ranks, overlap flags toggled\n", world);
    fflush(stdout);
    fail |= train(argc, argv, 1, MPI_COMM_WORLD, &dp2, &dres2);

    /* every rank ends with the same parameters, bit for bit */
    for (int i = 0; !fail && i < dp.n_params; i++) {
        uint32_t crc = 0;
        const unsigned char *b = (const unsigned char *)dp.values[i];
        for (int64_t k = 0; k < dp.numel[i] * 4; k++) crc = crc * 31u + b[k];
        uint32_t crc0 = crc;
        MPI_Bcast(&crc0, 1, MPI_UINT32_T, 0, MPI_COMM_WORLD);
        if (crc0 != crc) {
            fprintf(stderr, "FAIL: rank %d: parameter %s differs from rank 0's\n", rank, dp.name[i]);
            fail = 1;
        }
    }
    if (rank == 0 && !fail) {
        if (dp.n_iters != ref.n_iters || dp.n_params != ref.n_params) {
            fprintf(stderr, "FAIL: %d iterations / %d parameters vs the reference's %d / %d\n", dp.n_iters,
                    dp.n_params, ref.n_iters, ref.n_params);
            fail = 1;
        }
        double worst_loss = 0, worst_param = 0;
        for (int it = 0; !fail && it < dp.n_iters; it++) {
            double e = rel(ref.loss[it], dp.loss[it]);
            worst_loss = DG_MAX(worst_loss, e);
            printf("iteration %d: lm loss 1 rank %.9e, %d ranks %.9e (rel %.2e); grad norm %.9e vs %.9e\n", it + 1,
                   ref.loss[it], world, dp.loss[it], e, ref.gnorm[it], dp.gnorm[it]);
            if (e > RTOL) fail = 1;
            if (memcmp(&dp.loss[it], &dp2.loss[it], sizeof(double)) ||
                memcmp(&dp.gnorm[it], &dp2.gnorm[it], sizeof(double))) {
                fprintf(stderr, "FAIL: iteration %d: losses with and without --overlap-grad-reduce differ\n", it + 1);
                fail = 1;
            }
        }
        for (int i = 0; !fail && i < dp.n_params; i++) {
            double d2 = 0, a2 = 0, maxd = 0;
            for (int64_t k = 0; k < dp.numel[i]; k++) {
                double d = (double)dp.values[i][k] - ref.values[i][k];
                d2 += d * d;
                a2 += (double)ref.values[i][k] * ref.values[i][k];
                maxd = DG_MAX(maxd, fabs(d));
            }
            double e = sqrt(d2) / DG_MAX(sqrt(a2), 1e-30);
            worst_param = DG_MAX(worst_param, e);
            if (e > RTOL) {
                fprintf(stderr, "FAIL: parameter %s: relative difference %.3e (max abs %.3e)\n", dp.name[i], e, maxd);
                fail = 1;
            }
            if (memcmp(dp.values[i], dp2.values[i], sizeof(float) * (size_t)dp.numel[i])) {
                fprintf(stderr, "FAIL: parameter %s differs with and without --overlap-grad-reduce\n", dp.name[i]);
                fail = 1;
            }
        }
        printf("worst relative difference to 1 rank: losses %.3e, parameters %.3e (tolerance %.0e)\n", worst_loss,
               worst_param, RTOL);
        printf("optimizer state per rank: %zu bytes with 1 rank, %zu with %d (ratio %.4f; %d buckets)\n",
               rres.opt_state_bytes, dres.opt_state_bytes, world,
               (double)dres.opt_state_bytes / (double)rres.opt_state_bytes, dres.n_buckets);
        if (distopt) {
            /* 1/DP, up to the padding: at most one element per bucket and rank, 12 bytes each. */
            double want = (double)rres.opt_state_bytes / world;
            if (fabs((double)dres.opt_state_bytes - want) > 12.0 * dres.n_buckets) {
                fprintf(stderr, "FAIL: optimizer state %zu bytes per rank, want about %.0f (1/%d)\n",
                        dres.opt_state_bytes, want, world);
                fail = 1;
            }
        } else if (dres.opt_state_bytes != rres.opt_state_bytes) {
            fprintf(stderr, "FAIL: without the distributed optimizer every rank holds all the state\n");
            fail = 1;
        }
    }
    dg_rec_free(&ref);
    dg_rec_free(&dp);
    dg_rec_free(&dp2);
    int any = 0;
    MPI_Allreduce(&fail, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) printf("dist_train_check: %s\n", any ? "FAIL" : "ok");
    MPI_Finalize();
    return any ? 1 : 0;
}
