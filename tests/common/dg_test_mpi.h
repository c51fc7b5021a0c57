/* dg_test_mpi.h — the check tests under mpirun use: on failure it prints
 * the rank and file:line and counts the failure; the test's main sums the
 * counts over the ranks and exits non-zero. A file using it defines
 * `static int rank, failures;` before the first check. */
#ifndef DG_TEST_MPI_H
#define DG_TEST_MPI_H

#include <stdio.h>

#define CHECK(c)                                                                                \
    do {                                                                                        \
        if (!(c)) {                                                                             \
            fprintf(stderr, "rank %d: %s:%d: check failed: %s\n", rank, __FILE__, __LINE__, #c); \
            failures++;                                                                         \
        }                                                                                       \
    } while (0)

#endif /* DG_TEST_MPI_H */
