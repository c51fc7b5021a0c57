/* dg_topo.h — which cores this rank owns, and where each thread is pinned.
 *
 * dg_topo_new() asks hwloc for the machine (packages, NUMA nodes, cores,
 * PUs) and for the cpuset this process may use. A rank uses only the cores
 * mpirun gave it: when mpirun bound the process (--bind-to core, the default
 * for -np <= 2) that binding is the rank's cpuset. When the process is bound
 * to the whole machine but several ranks share the node (local size from
 * OMPI_COMM_WORLD_LOCAL_SIZE / MPI_LOCALNRANKS / SLURM_NTASKS_PER_NODE), the
 * machine's cores are split into contiguous blocks by local rank, so two
 * ranks never pin workers to the same core. ("Split it, don't fight it.")
 *
 * Threads ask for a slot: slot i goes to core i of the rank's cores (modulo
 * their count). Each bind is logged with the PU the thread then runs on, so
 * `dagatron topo` can print where every thread was placed.
 *
 * A dg_topo is an explicit context: no global state. Its log is guarded by
 * a mutex, so threads may bind concurrently.
 */
#ifndef DG_TOPO_H
#define DG_TOPO_H

#include <stdio.h>

#include "dg_base.h"

typedef struct dg_topo dg_topo;

/* How the rank's cpuset was chosen. */
typedef enum dg_topo_source {
    DG_TOPO_WHOLE = 0,  /* single process, or bound to nothing: all cores */
    DG_TOPO_BOUND,      /* the launcher (mpirun) bound us: that cpuset */
    DG_TOPO_SPLIT       /* bound to everything while sharing the node: split by local rank */
} dg_topo_source;

/* What was found. Counts are over the whole machine except rank_cores. */
typedef struct dg_topo_info {
    int n_packages, n_numa, n_cores, n_pus;
    int rank_cores;      /* cores in this rank's cpuset */
    int local_rank, local_size;
    dg_topo_source source;
    char machine_set[64]; /* the machine's allowed cpuset, e.g. "0-1" */
    char rank_set[64];    /* this rank's cpuset as a list, e.g. "1" */
} dg_topo_info;

/* One placement record: a thread and where it runs. */
typedef struct dg_topo_place {
    char thread[32]; /* e.g. "compute.0", "comm" */
    int slot;        /* requested slot, -1: the whole rank cpuset */
    int core;        /* hwloc logical index of the core (-1: several) */
    int core_os;     /* OS index of the first PU of that core */
    int pu_os;       /* the PU the thread ran on right after binding */
    char set[64];    /* the cpuset it was bound to */
} dg_topo_place;

/* Discover. Returns NULL with err set when hwloc fails. */
dg_topo *dg_topo_new(dg_err *err);
void dg_topo_free(dg_topo *t);

void dg_topo_get_info(const dg_topo *t, dg_topo_info *info);

/* Bind the calling thread to slot `slot` (core slot % rank_cores of the
 * rank's cpuset), or to the rank's whole cpuset when slot < 0, and log it
 * under `name`. Binding failures (e.g. a container that forbids it) are
 * logged, not fatal: a thread that cannot be pinned still computes right. */
void dg_topo_bind_self(dg_topo *t, int slot, const char *name);

/* The placement log (valid until the next bind or dg_topo_free). */
int dg_topo_n_places(const dg_topo *t);
void dg_topo_place_get(const dg_topo *t, int i, dg_topo_place *out);

/* Print the topology and the placement log, each line prefixed by `prefix`
 * (e.g. "rank 1: "). Placement lines are machine-readable:
 *   <prefix>place thread=compute.0 slot=0 core=1 core_os=1 pu=1 set=1 */
void dg_topo_print(const dg_topo *t, FILE *f, const char *prefix);

#endif /* DG_TOPO_H */
