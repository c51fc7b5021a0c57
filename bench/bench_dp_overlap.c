/* bench_dp_overlap.c — how much of data parallelism's gradient reduction
 * hides under backward, with and without --overlap-grad-reduce.
 *
 * usage: mpirun -np 2 --bind-to none bench_dp_overlap [train flags...]
 *        (defaults: the main job's MoE config on mock data, 6 iterations)
 *
 * Runs the same training twice over MPI_COMM_WORLD, overlap off then on, and
 * prints per step (averaged over all micro-batch steps after the first
 * iteration's): step time, compute and comm busy time, exposed comm and the
 * hidden fraction h = (T_comp + T_comm - T_step) / T_comm. Both runs must
 * print the same losses (the overlap changes when, never what). On a box
 * with fewer cores than ranks x 2 threads the comm thread competes with
 * compute for a core, which caps what overlap can win. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "dg_trainer.h"

int main(int argc, char **argv) {
    int provided, rank, world;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    double last[2] = {0, 0};
    dg_train_result r[2];
    for (int ov = 0; ov < 2; ov++) {
        dg_train_config c;
        dg_train_config_defaults(&c);
        c.mock_data = 1;
        c.null_vocab_size = 1000;
        c.train_iters = 6;
        c.log_interval = 6;
        c.eval_iters = 0;
        c.ddp_bucket_size = 1000000;
        dg_err err = {{0}};
        if (dg_train_config_parse(&c, argc, argv, 1, &err) != DG_OK) {
            if (rank == 0) dg_err_print(&err);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        c.overlap_grad_reduce = ov;
        if (dg_train(&c, NULL, &r[ov], &err) != DG_OK) {
            dg_err_print(&err);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        last[ov] = r[ov].last_lm_loss;
    }
    if (rank == 0) {
        for (int ov = 0; ov < 2; ov++) {
            const dg_train_result *x = &r[ov];
            double n = x->steps > 0 ? x->steps : 1;
            double h = x->comm_busy > 0 ? (x->compute_busy + x->comm_busy - x->step_time) / x->comm_busy : 0;
            printf("bench_dp_overlap: %d ranks, overlap %-3s: %d buckets | step %.2f ms | compute %.2f ms | "
                   "comm %.2f ms | exposed comm %.2f ms | hidden h = %.3f | last lm loss %.6f\n",
                   world, ov ? "on" : "off", x->n_buckets, 1e3 * x->step_time / n, 1e3 * x->compute_busy / n,
                   1e3 * x->comm_busy / n, 1e3 * x->exposed_comm / n, h, x->last_lm_loss);
        }
        if (memcmp(&last[0], &last[1], sizeof(double)))
            printf("bench_dp_overlap: WARNING: losses differ with and without overlap\n");
    }
    MPI_Finalize();
    return 0;
}
