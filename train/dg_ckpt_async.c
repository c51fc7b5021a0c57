/* dg_ckpt_async.c — see dg_ckpt_async.h. */
#include "dg_ckpt_async.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "dg_ckpt_fs.h"

struct dg_ckpt_async {
    int running;
    atomic_int finished; /* the thread is done (set last by it) */
    pthread_t thread;
    /* the save in flight, owned by the thread until joined */
    char dir[DG_CKPT_STR_LEN];
    long pid;
    int rank;
    double timeout_s;
    dg_ckpt_meta meta;
    dg_ckpt_plan plan;
    dg_ckpt_piece *pieces; /* indexed like the rank's keys; only written ones point into snap */
    char *snap;            /* the snapshot: the written boxes, contiguous; kept from save to save */
    size_t snap_cap;       /* snap's bytes */
    dg_ckpt_save_opts opts;
    int st;
    dg_err err;
};

dg_ckpt_async *dg_ckpt_async_new(void) { return dg_calloc(1, sizeof(dg_ckpt_async)); }

static void release(dg_ckpt_async *a) {
    dg_ckpt_plan_free(&a->plan);
    dg_free(a->pieces);
    a->pieces = NULL;
}

void dg_ckpt_async_free(dg_ckpt_async *a) {
    if (!a) return;
    int64_t it;
    dg_ckpt_async_wait(a, &it, NULL);
    dg_free(a->snap);
    dg_free(a);
}

static void *writer_main(void *arg) {
    dg_ckpt_async *a = arg;
    /* Training comes first: on a machine with no idle core the writer gets
     * what compute leaves. SCHED_IDLE runs it only when its core has nothing
     * else to run (a thread may always lower its own policy); where that is
     * refused, nice 19 (Linux: nice is per thread). */
    struct sched_param idle = {0};
    if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle) != 0)
        setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19);
    a->st = dg_ckpt_write_rank(a->dir, a->meta.iteration, a->pid, &a->plan, a->rank, a->pieces, &a->opts, &a->err);
    if (a->rank == 0) {
        if (a->st == DG_OK)
            a->st = dg_ckpt_finish(a->dir, a->pid, &a->meta, &a->plan, a->timeout_s, &a->opts, &a->err);
        else
            dg_ckpt_abort(a->dir, a->meta.iteration, a->pid);
    }
    atomic_store(&a->finished, 1);
    return NULL;
}

/* Copy this rank's written boxes into one host buffer (64-byte aligned
 * each) and point the pieces there. */
static void snapshot(dg_ckpt_async *a, const dg_ckpt_piece *pieces, int n_keys) {
    const dg_ckpt_plan *p = &a->plan;
    size_t total = 0;
    for (int i = 0; i < p->count[a->rank]; i++) total += ((size_t)p->entries[p->first[a->rank] + i].nbytes + 63) / 64 * 64;
    /* The buffer outlives the save: a run saves the same boxes every time,
     * so from the second save on the snapshot is one pass of copies into
     * memory that is already mapped (a fresh buffer costs the training
     * thread a page fault and a zeroing per 4 KiB first). */
    if (total > a->snap_cap) {
        dg_free(a->snap);
        a->snap = dg_aligned_alloc(total);
        a->snap_cap = total;
    }
    a->pieces = dg_calloc((size_t)DG_MAX(n_keys, 1), sizeof *a->pieces);
    memcpy(a->pieces, pieces, sizeof *pieces * (size_t)n_keys);
    size_t off = 0;
    for (int i = 0; i < p->count[a->rank]; i++) {
        const dg_ckpt_entry *e = &p->entries[p->first[a->rank] + i];
        dg_ckpt_piece *x = &a->pieces[p->key[p->first[a->rank] + i]];
        int64_t rm[DG_MAX_DIMS];
        dg_ckpt_row_major(x->shape, x->ndim, rm);
        dg_ckpt_box_copy(a->snap + off, rm, x->data, x->stride, x->shape, x->ndim, dg_dtype_size(x->dtype));
        x->data = a->snap + off;
        memcpy(x->stride, rm, sizeof rm);
        off += ((size_t)e->nbytes + 63) / 64 * 64;
    }
}

int dg_ckpt_async_start(dg_ckpt_async *a, const char *dir, long pid, const dg_ckpt_meta *m, dg_ckpt_plan *plan,
                        int rank, const dg_ckpt_piece *pieces, double timeout_s, const dg_ckpt_save_opts *o,
                        dg_err *err) {
    int64_t prev;
    DG_TRY(dg_ckpt_async_wait(a, &prev, err));
    snprintf(a->dir, sizeof a->dir, "%s", dir);
    a->pid = pid;
    a->rank = rank;
    a->timeout_s = timeout_s;
    a->meta = *m;
    int n_keys = 0;
    for (int i = 0; i < plan->n_entries; i++)
        if (plan->writer[i] == rank) n_keys = DG_MAX(n_keys, plan->key[i] + 1);
    a->plan = *plan;
    memset(plan, 0, sizeof *plan);
    snapshot(a, pieces, n_keys);
    a->opts = o ? *o : (dg_ckpt_save_opts){0, NULL, NULL, 0};
    a->st = DG_OK;
    memset(&a->err, 0, sizeof a->err);
    atomic_store(&a->finished, 0);
    if (pthread_create(&a->thread, NULL, writer_main, a) != 0) {
        release(a);
        return dg_err_set(err, DG_EINTERNAL, "--async-save: cannot start the writer thread");
    }
    a->running = 1;
    return DG_OK;
}

int dg_ckpt_async_pending(const dg_ckpt_async *a) { return a && a->running; }

int dg_ckpt_async_done(dg_ckpt_async *a) { return !a || !a->running || atomic_load(&a->finished); }

int dg_ckpt_async_wait(dg_ckpt_async *a, int64_t *iteration, dg_err *err) {
    *iteration = -1;
    if (!a || !a->running) return DG_OK;
    pthread_join(a->thread, NULL);
    a->running = 0;
    *iteration = a->meta.iteration;
    int st = a->st;
    if (st != DG_OK && err) *err = a->err;
    release(a);
    return st;
}
