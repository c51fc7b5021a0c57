/* test_dist_agree.c — how ranks agree on a failure (dg_dist_agree) under
 * mpirun -np 3: every rank returns the lowest failing rank's status, and
 * err says who prints what, so each distinct failure is printed once:
 *   - nobody failed: DG_OK, messages untouched;
 *   - one rank failed: it keeps "rank R: <msg>", the others an empty message;
 *   - every rank failed with the same message: rank 0 keeps it plain;
 *   - different messages: the lowest failing rank alone keeps its own,
 *     with its rank and how many ranks failed otherwise, so one line is
 *     printed on every rank's behalf (a damaged checkpoint under PP fails
 *     differently on each stage). */
#include <mpi.h>
#include <string.h>

#include "dg_comm_mpi.h"
#include "dg_dist.h"
#include "dg_test_mpi.h"

static int rank, failures;

/* Each rank fails with st[rank] and msg[rank] ("" for DG_OK); check the
 * agreed status and the message this rank is left with. */
static void agree_case(dg_comm *c, const int st[3], const char *const msg[3], int want_st,
                       const char *const want_msg[3]) {
    dg_err err = {{0}};
    snprintf(err.msg, sizeof err.msg, "%s", msg[rank]);
    int got = dg_dist_agree(c, st[rank], &err);
    CHECK(got == want_st);
    CHECK(!strcmp(err.msg, want_msg[rank]));
    if (strcmp(err.msg, want_msg[rank]))
        fprintf(stderr, "rank %d: got message '%s', want '%s'\n", rank, err.msg, want_msg[rank]);
}

int main(int argc, char **argv) {
    int provided = 0, size = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 3) {
        if (rank == 0) fprintf(stderr, "test_dist_agree: run with -np 3\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    dg_err err = {{0}};
    dg_comm *c = dg_comm_mpi_new(MPI_COMM_WORLD, &err);
    enum { OK = DG_OK, IN = DG_EINPUT, IE = DG_EINTERNAL };

    /* nobody failed: a stale message on a passing rank is left alone */
    agree_case(c, (int[]){OK, OK, OK}, (const char *[]){"", "old", ""}, OK, (const char *[]){"", "old", ""});
    /* one rank (1) failed */
    agree_case(c, (int[]){OK, IN, OK}, (const char *[]){"", "bad token", ""}, IN,
               (const char *[]){"", "rank 1: bad token", ""});
    /* all failed alike: bad input every rank sees, printed by rank 0, plain */
    agree_case(c, (int[]){IN, IN, IN}, (const char *[]){"bad flag", "bad flag", "bad flag"}, IN,
               (const char *[]){"bad flag", "", ""});
    /* different failures: one line, by the lowest failing rank, which says
     * that another failed; status of the lowest */
    agree_case(c, (int[]){IE, OK, IN}, (const char *[]){"disk", "", "bad token"}, IE,
               (const char *[]){"rank 0: disk (1 other rank failed too)", "", ""});
    agree_case(c, (int[]){IN, IN, IN}, (const char *[]){"a", "b", "c"}, IN,
               (const char *[]){"rank 0: a (2 other ranks failed too)", "", ""});
    /* rank 0 fine, ranks 1 and 2 differ: rank 1 speaks for both */
    agree_case(c, (int[]){OK, IN, IE}, (const char *[]){"", "shard 1", "shard 2"}, IN,
               (const char *[]){"", "rank 1: shard 1 (1 other rank failed too)", ""});
    /* ranks 1 and 2 alike, rank 0 fine: printed once, by rank 1 */
    agree_case(c, (int[]){OK, IN, IN}, (const char *[]){"", "no file", "no file"}, IN,
               (const char *[]){"", "rank 1: no file", ""});
    /* a group of one (NULL): the outcome as it was */
    dg_err e1 = {{0}};
    snprintf(e1.msg, sizeof e1.msg, "alone");
    CHECK(dg_dist_agree(NULL, IN, &e1) == IN && !strcmp(e1.msg, "alone"));

    dg_comm_free(c);
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("test_dist_agree: %s (%d failures over all ranks)\n", total ? "FAILED" : "ok", total);
    MPI_Finalize();
    return total != 0;
}
