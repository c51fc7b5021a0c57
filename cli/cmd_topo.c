/* cmd_topo.c — `dagatron topo`: what hwloc found and where each thread went.
 *
 * Starts the runtime exactly as a training run would (compute team pinned to
 * this rank's cores; the comm thread on a core of its own when the team
 * leaves one free, else floating over the rank's cpuset), then prints the
 * machine, the rank's cpuset and every thread's placement. Under mpirun
 * every rank does the same and rank 0 prints all reports in rank order, so
 *   mpirun -np 2 dagatron topo
 * shows each rank on its own core.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dg_base.h"
#include "dg_cli.h"
#include "dg_sched.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: dagatron topo [--threads N] [--no-pin]\n"
            "  Print the hwloc topology (packages, NUMA nodes, cores, PUs), this rank's\n"
            "  cpuset and where each scheduler thread was pinned. Under mpirun, every\n"
            "  rank reports; rank 0 prints the reports in rank order.\n"
            "  --threads N   compute workers (default: cores in the rank's cpuset)\n"
            "  --no-pin      do not bind threads (show where the OS put them)\n");
}

/* Launched by mpirun (or another PMI launcher)? Then MPI is worth starting. */
static int under_launcher(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
}

int dg_cmd_topo(int argc, char **argv) {
    dg_runtime_opts ro;
    memset(&ro, 0, sizeof ro);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < 1 || v > 1024) {
                fprintf(stderr, "dagatron: --threads: expected an integer in 1..1024, got '%s'\n", argv[i]);
                return DG_EINPUT;
            }
            ro.compute_threads = (int)v;
        } else if (!strcmp(argv[i], "--no-pin")) {
            ro.no_pin = 1;
        } else {
            fprintf(stderr, "dagatron: topo: unknown flag '%s' (see `dagatron topo --help`)\n", argv[i]);
            return DG_EINPUT;
        }
    }

    int mpi = under_launcher(), rank = 0, size = 1;
    if (mpi) {
        MPI_Init(NULL, NULL);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
    }
    ro.rank = rank;
    dg_err err = {{0}};
    dg_runtime *rt = dg_runtime_new(&ro, &err);
    if (!rt) {
        dg_err_print(&err);
        if (mpi) MPI_Abort(MPI_COMM_WORLD, DG_EINTERNAL);
        return DG_EINTERNAL;
    }

    /* 1. this rank's report, as text */
    char prefix[32];
    snprintf(prefix, sizeof prefix, "rank %d/%d: ", rank, size);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    DG_ASSERT(f);
    dg_topo_print(dg_runtime_topo(rt), f, prefix);
    fprintf(f, "%scompute team: %d thread(s); comm stream: 1 thread\n", prefix, dg_runtime_threads(rt));
    fclose(f);

    /* 2. rank 0 prints everyone's, in rank order */
    if (!mpi) {
        fputs(text, stdout);
    } else {
        int n = (int)len;
        int *lens = rank == 0 ? dg_calloc((size_t)size, sizeof(int)) : NULL;
        MPI_Gather(&n, 1, MPI_INT, lens, 1, MPI_INT, 0, MPI_COMM_WORLD);
        int *displs = NULL, total = 0;
        char *all = NULL;
        if (rank == 0) {
            displs = dg_calloc((size_t)size, sizeof(int));
            for (int r = 0; r < size; r++) displs[r] = total, total += lens[r];
            all = dg_malloc((size_t)total + 1);
        }
        MPI_Gatherv(text, n, MPI_CHAR, all, lens, displs, MPI_CHAR, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            fwrite(all, 1, (size_t)total, stdout);
            fflush(stdout);
        }
        dg_free(all);
        dg_free(displs);
        dg_free(lens);
    }
    free(text);
    dg_runtime_free(rt);
    if (mpi) MPI_Finalize();
    return 0;
}
