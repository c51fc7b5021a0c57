/* cmd_train.c — `dagatron train [Megatron flags]`: pretrain an MoE model. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "dg_cli.h"
#include "dg_trainer.h"

/* How a failed run ends. Failures the ranks agreed on come back on every
 * rank with the same status, and err holds what this rank should print
 * (empty when another rank reports it): print, finalize, exit. A rank that
 * failed inside a step, where the others may wait in a collective it will
 * never join, prints its reason with its rank and aborts the job, so no rank
 * is left waiting. */
static int train_failed(int st, const dg_err *err, const dg_train_result *res, int rank) {
    if (res->stranded) {
        fprintf(stderr, "dagatron: rank %d: %s\n", rank, err->msg);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, st);
    }
    if (err->msg[0]) dg_err_print(err);
    MPI_Finalize();
    return st;
}

int dg_cmd_train(int argc, char **argv) {
    /* Launched by mpirun (or alone). Every rank runs the same loop over the
     * rank grid (dg_grid.h); a world size the parallel sizes do not divide
     * is reported by dg_train before any work. MPI_THREAD_MULTIPLE: the comm
     * stream's thread calls MPI during a step, the main thread between steps.
     * MPI starts before the flags are read so that rank 0 alone prints what
     * every rank finds wrong with them (and --help). */
    int provided = 0, rank = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    dg_train_config c;
    dg_train_config_defaults(&c);
    dg_err err = {{0}};
    int st = dg_train_config_parse(&c, argc, argv, 1, &err);
    if (st != DG_OK) {
        int help = !strcmp(err.msg, "help");
        if (rank == 0 && help) {
            int n;
            const dg_arg_spec *specs = dg_train_flags(&n);
            printf("usage: dagatron train [flags]   (Megatron-LM's flag names)\n\n");
            dg_args_help(stdout, specs, n);
            dg_train_compat_help(stdout);
        } else if (rank == 0) {
            dg_err_print(&err);
        }
        MPI_Finalize();
        return help ? 0 : DG_EINPUT;
    }
    dg_train_result res;
    st = dg_train(&c, NULL, &res, &err);
    if (st != DG_OK) return train_failed(st, &err, &res, rank);
    if (rank == 0)
        printf("dagatron train: done: %d iterations, lm loss %.4f -> %.4f, %d skipped\n", res.iterations,
               res.first_lm_loss, res.last_lm_loss, res.skipped);
    /* dg_train resolved an unset --device (train/dg_device_pick.h); the
     * fallback note comes after the run: bad input, which dg_train finds,
     * must leave stdout empty and stderr one line. */
    if (res.device_note[0] && rank == 0) printf("dagatron train: ran with --device cpu: %s\n", res.device_note);
    MPI_Finalize();
    return 0;
}
