/* bench_ckpt.c — issue 17, acceptance 2: a sharded save (every rank writes
 * its own slices, io/dg_ckpt_shards.h) against the rank-0 save it replaced
 * (every slice gathered to rank 0, which writes whole tensors), on the same
 * state and the same file system in the same run; and the step time of a
 * compute loop while an --async-save writes in the background, against the
 * same loop with no save.
 *
 * usage: mpirun -np 4 --bind-to none bench_ckpt [DIR [MB]]
 *        DIR: where checkpoints go (default /tmp), MB: the global state in
 *        MB (default 96: 8 tensors [1024 x 3072] f32 split over the ranks by
 *        rows, as TP/EP weights are, plus 8 replicated [3072] norms).
 *
 * Each save is timed from its start until the tracker is in place on every
 * rank (barrier); the two kinds alternate (rank-0, sharded, sharded,
 * rank-0, ...) over 3 rounds and the medians are compared. The async part
 * runs a fixed memory-bound step: 6 with no save, 12 with a save started
 * (snapshot included) at the first and again whenever the previous one has
 * finished on every rank, 6 more with no save; it prints both mean step
 * times and the ratio. On a machine with fewer idle cores than ranks the
 * writer threads (nice 19) still take some of the compute's share. */
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

static double save_sharded(const state *s, const char *dir, int64_t it) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    dg_ckpt_piece p[N_BIG + N_NORM];
    int n = pieces_of(s, p);
    dg_ckpt_plan plan;
    plan_of(s, p, n, &plan);
    long pid = begin(s, dir, it);
    dg_ckpt_meta m;
    dg_ckpt_meta_init(&m);
    m.iteration = it;
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

/* A fixed step: passes over a 32 MB buffer. */
static double step(float *buf, int64_t n) {
    double t0 = now();
    for (int pass = 0; pass < 8; pass++)
        for (int64_t i = 0; i < n; i++) buf[i] = buf[i] * 0.999f + 1e-3f;
    MPI_Barrier(MPI_COMM_WORLD);
    return now() - t0;
}

static void bench_async(const state *s, const char *dir) {
    int64_t n = 8 << 20;
    float *buf = dg_aligned_alloc(sizeof(float) * (size_t)n);
    memset(buf, 0, sizeof(float) * (size_t)n);
    const int steps = 12;
    double plain = 0, during = 0, starting = 0; /* starting: the steps that also took a snapshot */
    step(buf, n);
    /* no-save steps before and after the saving ones (half each), so a
     * machine whose load drifts weighs on both alike */
    for (int i = 0; i < steps / 2; i++) plain += step(buf, n) / steps;
    dg_ckpt_async *a = dg_ckpt_async_new();
    dg_err err = {{0}};
    int saves = 0;
    for (int i = 0; i < steps; i++) {
        double t0 = now();
        int64_t done;
        /* start the next save once the previous one is finished on every rank */
        double s0 = now();
        int done_here = dg_ckpt_async_done(a), all_done = 0;
        MPI_Allreduce(&done_here, &all_done, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (i == 0 || all_done) {
            check(dg_ckpt_async_wait(a, &done, &err), &err);
            dg_ckpt_piece p[N_BIG + N_NORM];
            int np = pieces_of(s, p);
            dg_ckpt_plan plan;
            plan_of(s, p, np, &plan);
            long pid = begin(s, dir, 100 + i);
            dg_ckpt_meta m;
            dg_ckpt_meta_init(&m);
            m.iteration = 100 + i;
            check(dg_ckpt_async_start(a, dir, pid, &m, &plan, s->rank, p, 60, NULL, &err), &err);
            saves++;
            starting += now() - s0;
        }
        during += (now() - t0 + step(buf, n)) / steps;
    }
    int64_t done;
    check(dg_ckpt_async_wait(a, &done, &err), &err);
    dg_ckpt_async_free(a);
    for (int i = 0; i < steps - steps / 2; i++) plain += step(buf, n) / steps;
    dg_free(buf);
    if (s->rank == 0)
        printf("async: step %.1f ms with no save, %.1f ms during %d background saves (snapshot included; "
               "%.1f ms per save to plan and snapshot): ratio %.3f (acceptance: <= 1.10)\n",
               plain * 1e3, during * 1e3, saves, starting / DG_MAX(saves, 1) * 1e3, during / plain);
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
    bench_async(&s, dir);
    if (s.rank == 0) dg_ckpt_remove_tree(dir);
    for (int i = 0; i < N_BIG; i++) dg_free(s.big[i]);
    for (int i = 0; i < N_NORM; i++) dg_free(s.norm[i]);
    MPI_Finalize();
    return 0;
}
