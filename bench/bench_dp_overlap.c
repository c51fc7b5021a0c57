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
 * compute for a core, which caps what overlap can win.
 *
 * The runs go off, on, on, off (each figure is the mean of its two runs),
 * so a machine whose load drifts during the bench hits both alike.
 * --emulate-link (dg_comm_emulate.h) puts the gradient reductions on an
 * emulated link, e.g. `--emulate-link 1,10` (1 GB/s, 10 us): on this box
 * "communication" is otherwise a memory copy, which overlap cannot hide
 * much of. The last line prints the ratio of step times on/off and h. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "dg_trainer.h"

/* One training run; returns 0 or the exit code. */
static int run(int argc, char **argv, int overlap, int rank, dg_train_result *r) {
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
        return 2;
    }
    c.overlap_grad_reduce = overlap;
    int st = dg_train(&c, NULL, r, &err);
    if (st != DG_OK) {
        if (rank == 0 || err.msg[0]) dg_err_print(&err);
        return st == DG_EINPUT ? 2 : 1;
    }
    return 0;
}

/* Per-step means of the runs of one setting. */
typedef struct figures {
    double step, compute, comm, exposed, h, loss;
    int buckets;
} figures;

static void add(figures *f, const dg_train_result *x, double w) {
    double n = x->steps > 0 ? x->steps : 1;
    f->step += w * x->step_time / n;
    f->compute += w * x->compute_busy / n;
    f->comm += w * x->comm_busy / n;
    f->exposed += w * x->exposed_comm / n;
    f->buckets = x->n_buckets;
    f->loss = x->last_lm_loss;
}

int main(int argc, char **argv) {
    int provided, rank, world;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    static const int order[4] = {0, 1, 1, 0}; /* off, on, on, off */
    figures f[2];
    memset(f, 0, sizeof f);
    int same = 1;
    double first_loss[2] = {0, 0};
    for (int i = 0; i < 4; i++) {
        dg_train_result r;
        int ov = order[i], rc = run(argc, argv, ov, rank, &r);
        if (rc) MPI_Abort(MPI_COMM_WORLD, rc);
        if (i == 0) first_loss[0] = r.last_lm_loss;
        first_loss[1] = r.last_lm_loss;
        same = same && !memcmp(&first_loss[0], &first_loss[1], sizeof(double));
        add(&f[ov], &r, 0.5);
    }
    if (rank == 0) {
        for (int ov = 0; ov < 2; ov++) {
            figures *x = &f[ov];
            x->h = x->comm > 0 ? (x->compute + x->comm - x->step) / x->comm : 0;
            printf("bench_dp_overlap: %d ranks, overlap %-3s: %d buckets | step %.2f ms | compute %.2f ms | "
                   "comm %.2f ms | exposed comm %.2f ms | hidden h = %.3f | last lm loss %.6f\n",
                   world, ov ? "on" : "off", x->buckets, 1e3 * x->step, 1e3 * x->compute, 1e3 * x->comm,
                   1e3 * x->exposed, x->h, x->loss);
        }
        printf("bench_dp_overlap: step time on/off = %.3f; hidden-communication fraction h: off %.3f, on %.3f "
               "(means of 2 runs each, run off-on-on-off)\n",
               f[1].step / f[0].step, f[0].h, f[1].h);
        if (!same) printf("bench_dp_overlap: WARNING: losses differ with and without overlap\n");
    }
    MPI_Finalize();
    return 0;
}
