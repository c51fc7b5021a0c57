/* bench_pp_bubble.c — the pipeline bubble of each schedule, measured from
 * the trace of a real PP=2 run, beside the plan and the theory (issue 13,
 * acceptance 2).
 *
 * usage: mpirun -np 2 --bind-to core bench_pp_bubble [--rounds N]
 *            [--row "FLAGS"]... [train flags...]
 *
 * Each row is a training run with the row's flags added (default rows:
 * `--pipeline-schedule 1f1b`, `... zero-bubble-h1`, `...
 * all-forward-all-backward`; another schedule is one more --row, e.g.
 * --row "--pipeline-schedule interleaved-1f1b
 * --num-virtual-stages-per-pipeline-rank 2"). The default model is a dense
 * GPT of 4 layers, hidden 128, sequence 128, micro-batch 4 and 4
 * micro-batches on mock data with a vocabulary of 256, so that the two
 * stages cost about the same (2 layers each; the embedding and the output
 * layer are ~4% of a stage), one compute thread per rank; train flags after
 * it override it. Each run traces its second iteration (`--trace`), and
 * the table reads the trace back (train/dg_trace_svg.h):
 *
 *   measured: a rank's bubble is the part of the window — the first
 *     micro-batch task's start to the last one's end, over all ranks — its
 *     compute stream is idle; the figure is the mean over ranks, the median
 *     over --rounds runs (rows interleaved, so load drift hits all alike);
 *   per rank: compute time by block kind (W: weight gradients run after
 *     the micro-batch's last input-gradient task) — how equal the stages
 *     are — and the idle time split: waiting on a peer, after the data
 *     came (the comm thread's hand-off to compute), dispatch gaps under
 *     100 us between tasks (the executor's own overhead);
 *   planned: the schedule's slot model (graph/passes/dg_pp_sim.h) run with
 *     this run's block costs averaged over the ranks — what the ordering
 *     alone gives, without communication, per-task overheads or unequal
 *     stages; unequal: the same with each rank's own costs on its stage
 *     (what unequal stages, or ranks running at unequal speeds, add);
 *     what remains between unequal and measured is speeds changing during
 *     the step, communication and overheads (split per rank below);
 *   theory: 1F1B's (p-1)/(m+p-1);
 *   act. MiB: each rank's planned activation peak (the memory planner's
 *     arena), for comparing schedules at the same memory.
 * Losses must agree bitwise across rows (a schedule orders work, never
 * changes it): checked, exit 1 otherwise. */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "dg_pp_sim.h"
#include "dg_trace_svg.h"
#include "dg_trainer.h"

enum { MAX_ROWS = 8, MAX_ROUNDS = 15, MAX_RANKS = 64, MAX_ARGS = 256 };

static const char *const defaults[] = {
    "--mock-data", "--num-layers", "4", "--hidden-size", "128", "--ffn-hidden-size", "512",
    "--num-attention-heads", "8", "--seq-length", "128", "--max-position-embeddings", "128",
    "--micro-batch-size", "4", "--global-batch-size", "16", "--vocab-size", "256",
    "--make-vocab-size-divisible-by", "128", "--num-experts", "0", "--swiglu", "--normalization", "RMSNorm",
    "--position-embedding-type", "rope", "--disable-bias-linear", "--pipeline-model-parallel-size", "2",
    "--train-iters", "3", "--log-interval", "100", "--eval-iters", "0", "--lr", "1e-4",
    "--compute-threads", "1"};

typedef struct measured {
    double bubble, planned, planned_own, loss;
    int p, m;
    dg_sched_row_stats rank[MAX_RANKS];
    int n_ranks;
    size_t act[MAX_RANKS];
} measured;

/* Split `row` on spaces into argv[*argc...] (the strings are leaked into
 * the argv, which lives as long as the bench). */
static void add_words(const char *row, int *argc, char **argv) {
    char *copy = strdup(row), *save = NULL;
    for (char *w = strtok_r(copy, " ", &save); w && *argc < MAX_ARGS - 1; w = strtok_r(NULL, " ", &save))
        argv[(*argc)++] = w;
}

/* The slot model with this run's block costs per micro-batch: the mean
 * over ranks on every stage (own = 0), or each rank's own on its stage. */
static double planned(const char *sched_name, const measured *x, int own) {
    dg_pp_schedule s;
    dg_err err = {{0}};
    if (dg_pp_schedule_parse(sched_name, &s, &err) != DG_OK || x->n_ranks != x->p) return -1;
    dg_pp_sim_cost c[MAX_RANKS], mean = {0, 0, 0};
    for (int r = 0; r < x->n_ranks; r++) {
        c[r] = (dg_pp_sim_cost){x->rank[r].f_us / x->m, x->rank[r].b_us / x->m, x->rank[r].w_us / x->m};
        if (s != DG_PP_ZB_H1) c[r].b += c[r].w, c[r].w = 0; /* W inside B: the model adds them */
        mean.f += c[r].f / x->n_ranks, mean.b += c[r].b / x->n_ranks, mean.w += c[r].w / x->n_ranks;
    }
    for (int r = 0; !own && r < x->n_ranks; r++) c[r] = mean;
    dg_pp_sim_result res;
    return dg_pp_sim_stages(x->p, x->m, s, c, &res, &err) == DG_OK ? res.bubble : -1;
}

/* One run of a row: train, then rank 0 reads the trace. 0 or an exit code. */
static int run_row(int argc, char **argv, const char *trace, int rank, int world, measured *x) {
    dg_train_config c;
    dg_train_config_defaults(&c);
    dg_err err = {{0}};
    if (dg_train_config_parse(&c, argc, argv, 1, &err) != DG_OK) {
        if (rank == 0) dg_err_print(&err);
        return 2;
    }
    snprintf(c.trace, sizeof c.trace, "%s", trace);
    fflush(stdout);
    int saved = dup(1), devnull = open("/dev/null", O_WRONLY); /* the trainer's log: not the bench's */
    dup2(devnull, 1);
    dg_train_result r;
    int st = dg_train(&c, NULL, &r, &err);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    close(devnull);
    if (st != DG_OK) {
        if (err.msg[0]) dg_err_print(&err);
        return st == DG_EINPUT ? 2 : 1;
    }
    memset(x, 0, sizeof *x);
    x->loss = r.last_lm_loss;
    x->n_ranks = DG_MIN(world, MAX_RANKS);
    unsigned long long mine = r.activation_planned_bytes, all[MAX_RANKS];
    MPI_Gather(&mine, 1, MPI_UNSIGNED_LONG_LONG, all, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
    if (rank != 0) return 0;
    for (int i = 0; i < x->n_ranks; i++) x->act[i] = all[i];
    dg_sched_picture *pic = NULL;
    if (dg_sched_picture_load(trace, &pic, &err) != DG_OK) {
        dg_err_print(&err);
        return 1;
    }
    x->p = dg_sched_picture_stages(pic);
    x->m = dg_sched_picture_microbatches(pic);
    x->n_ranks = DG_MIN(dg_sched_picture_rows(pic), MAX_RANKS);
    for (int i = 0; i < x->n_ranks; i++) {
        dg_sched_picture_row(pic, i, &x->rank[i]);
        x->bubble += x->rank[i].bubble / x->n_ranks;
    }
    x->planned = planned(c.pipeline_schedule, x, 0);
    x->planned_own = planned(c.pipeline_schedule, x, 1);
    dg_sched_picture_free(pic);
    return 0;
}

static int by_bubble(const void *a, const void *b) {
    double d = ((const measured *)a)->bubble - ((const measured *)b)->bubble;
    return d < 0 ? -1 : d > 0;
}

static void print_row(const char *label, const measured *x) {
    printf("%-44s %8.3f %8.3f %8.3f %7.3f %10.1f  ", label, x->bubble, x->planned_own, x->planned,
           (double)(x->p - 1) / (x->m + x->p - 1), x->rank[0].span_us / 1e3);
    for (int i = 0; i < x->n_ranks; i++) printf(" %6.2f", x->act[i] / 1048576.0);
    printf("\n");
    for (int i = 0; i < x->n_ranks; i++) {
        const dg_sched_row_stats *r = &x->rank[i];
        printf("    rank %d: bubble %.3f; compute F %.1f, B %.1f, W %.1f ms; idle: waiting on a peer %.1f, "
               "after the data came %.2f, dispatch gaps %.2f ms\n",
               i, r->bubble, r->f_us / 1e3, r->b_us / 1e3, r->w_us / 1e3, r->wait_us / 1e3, r->handoff_us / 1e3,
               r->dispatch_us / 1e3);
    }
}

int main(int argc, char **argv) {
    int provided, rank, world;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    const char *rows[MAX_ROWS];
    int n_rows = 0, rounds = 3, n_user = 0;
    char *user[MAX_ARGS];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--row") && i + 1 < argc && n_rows < MAX_ROWS)
            rows[n_rows++] = argv[++i];
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
            int n = atoi(argv[++i]); /* DG_MIN / DG_MAX evaluate twice */
            rounds = DG_MAX(1, DG_MIN(n, MAX_ROUNDS));
        } else if (n_user < MAX_ARGS / 2)
            user[n_user++] = argv[i];
    }
    if (!n_rows) {
        rows[n_rows++] = "--pipeline-schedule 1f1b";
        rows[n_rows++] = "--pipeline-schedule zero-bubble-h1";
        rows[n_rows++] = "--pipeline-schedule all-forward-all-backward";
    }
    char trace[64] = "";
    if (rank == 0) {
        snprintf(trace, sizeof trace, "/tmp/bench_pp_bubble_XXXXXX");
        int fd = mkstemp(trace);
        if (fd >= 0) close(fd);
    }
    MPI_Bcast(trace, sizeof trace, MPI_CHAR, 0, MPI_COMM_WORLD);
    static measured runs[MAX_ROWS][MAX_ROUNDS];
    int rc = 0;
    for (int k = 0; k < rounds && !rc; k++)
        for (int j = 0; j < n_rows && !rc; j++) {
            int row = k % 2 ? n_rows - 1 - j : j; /* rows forwards, then backwards */
            char *args[MAX_ARGS];
            int n = 0;
            args[n++] = argv[0];
            for (size_t i = 0; i < sizeof defaults / sizeof *defaults; i++) args[n++] = (char *)defaults[i];
            for (int i = 0; i < n_user; i++) args[n++] = user[i];
            add_words(rows[row], &n, args);
            args[n] = NULL;
            rc = run_row(n, args, trace, rank, world, &runs[row][k]);
        }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0 && !rc) {
        printf("pipeline bubble, %d ranks: measured = mean over ranks of idle / window (median of %d runs); "
               "planned = the schedule's slot model with the ranks' mean block costs, unequal = with each rank's "
               "own; theory = (p-1)/(m+p-1)\n",
               world, rounds);
        double load = 0;
        FILE *la = fopen("/proc/loadavg", "r");
        if (la && fscanf(la, "%lf", &load) != 1) load = 0;
        if (la) fclose(la);
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        if (load > (double)cores)
            printf("note: load average %.1f on %ld cores: other processes take the ranks' cores in turns, so the "
                   "ranks run at unequal, changing speeds and wait on each other (\"waiting on a peer\")\n",
                   load, cores);
        printf("%-44s %8s %8s %8s %7s %10s   %s\n", "row", "measured", "unequal", "planned", "theory", "window ms",
               "planned activation peak per rank, MiB");
        for (int j = 0; j < n_rows; j++) {
            qsort(runs[j], (size_t)rounds, sizeof(measured), by_bubble);
            print_row(rows[j], &runs[j][rounds / 2]);
            if (runs[j][0].loss != runs[0][0].loss) {
                fprintf(stderr, "FAIL: %s: lm loss %.9e differs from %s's %.9e\n", rows[j], runs[j][0].loss, rows[0],
                        runs[0][0].loss);
                rc = 1;
            }
        }
    }
    if (rank == 0) remove(trace);
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return rc;
}
