/* dg_collective.h — collectives as graph ops.
 *
 * A collective is a node like any other: it has inputs, outputs, a shape
 * rule, a cost and an adjoint, so a parallelism pass only rewrites the
 * forward graph and autodiff derives the backward communication. It has no
 * kernel: the executor sees op->comm != DG_COMM_NONE and hands the node to a
 * comm backend (MPI or NCCL), which runs it over the group of node->group.
 *
 * Shapes are per rank: a tensor's shape is what one rank holds. The group
 * size is therefore part of the shape rule and is stored in the node's
 * attributes, next to the axis in node->group. Attribute slots (the same
 * names appear in dumps, from op->iattr_names):
 *
 *   op              i[0]        i[1]        i[2]        i[3]   i[4..7]
 *   all_reduce      group_size
 *   all_gather      group_size  dim         whole_grad
 *   reduce_scatter  group_size  dim
 *   all_to_all      group_size  split_dim   concat_dim
 *   send            group_size  peer
 *   recv            group_size  peer        dtype       ndim   shape[0..3]
 *   copy_to_group   group_size
 *   scatter_to_group group_size dim
 *
 * `peer` is an offset within the group, not an absolute rank: this rank
 * talks to (rank_in_group + peer) mod group_size. The same graph then serves
 * every rank of a ring (CP) or of a pipeline boundary (PP: +1 downstream,
 * -1 upstream), which keeps one graph per stage instead of one per rank.
 *
 * Adjoints (DESIGN.md):
 *   copy_to_group (identity)  -> all_reduce of the gradient
 *   scatter_to_group(dim)     -> all_gather(dim) of the gradient
 *   all_reduce                -> identity: din = dout, no node emitted
 *   all_gather(dim)           -> reduce_scatter(dim): the gathered tensor's
 *                                readers (a column-parallel linear) leave
 *                                each rank a partial gradient; with
 *                                whole_grad 1, scatter_to_group(dim): its
 *                                readers compute the same whole gradient on
 *                                every rank (replicated work, e.g. SP's gather
 *                                before a layer that needs whole tokens)
 *   reduce_scatter(dim)       -> all_gather(dim)
 *   all_to_all(split, concat) -> all_to_all(concat, split)  (transposed)
 *   send(peer)                -> recv(peer) of the gradient, which is din
 *   recv(peer)                -> send(peer) of the gradient
 * The emitted node runs over the same axis and group size as the forward one.
 *
 * all_to_all splits its input into group_size equal chunks along split_dim,
 * sends chunk j to rank j, and concatenates what it receives along
 * concat_dim. Uneven splits (dropless MoE) are a runtime matter: the static
 * shape is the capacity bound and the dispatcher carries the counts.
 *
 * send has no output (the builder returns the node id) and recv has no
 * input, so dg_autodiff() calls neither adjoint: it reaches nodes through
 * their outputs and skips nodes with no input needing a gradient. The PP
 * pass, which inserts send/recv pairs at stage boundaries, calls them
 * itself after autodiff: dg_op_send.adjoint emits the recv of the gradient;
 * dg_op_recv.adjoint sends back the gradient autodiff left in the received
 * tensor's grad (set requires_grad on a recv's output so it gets one).
 *
 * Cost: bytes each rank moves over the links (ring algorithms), flops the
 * reductions do; memory traffic is the backend's concern.
 */
#ifndef DG_COLLECTIVE_H
#define DG_COLLECTIVE_H

#include "dg_graph.h"
#include "dg_op.h"

/* Attribute slots shared by all collectives. */
enum {
    DG_COLL_GROUP_SIZE = 0, /* ranks in the group, >= 1 */
    DG_COLL_DIM = 1,        /* all_gather / reduce_scatter: the dimension */
    DG_COLL_SPLIT_DIM = 1,  /* all_to_all */
    DG_COLL_CONCAT_DIM = 2, /* all_to_all */
    DG_COLL_WHOLE_GRAD = 2, /* all_gather: the adjoint slices instead of reduce-scattering */
    DG_COLL_PEER = 1,       /* send / recv: offset within the group */
    DG_COLL_DTYPE = 2,      /* recv */
    DG_COLL_NDIM = 3,       /* recv */
    DG_COLL_SHAPE = 4,      /* recv: shape in i[4 .. 4+ndim) */
    /* i[8]: a pipeline boundary's tag (graph/passes/dg_pass_pp.h DG_COLL_TAG) */
    DG_COLL_LAYOUT = 9,     /* recv: the output's layout, packed in i[9], i[10] */
};

extern const dg_op_def dg_op_all_reduce;
extern const dg_op_def dg_op_all_gather;
extern const dg_op_def dg_op_reduce_scatter;
extern const dg_op_def dg_op_all_to_all;
extern const dg_op_def dg_op_send;
extern const dg_op_def dg_op_recv;
extern const dg_op_def dg_op_copy_to_group;
extern const dg_op_def dg_op_scatter_to_group;

/* "all_reduce", ...; "none" for DG_COMM_NONE. */
const char *dg_comm_name(dg_comm_kind k);

/* Builders. Each adds one node on the comm stream with node->group = axis,
 * stamps the current phase/layer/microbatch/stage like any builder call,
 * sets the output's sharding from the input's (see each function), and
 * returns the output tensor id, or -1 after an error (g->status, g->err).
 * axis must not be DG_AXIS_NONE; group_size >= 1. */

/* Sum over the group. Output: input's shape and split, partial cleared. */
int dg_all_reduce(dg_graph *g, int x, dg_axis axis, int group_size);

/* Concatenate along dim: shape[dim] *= group_size; split[dim] cleared. */
int dg_all_gather(dg_graph *g, int x, dg_axis axis, int group_size, int dim);

/* The same, whole_grad set: its adjoint keeps this rank's slice of the
 * gradient (scatter_to_group) instead of summing the group's. */
int dg_all_gather_whole_grad(dg_graph *g, int x, dg_axis axis, int group_size, int dim);

/* Sum, then keep this rank's slice along dim: shape[dim] /= group_size
 * (must divide); split[dim] = axis, partial cleared. */
int dg_reduce_scatter(dg_graph *g, int x, dg_axis axis, int group_size, int dim);

/* shape[split_dim] /= group_size, then shape[concat_dim] *= group_size; the
 * split entries of the two dims swap (Ulysses: seq-sharded -> head-sharded). */
int dg_all_to_all(dg_graph *g, int x, dg_axis axis, int group_size, int split_dim,
                  int concat_dim);

/* Send x to the rank `peer` places along the group. Returns the node id
 * (send has no output), or -1. */
int dg_send(dg_graph *g, int x, dg_axis axis, int group_size, int peer);

/* Receive a tensor of the given dtype and shape from the rank `peer` places
 * along the group. */
int dg_recv(dg_graph *g, dg_axis axis, int group_size, int peer, dg_dtype dtype, int ndim,
            const int64_t *shape);

/* The same, declaring the layout the received tensor has (the sender's:
 * say a sequence split over tp under SP). A recv has no input to derive a
 * layout from, so it keeps the declared one in its attrs, and its sharding
 * rule gives it back: re-emission and the verifier see it as the sender
 * made it. dg_recv declares a replicated tensor. */
int dg_recv_laid_out(dg_graph *g, dg_axis axis, int group_size, int peer, dg_dtype dtype, int ndim,
                     const int64_t *shape, const dg_sharding *layout);

/* Identity forward (Megatron's copy_to_tensor_model_parallel_region); its
 * adjoint all-reduces the gradient. Output sharding = input sharding. */
int dg_copy_to_group(dg_graph *g, int x, dg_axis axis, int group_size);

/* Keep this rank's slice of a replicated x along dim, no traffic (Megatron's
 * scatter_to_sequence_parallel_region: where the sequence-parallel region
 * starts behind a replicated embedding); its adjoint all-gathers the
 * gradient, so every rank gets the whole of it. shape[dim] /= group_size
 * (must divide); split[dim] = axis. */
int dg_scatter_to_group(dg_graph *g, int x, dg_axis axis, int group_size, int dim);

#endif /* DG_COLLECTIVE_H */
