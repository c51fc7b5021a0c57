/* dg_pool.c — a sleeping, pinned thread team behind dg_team (see dg_pool.h).
 *
 * Protocol: the caller publishes (fn, arg, n) under the mutex, bumps the
 * generation and broadcasts. A helper that sees a new generation runs its
 * range and decrements `pending`; the last one signals the caller. Helpers
 * first spin briefly on the generation (an atomic read, no lock), then
 * sleep on the condition variable; the caller likewise spins briefly on
 * `pending` before sleeping. The spins are bounded, so an idle team sleeps.
 */
#include "dg_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

/* Spin iterations before sleeping: a few microseconds, enough to catch the
 * next kernel of a busy step, short enough that an idle team sleeps. */
#define DG_POOL_SPIN 30000

typedef struct dg_pool_helper {
    dg_pool *pool;
    int index; /* member index, 1..n-1 */
    pthread_t thread;
} dg_pool_helper;

struct dg_pool {
    dg_team team;
    dg_topo *topo;
    int first_slot;
    char name[24];
    dg_pool_helper *helpers;

    pthread_mutex_t mu;
    pthread_cond_t cv_work; /* helpers wait here for a new generation */
    pthread_cond_t cv_done; /* the caller waits here for pending == 0 */
    atomic_ulong gen;       /* bumped once per job */
    atomic_int pending;     /* helpers still running the current job */
    bool stop;
    int started; /* helpers that have bound themselves (dg_pool_new waits) */

    /* the current job (written before gen is bumped) */
    dg_range_fn fn;
    void *arg;
    int64_t n;
};

static void helper_finish(dg_pool *p) {
    if (atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel) == 1) {
        /* Last helper: wake the caller if it went to sleep. Taking the lock
         * orders this signal after the caller's check-then-wait. */
        pthread_mutex_lock(&p->mu);
        pthread_cond_signal(&p->cv_done);
        pthread_mutex_unlock(&p->mu);
    }
}

static void *helper_main(void *argp) {
    dg_pool_helper *h = argp;
    dg_pool *p = h->pool;
    if (p->topo) {
        char nm[40];
        snprintf(nm, sizeof nm, "%s.%d", p->name, h->index);
        dg_topo_bind_self(p->topo, p->first_slot + h->index, nm);
    }
    pthread_mutex_lock(&p->mu);
    p->started++;
    pthread_cond_broadcast(&p->cv_done);
    pthread_mutex_unlock(&p->mu);
    /* Generation 0 means "no job yet": a job may be published before this
     * thread gets here, and must not be mistaken for one already done. */
    unsigned long seen = 0;
    for (;;) {
        /* 1. brief spin for the next job */
        unsigned long g = seen;
        for (int s = 0; s < DG_POOL_SPIN; s++) {
            g = atomic_load_explicit(&p->gen, memory_order_acquire);
            if (g != seen) break;
        }
        /* 2. sleep until there is one (or we are told to stop) */
        if (g == seen) {
            pthread_mutex_lock(&p->mu);
            while (!p->stop && (g = atomic_load(&p->gen)) == seen) pthread_cond_wait(&p->cv_work, &p->mu);
            bool stop = p->stop && g == seen;
            pthread_mutex_unlock(&p->mu);
            if (stop) return NULL;
        }
        seen = g;
        /* 3. run my range of the job */
        int64_t b, e;
        dg_team_split(p->n, p->team.nthreads, h->index, &b, &e);
        if (b < e) p->fn(p->arg, b, e);
        helper_finish(p);
    }
}

static void pool_run(const dg_team *team, int64_t n, dg_range_fn fn, void *arg) {
    dg_pool *p = team->impl;
    /* 1. publish the job; helpers read it after seeing the new generation */
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->arg = arg;
    p->n = n;
    atomic_store(&p->pending, team->nthreads - 1);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    /* 2. member 0's share on the calling thread */
    int64_t b, e;
    dg_team_split(n, team->nthreads, 0, &b, &e);
    if (b < e) fn(arg, b, e);
    /* 3. wait for the helpers: spin a little, then sleep */
    for (int s = 0; s < DG_POOL_SPIN; s++)
        if (atomic_load_explicit(&p->pending, memory_order_acquire) == 0) return;
    pthread_mutex_lock(&p->mu);
    while (atomic_load(&p->pending) != 0) pthread_cond_wait(&p->cv_done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

dg_pool *dg_pool_new(int nthreads, dg_topo *topo, int first_slot, const char *name) {
    DG_ASSERT(nthreads >= 1);
    dg_pool *p = dg_calloc(1, sizeof *p);
    p->team.nthreads = nthreads;
    p->team.run = pool_run;
    p->team.impl = p;
    p->topo = topo;
    p->first_slot = first_slot;
    snprintf(p->name, sizeof p->name, "%s", name ? name : "pool");
    DG_CHECK0(pthread_mutex_init(&p->mu, NULL));
    DG_CHECK0(pthread_cond_init(&p->cv_work, NULL));
    DG_CHECK0(pthread_cond_init(&p->cv_done, NULL));
    atomic_init(&p->gen, 0);
    atomic_init(&p->pending, 0);
    p->helpers = dg_calloc((size_t)nthreads, sizeof *p->helpers);
    for (int i = 1; i < nthreads; i++) {
        p->helpers[i].pool = p;
        p->helpers[i].index = i;
        DG_CHECK0(pthread_create(&p->helpers[i].thread, NULL, helper_main, &p->helpers[i]));
    }
    /* Return once every helper is pinned, so placement reports are complete. */
    pthread_mutex_lock(&p->mu);
    while (p->started < nthreads - 1) pthread_cond_wait(&p->cv_done, &p->mu);
    pthread_mutex_unlock(&p->mu);
    return p;
}

void dg_pool_free(dg_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->team.nthreads; i++) DG_CHECK0(pthread_join(p->helpers[i].thread, NULL));
    pthread_cond_destroy(&p->cv_work);
    pthread_cond_destroy(&p->cv_done);
    pthread_mutex_destroy(&p->mu);
    dg_free(p->helpers);
    dg_free(p);
}

const dg_team *dg_pool_team(const dg_pool *p) { return &p->team; }
