/* dg_comm_mpi.h — the MPI comm backend: non-blocking MPI calls.
 *
 * Every data call maps to its MPI_I* form (MPI_Iallreduce, MPI_Iallgather,
 * MPI_Ireduce_scatter_block, MPI_Ialltoallv, MPI_Isend, MPI_Irecv) and wait()
 * is MPI_Wait, so the comm thread can start an operation and keep the
 * compute stream busy meanwhile.
 *
 * Threading: MPI must be initialised with at least MPI_THREAD_SERIALIZED,
 * and while a step runs the runtime's comm thread is the only caller (the
 * executor guarantees that); outside a step the owner may call barrier().
 * Sums are over f32, f16 is refused, integers are summed as integers.
 */
#ifndef DG_COMM_MPI_H
#define DG_COMM_MPI_H

#include <mpi.h>

#include "dg_comm.h"

/* Wrap an MPI communicator (duplicated, so our traffic never mixes with the
 * caller's). Returns NULL with err set when MPI is not initialised. */
dg_comm *dg_comm_mpi_new(MPI_Comm comm, dg_err *err);

/* The MPI communicator behind c (its duplicate), or MPI_COMM_NULL when c is
 * not an MPI comm (a group of one, an emulated link). Another backend
 * bootstraps over it (NCCL: kernels/cuda/dg_cuda_nccl.h). */
MPI_Comm dg_comm_mpi_handle(const dg_comm *c);

#endif /* DG_COMM_MPI_H */
