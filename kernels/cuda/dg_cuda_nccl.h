/* dg_cuda_nccl.h — the NCCL comm backend (dg_comm.h's interface over NCCL).
 *
 * One NCCL communicator per group: dg_comm_nccl_new takes the MPI group the
 * rank grid already made (dg_grid.h) and bootstraps NCCL over it — rank 0
 * of the group creates the ncclUniqueId and broadcasts it with MPI_Bcast,
 * then every rank calls ncclCommInitRank. Buffers are DEVICE pointers.
 *
 * Every data call enqueues the NCCL operation on the backend's own stream
 * and records a CUDA event in the request; wait() synchronises that event,
 * test() queries it. A caller with a stream of its own (the CUDA device)
 * binds it instead (dg_comm_nccl_bind_stream): then operations run in that
 * stream's order and requests finish at once. all_to_allv is a grouped send/recv (ncclGroupStart /
 * ncclGroupEnd, one pair per peer). Errors: a failing NCCL call, or an
 * asynchronous error found while waiting (ncclCommGetAsyncError), aborts
 * the communicator (ncclCommAbort) so peers blocked on it are released
 * instead of hanging, and returns DG_EINTERNAL naming the call; the comm is
 * unusable afterwards. split() is not supported (split the MPI group and
 * make a new NCCL comm from it).
 *
 * Point-to-point: NCCL has no tags and runs a rank's calls in issue order
 * on the backend's one stream, so a send completes only once its peer's
 * matching receive runs: two ranks that both send before they receive wait
 * on each other. The MPI backend's "sends complete at once" (dg_comm.h) does
 * not hold here; pairing sends and receives (as a pipeline schedule does,
 * or even/odd ordering in a ring) is the caller's job until the comm stream
 * issues p2p pairs inside one NCCL group (docs/cuda.md).
 */
#ifndef DG_CUDA_NCCL_H
#define DG_CUDA_NCCL_H

#include "dg_comm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* mpi_comm: a pointer to the group's MPI_Comm (void * so this header needs
 * no mpi.h). mpi_group may be NULL; it only supplies rank and size when
 * given (they must match the MPI_Comm's). The calling rank's CUDA device
 * must be selected (cudaSetDevice) before. */
int dg_comm_nccl_new(dg_comm *mpi_group, void *mpi_comm, dg_comm **out, dg_err *err);

/* 1 when c is a NCCL comm made by dg_comm_nccl_new. */
int dg_comm_is_nccl(const dg_comm *c);

/* Enqueue c's operations on `stream` (a cudaStream_t of the comm's device)
 * instead of the backend's own, until bound again; NULL returns to the
 * backend's stream. While bound, an operation's completion is ordered by
 * that stream alone: no event is recorded, wait() and test() return at once
 * (the stream's later work, and events recorded on it, come after it).
 * Returns the stream bound before (NULL: none). The CUDA device
 * (dg_cuda_device.h) binds its comm stream around each collective it
 * enqueues, so NCCL runs in that stream's order with no extra events. */
void *dg_comm_nccl_bind_stream(dg_comm *c, void *stream);

/* Look for an asynchronous NCCL error (a peer gone, a network failure)
 * without blocking: DG_OK when there is none, else the communicator is
 * aborted (peers blocked on it are released) and DG_EINTERNAL names it.
 * For callers that wait on the bound stream rather than on requests. */
int dg_comm_nccl_check(dg_comm *c, dg_err *err);

#ifdef __cplusplus
}
#endif

#endif /* DG_CUDA_NCCL_H */
