/* dg_runtime_internal.h — the runtime's state, shared by the files that
 * implement dg_sched.h's runtime: dg_sched_exec.c (threads, CPU streams, a
 * step on them) and dg_runtime_device.c (a step on a device). */
#ifndef DG_RUNTIME_INTERNAL_H
#define DG_RUNTIME_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "dg_device.h"
#include "dg_pool.h"
#include "dg_sched.h"

/* Iterations of the pre-sleep spin: some 10-30 us. Waking a thread on
 * another core costs 5-30 us (more on VMs, whose idle vCPUs halt), so a
 * driver with a core of its own waits that long before it sleeps. */
#define DG_DRIVER_SPIN 30000

struct run_state;
struct dg_runtime_dev;

typedef struct driver {
    struct dg_runtime *rt;
    int s; /* stream index */
    pthread_t thread;
} driver;

struct dg_runtime {
    dg_topo *topo;
    dg_pool *pool;
    int nthreads, rank, pin;
    int spin;        /* drivers spin before sleeping: only if each has a core of its own */
    int comm_slot;   /* the comm drivers' core slot, -1: the whole rank cpuset */
    /* Stream 0 computes; streams 1.. are comm streams, one per distinct
     * comm group of the plan's lanes (dg_sched.h), each running its lanes'
     * tasks merged in plan order. */
    int n_streams;
    int lane_stream[DG_SCHED_LANES]; /* the stream that runs each lane */
    dg_comm *stream_group[DG_SCHED_LANES]; /* the group behind each comm stream */
    dg_stream *streams[DG_SCHED_LANES];
    dg_comm *self;
    dg_comm *groups[DG_AXIS_COUNT];
    driver drivers[DG_SCHED_LANES];
    int n_drivers; /* started (0 on a device) */
    int started;   /* drivers that have bound themselves */

    pthread_mutex_t mu;
    pthread_cond_t cv[DG_SCHED_LANES];
    pthread_cond_t cv_caller;
    atomic_ulong kick[DG_SCHED_LANES]; /* bumped when a stream may have new work */
    struct run_state *run; /* the step in progress, NULL when idle */
    int stop;

    dg_trace *trace;
    int step;

    /* buffers of the bound plan */
    const dg_graph *bound_graph;
    int bound_nt;
    void *arena;
    size_t arena_bytes;
    void **persist; /* per tensor: its own buffer, or NULL */
    void **ptr;     /* per tensor: where it lives now (the host view on a device) */

    /* a device runtime (dg_runtime_opts.make_device): NULL on the CPU */
    dg_device *dev;
    int host_fallback;         /* dg_runtime_opts.host_fallback */
    struct dg_runtime_dev *dv; /* its bound buffers (dg_runtime_device.c) */
};

/* dg_runtime_device.c: bind, run a step, free (rt->dev != NULL). */
int dg_runtime_dev_bind(dg_runtime *rt, const dg_sched_plan *p, int force, dg_err *err);
int dg_runtime_dev_run(dg_sched_plan *p, dg_runtime *rt, dg_sched_stats *stats, dg_err *err);
void dg_runtime_dev_free(dg_runtime *rt);

/* The step's figures from each node's start and end (seconds, one clock);
 * sched_seconds: the scheduler's own time. */
void dg_sched_step_stats(const dg_sched_plan *p, const double *t0, const double *t1,
                         double sched_seconds, dg_sched_stats *st);

#endif /* DG_RUNTIME_INTERNAL_H */
