/* bench_ckpt.c — issue 17, acceptance 2: a sharded save (every rank writes
 * its own slices, io/dg_ckpt_shards.h) against the rank-0 save it replaced
 * (every slice gathered to rank 0, which writes whole tensors), on the same
 * state and the same file system in the same run; and the step time of a
 * compute loop while an --async-save writes in the background, against the
 * same loop with no save.
 *
 * usage: mpirun -np 4 --bind-to none bench_ckpt [DIR [MB [SAVES]]]
 *        DIR: where checkpoints go (default /tmp), MB: the global state in
 *        MB (default 96: 8 tensors [1024 x 3072] f32 split over the ranks by
 *        rows, as TP/EP weights are, plus 8 replicated [3072] norms; 24 MB a
 *        rank at 4 ranks), SAVES: background saves measured (default 6).
 *
 * Each save is timed from its start until the tracker is in place on every
 * rank (barrier); the two kinds alternate (rank-0, sharded, sharded,
 * rank-0, ...) over 3 rounds and the medians are compared.
 *
 * The async part (bench_async) runs a fixed memory-bound step (8 passes
 * over 32 MB a rank, then an all-reduce, about 100 ms at 4 ranks on 2
 * cores) and defines a save's steps as the step that starts it (its plan
 * and snapshot counted in that step) through the first step that finds it
 * finished on every rank; each save's steps are followed by as many steps
 * with no save. It prints the mean step time of both kinds and their ratio
 * (acceptance: <= 1.10), the medians, the time to plan and snapshot and the
 * writers' CPU time. The writer threads run SCHED_IDLE, so on a machine
 * with fewer idle cores than ranks a save takes longer instead of the
 * steps; a loaded machine makes single runs noisy: run it several times. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dg_checkpoint.h"
#include "dg_ckpt_async.h"
#include "dg_ckpt_fs.h"
#include "dg_ckpt_shards.h"

#define N_BIG 8
#define N_NORM 8

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct state {
    int rank, size;
    int64_t rows, cols; /* each big tensor's global shape */
    float *big[N_BIG], *norm[N_NORM];
} state;

static void state_make(state *s, double mb) {
    s->cols = 3072;
    s->rows = (int64_t)(mb * 1e6 / 4 / (double)N_BIG / (double)s->cols) / s->size * s->size;
    int64_t local = s->rows / s->size * s->cols;
    for (int i = 0; i < N_BIG; i++) {
        s->big[i] = dg_aligned_alloc(sizeof(float) * (size_t)local);
        for (int64_t k = 0; k < local; k++) s->big[i][k] = (float)(i + s->rank) + (float)k * 1e-6f;
    }
    for (int i = 0; i < N_NORM; i++) {
        s->norm[i] = dg_aligned_alloc(sizeof(float) * (size_t)s->cols);
        for (int64_t k = 0; k < s->cols; k++) s->norm[i][k] = 1.0f + (float)k * 1e-4f;
    }
}

/* This rank's pieces: its rows of each big tensor, every norm whole. */
static int pieces_of(const state *s, dg_ckpt_piece *p) {
    int n = 0;
    int64_t lr = s->rows / s->size;
    for (int i = 0; i < N_BIG + N_NORM; i++, n++) {
        dg_ckpt_piece *x = &p[n];
        memset(x, 0, sizeof *x);
        snprintf(x->name, sizeof x->name, i < N_BIG ? "decoder.layers.%d.mlp.fc1.weight" : "decoder.layers.%d.norm.weight",
                 i % N_BIG);
        x->dtype = DG_F32;
        if (i < N_BIG) {
            x->ndim = 2;
            x->global_shape[0] = s->rows;
            x->global_shape[1] = x->shape[1] = s->cols;
            x->start[0] = lr * s->rank;
            x->shape[0] = lr;
            x->stride[0] = s->cols;
            x->stride[1] = 1;
            x->data = s->big[i];
        } else {
            x->ndim = 1;
            x->global_shape[0] = x->shape[0] = s->cols;
            x->stride[0] = 1;
            x->data = s->norm[i - N_BIG];
        }
    }
    return n;
}

static void check(int st, const dg_err *err) {
    if (st != DG_OK) {
        fprintf(stderr, "bench_ckpt: %s\n", err->msg);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

/* Plan a sharded save of this rank's pieces (keys all-gathered). */
static void plan_of(const state *s, const dg_ckpt_piece *p, int n, dg_ckpt_plan *plan) {
    dg_ckpt_key *mine = dg_calloc((size_t)n, sizeof *mine), *all = dg_calloc((size_t)(n * s->size), sizeof *all);
    for (int i = 0; i < n; i++) dg_ckpt_key_of(&p[i], &mine[i]);
    MPI_Allgather(mine, n * DG_CKPT_KEY_WORDS, MPI_INT64_T, all, n * DG_CKPT_KEY_WORDS, MPI_INT64_T, MPI_COMM_WORLD);
    int *counts = dg_calloc((size_t)s->size, sizeof *counts);
    for (int r = 0; r < s->size; r++) counts[r] = n;
    dg_err err = {{0}};
    check(dg_ckpt_plan_make(s->size, counts, all, n, plan, &err), &err);
    dg_free(counts);
    dg_free(mine);
    dg_free(all);
}

static long begin(const state *s, const char *dir, int64_t it) {
    long pid = (long)getpid();
    dg_err err = {{0}};
    if (s->rank == 0) check(dg_ckpt_begin(dir, it, pid, &err), &err);
    MPI_Bcast(&pid, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    return pid;
}

/* What every sharded save does first: this rank's pieces, the plan, rank
 * 0's temporary directory (its pid returned) and the meta of iteration it. */
static long prepare(const state *s, const char *dir, int64_t it, dg_ckpt_piece *p, dg_ckpt_plan *plan,
                    dg_ckpt_meta *m) {
    int n = pieces_of(s, p);
    plan_of(s, p, n, plan);
    long pid = begin(s, dir, it);
    dg_ckpt_meta_init(m);
    m->iteration = it;
    return pid;
}

static double save_sharded(const state *s, const char *dir, int64_t it) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    dg_ckpt_piece p[N_BIG + N_NORM];
    dg_ckpt_plan plan;
    dg_ckpt_meta m;
    long pid = prepare(s, dir, it, p, &plan, &m);
    dg_err err = {{0}};
    check(dg_ckpt_write_rank(dir, it, pid, &plan, s->rank, p, NULL, &err), &err);
    MPI_Barrier(MPI_COMM_WORLD);
    if (s->rank == 0) check(dg_ckpt_finish(dir, pid, &m, &plan, 60, NULL, &err), &err);
    MPI_Barrier(MPI_COMM_WORLD);
    dg_ckpt_plan_free(&plan);
    return now() - t0;
}

/* The old way: gather every big tensor to rank 0, which writes all. */
static double save_rank0(const state *s, const char *dir, int64_t it) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    int64_t local = s->rows / s->size * s->cols;
    dg_ckpt_tensor t[N_BIG + N_NORM];
    float *full[N_BIG] = {0};
    for (int i = 0; i < N_BIG; i++) {
        if (s->rank == 0) full[i] = dg_aligned_alloc(sizeof(float) * (size_t)(local * s->size));
        MPI_Gather(s->big[i], (int)local, MPI_FLOAT, full[i], (int)local, MPI_FLOAT, 0, MPI_COMM_WORLD);
    }
    if (s->rank == 0) {
        for (int i = 0; i < N_BIG + N_NORM; i++) {
            memset(&t[i], 0, sizeof t[i]);
            snprintf(t[i].name, sizeof t[i].name, i < N_BIG ? "decoder.layers.%d.mlp.fc1.weight" : "decoder.layers.%d.norm.weight",
                     i % N_BIG);
            t[i].dtype = DG_F32;
            t[i].ndim = i < N_BIG ? 2 : 1;
            t[i].shape[0] = i < N_BIG ? s->rows : s->cols;
            t[i].shape[1] = s->cols;
            t[i].data = i < N_BIG ? (void *)full[i] : (void *)s->norm[i - N_BIG];
        }
        dg_ckpt_meta m;
        dg_ckpt_meta_init(&m);
        m.iteration = it;
        dg_err err = {{0}};
        check(dg_ckpt_save(dir, &m, t, N_BIG + N_NORM, NULL, &err), &err);
    }
    for (int i = 0; i < N_BIG; i++) dg_free(full[i]);
    MPI_Barrier(MPI_COMM_WORLD);
    return now() - t0;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A fixed step: passes over a 32 MB buffer, then the all-reduce that
 * tells every rank whether the save in flight (if any) has finished on
 * every rank; the all-reduce also ends the step together on every rank, as
 * a training step's gradient all-reduce does. Steps with and without a save
 * run this same code. */
static double step(float *buf, int64_t n, dg_ckpt_async *a, int *all_done) {
    double t0 = now();
    for (int pass = 0; pass < 8; pass++)
        for (int64_t i = 0; i < n; i++) buf[i] = buf[i] * 0.999f + 1e-3f;
    int here = dg_ckpt_async_done(a);
    MPI_Allreduce(&here, all_done, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return now() - t0;
}

/* Start an asynchronous save of iteration it, as dg_dist_ckpt_save does on
 * the training thread: wait for the previous one, plan (keys exchanged),
 * rank 0 creates the temporary directory, snapshot, start the writer.
 * Returns the seconds this took. */
static double start_save(const state *s, dg_ckpt_async *a, const char *dir, int64_t it) {
    double t0 = now();
    int64_t done;
    dg_err err = {{0}};
    check(dg_ckpt_async_wait(a, &done, &err), &err);
    dg_ckpt_piece p[N_BIG + N_NORM];
    dg_ckpt_plan plan;
    dg_ckpt_meta m;
    long pid = prepare(s, dir, it, p, &plan, &m);
    check(dg_ckpt_async_start(a, dir, pid, &m, &plan, s->rank, p, 60, NULL, &err), &err);
    return now() - t0;
}

/* --async-save's cost to training. A save's steps are the step that starts
 * it (its start, snapshot included, counted in that step) and every step
 * after it up to and including the first whose all-reduce finds it finished
 * on every rank: the steps during which the save is being written. Each
 * save's steps are followed by as many steps with no save, so both kinds
 * cover the same stretch of time and a drift in the machine's load weighs
 * on both alike; the ratio compares the mean step time during saves with
 * the mean step time without one. One save before the rounds maps the
 * snapshot buffer, which later saves reuse (a run's first save pays that
 * once; printed, not in the ratio). */
/* CPU seconds of this process's threads other than the calling one (the
 * writer, and MPI's own helpers, which run in both kinds of step). */
static double other_threads_cpu(void) {
    struct timespec p, t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &p);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)(p.tv_sec - t.tv_sec) + 1e-9 * (double)(p.tv_nsec - t.tv_nsec);
}

static double median(double *x, int n) {
    qsort(x, (size_t)n, sizeof *x, cmp_d);
    return n ? x[n / 2] : 0;
}

static void bench_async(const state *s, const char *dir, int rounds) {
    enum { MAX_SAVE_STEPS = 400 };
    int64_t n = 8 << 20, it = 100;
    float *buf = dg_aligned_alloc(sizeof(float) * (size_t)n);
    double *tp = dg_calloc((size_t)(rounds * MAX_SAVE_STEPS), sizeof *tp), *td = dg_calloc((size_t)(rounds * MAX_SAVE_STEPS), sizeof *td);
    dg_ckpt_async *a = dg_ckpt_async_new();
    dg_err err = {{0}};
    int all_done = 1;
    double first = start_save(s, a, dir, it++), plain = 0, during = 0, starting = 0, writer = 0;
    int n_plain = 0, n_during = 0;
    int64_t done;
    check(dg_ckpt_async_wait(a, &done, &err), &err);
    step(buf, n, a, &all_done);
    for (int r = 0; r < rounds; r++) {
        double c0 = other_threads_cpu(), t = start_save(s, a, dir, it++);
        starting += t;
        int k = 0;
        for (all_done = 0; k < MAX_SAVE_STEPS && !all_done; k++, t = 0) {
            td[n_during + k] = t + step(buf, n, a, &all_done);
            during += td[n_during + k];
        }
        check(dg_ckpt_async_wait(a, &done, &err), &err);
        double c1 = other_threads_cpu();
        for (int i = 0; i < k; i++) plain += tp[n_plain + i] = step(buf, n, a, &all_done);
        writer += (c1 - c0) - (other_threads_cpu() - c1); /* less what MPI's threads take in as many plain steps */
        n_during += k;
        n_plain += k;
    }
    dg_ckpt_async_free(a);
    plain /= n_plain;
    during /= DG_MAX(n_during, 1);
    double mp = median(tp, n_plain), md = median(td, n_during), wcpu = 0;
    MPI_Reduce(&writer, &wcpu, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (s->rank == 0)
        printf("async: %d background saves of %.1f steps each (the steps during which a save is being written: "
               "from the one that starts it to the first that finds it finished on every rank), each followed "
               "by as many steps with no save; %.1f ms to plan and snapshot, in a save's first step (the first "
               "save's %.1f ms, which maps the snapshot buffer, not counted); the writers used %.0f ms of CPU per "
               "save over all ranks\n"
               "async: step %.1f ms with no save, %.1f ms during a save: ratio %.3f (acceptance: <= 1.10); "
               "medians %.1f and %.1f ms: ratio %.3f\n",
               rounds, (double)n_during / rounds, starting / rounds * 1e3, first * 1e3, wcpu / rounds * 1e3,
               plain * 1e3, during * 1e3, during / plain, mp * 1e3, md * 1e3, md / mp);
    dg_free(tp);
    dg_free(td);
    dg_free(buf);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    state s;
    memset(&s, 0, sizeof s);
    MPI_Comm_rank(MPI_COMM_WORLD, &s.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &s.size);
    char dir[512];
    snprintf(dir, sizeof dir, "%s/bench_ckpt.%ld", argc > 1 ? argv[1] : "/tmp", (long)getppid());
    state_make(&s, argc > 2 ? atof(argv[2]) : 96);
    const int rounds = 3;
    double old[3], par[3];
    for (int r = 0; r < rounds; r++) {
        if (r % 2 == 0) {
            old[r] = save_rank0(&s, dir, 2 * r + 1);
            par[r] = save_sharded(&s, dir, 2 * r + 2);
        } else {
            par[r] = save_sharded(&s, dir, 2 * r + 2);
            old[r] = save_rank0(&s, dir, 2 * r + 1);
        }
    }
    qsort(old, rounds, sizeof *old, cmp_d);
    qsort(par, rounds, sizeof *par, cmp_d);
    if (s.rank == 0)
        printf("save of %.0f MB on %d ranks: rank-0 save %.3f s, sharded save %.3f s (medians of %d): "
               "sharded is %.2fx faster\n",
               (double)(s.rows * s.cols * N_BIG + s.cols * N_NORM) * 4 / 1e6, s.size, old[1], par[1], rounds,
               old[1] / par[1]);
    bench_async(&s, dir, argc > 3 ? atoi(argv[3]) : 6);
    if (s.rank == 0) dg_ckpt_remove_tree(dir);
    for (int i = 0; i < N_BIG; i++) dg_free(s.big[i]);
    for (int i = 0; i < N_NORM; i++) dg_free(s.norm[i]);
    MPI_Finalize();
    return 0;
}
