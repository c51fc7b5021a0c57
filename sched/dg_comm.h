/* dg_comm.h — the comm-backend interface the comm stream drives.
 *
 * A dg_comm is one process group (the ranks of a TP, DP, EP... group) behind
 * a table of function pointers, shaped so NCCL fits later: every data call
 * *starts* an operation and fills a dg_comm_req; wait() (or test()) finishes
 * it. The comm stream starts a collective and waits for it, so compute runs
 * on the compute stream meanwhile; a CUDA/NCCL backend would instead enqueue
 * on its stream and make wait() a stream-event record.
 *
 * Buffers are host pointers, counts are in elements of `dt`. Reductions are
 * sums. Data layouts are the flat, rank-major ones of MPI and NCCL:
 *   all_gather:     recv[size * count] = send of rank 0, rank 1, ...
 *   reduce_scatter: send[size * count]; rank r keeps the sum of block r.
 *   all_to_allv:    block j of send (send_counts[j] at send_displs[j]) goes
 *                   to rank j; block i of recv comes from rank i.
 *   send/recv:      to/from an absolute rank of this group, with a tag.
 * How a graph node's tensor (with a gather dim, split dim...) maps onto these
 * flat calls is dg_comm_run_node()'s job, so backends never see shapes.
 *
 * Implementations: "self" (a group of one: copies; dg_comm_self_new) and
 * "mpi" (non-blocking MPI calls; dg_comm_mpi_new in dg_comm_mpi.h).
 */
#ifndef DG_COMM_H
#define DG_COMM_H

#include "dg_graph.h"

typedef struct dg_comm dg_comm;

/* An operation in flight. Zero-initialise; a backend that completes at
 * start leaves impl NULL and wait() returns at once. */
typedef struct dg_comm_req {
    void *impl;
} dg_comm_req;

typedef struct dg_comm_ops {
    const char *name; /* "self", "mpi", later "nccl" */
    int (*all_reduce)(dg_comm *c, const void *send, void *recv, int64_t count, dg_dtype dt,
                      dg_comm_req *req, dg_err *err);
    int (*all_gather)(dg_comm *c, const void *send, void *recv, int64_t count, dg_dtype dt,
                      dg_comm_req *req, dg_err *err);
    int (*reduce_scatter)(dg_comm *c, const void *send, void *recv, int64_t count, dg_dtype dt,
                          dg_comm_req *req, dg_err *err);
    int (*all_to_allv)(dg_comm *c, const void *send, const int64_t *send_counts,
                       const int64_t *send_displs, void *recv, const int64_t *recv_counts,
                       const int64_t *recv_displs, dg_dtype dt, dg_comm_req *req, dg_err *err);
    int (*send)(dg_comm *c, const void *buf, int64_t count, dg_dtype dt, int peer, int tag,
                dg_comm_req *req, dg_err *err);
    int (*recv)(dg_comm *c, void *buf, int64_t count, dg_dtype dt, int peer, int tag,
                dg_comm_req *req, dg_err *err);
    /* Finish an operation (blocking) / poll it (*done = 1 when finished). */
    int (*wait)(dg_comm *c, dg_comm_req *req, dg_err *err);
    int (*test)(dg_comm *c, dg_comm_req *req, int *done, dg_err *err);
    int (*barrier)(dg_comm *c, dg_err *err);
    /* Sub-group of the ranks with the same color, ordered by key (MPI_Comm_split). */
    int (*split)(dg_comm *c, int color, int key, dg_comm **out, dg_err *err);
    void (*free)(dg_comm *c);
} dg_comm_ops;

struct dg_comm_pending;

struct dg_comm {
    const dg_comm_ops *ops;
    int rank, size;
    void *impl;
    /* Sends started by dg_comm_run_node and not yet known to be finished,
     * each with its staging copy. Backends leave it NULL (zeroed). */
    struct dg_comm_pending *pending;
};

/* A group of one rank: every collective is a copy; send/recv to self go
 * through a FIFO mailbox (a recv with nothing sent is an error, not a hang). */
dg_comm *dg_comm_self_new(void);

void dg_comm_free(dg_comm *c);

/* Run collective node n (op->comm != DG_COMM_NONE, attributes as in
 * dg_collective.h) over comm c: reshape the node's tensors into the flat
 * calls above (permuting through a scratch buffer when the gather/scatter
 * dim is not the outermost), start, wait. The group size in the node's
 * attributes must equal c->size. Returns DG_OK or an error naming the node.
 *
 * Sends are the exception: the data is copied to a staging buffer, the send
 * is started and the node completes at once. Two ranks that both send
 * before they receive (a pipeline's activations and gradients crossing, a
 * ring) would otherwise deadlock as soon as a message is too large for the
 * eager protocol; and the staging copy frees the tensor's arena slot for
 * reuse right away. Finished sends are reaped on later calls; call
 * dg_comm_flush() at the end of a step (the executor does). */
int dg_comm_run_node(dg_comm *c, const dg_graph *g, const dg_node *n, void *const *in,
                     void *const *out, dg_err *err);

/* Wait for every pending send of c and free its staging buffer. */
int dg_comm_flush(dg_comm *c, dg_err *err);

#endif /* DG_COMM_H */
