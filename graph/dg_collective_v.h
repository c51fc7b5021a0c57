/* dg_collective_v.h — the variable-size all-to-all as a graph op.
 *
 * Expert parallelism (parallel/ep/dg_ep.h) moves a different number of token rows
 * to every rank of the EP group, decided at run time by the router. Graph
 * shapes are static, so the op carries static upper bounds and the real
 * row counts travel as i32 tensors beside the data:
 *
 *   "all_to_all_v" (x [N, ...], send_counts i32 [P*G], recv_counts i32 [P*G])
 *       i[0] group_size P      i[1] rows_out M (static bound of y's rows)
 *     -> y [M, ...]
 *
 * Rows of x are grouped by destination rank: the first rows go to rank 0,
 * the next to rank 1, ... Each rank's block is subdivided into G chunks
 * (MoE: one per local expert of the destination), so rank j is sent
 * sum_g send_counts[j*G + g] rows. recv_counts says, in the same layout,
 * how many rows arrive from each source rank (chunk (i, g): from rank i for
 * its chunk g); y holds them grouped by source rank, rank 0 first, and its
 * rows past the total are zeroed (so the op writes every output byte and
 * padded rows stay harmless to what follows). Rows of x past the total
 * sent are ignored. Megatron's MoEAlltoAllTokenDispatcher exchanges the
 * counts first with a plain all-to-all of the per-expert counts
 * (dg_all_to_all on an i32 [P*G] tensor, split and concat dim 0) and feeds
 * the result here as recv_counts; every rank must pass counts that agree
 * with its peers' (recv_counts on rank i, chunk (j, g) == send_counts on
 * rank j, chunk (i, g)), which that exchange guarantees.
 *
 * The bounds: a rank sends at most N rows and receives at most M; more is a
 * run-time error naming the node, never a silent truncation. Choose M as
 * the worst case (the EP dispatcher documents its choice).
 *
 * Adjoint (DESIGN.md: all-to-all -> all-to-all with transposed splits):
 *     dx = all_to_all_v(dy, recv_counts, send_counts) with rows_out = N
 * i.e. every row goes back where it came from; the counts take no gradient.
 *
 * Sharding: y takes x's sharding descriptor (rows are not split over an
 * axis in the usual sense: they are a runtime-sized exchange).
 *
 * Execution: sched/dg_comm.c's dg_comm_run_node turns the node into one
 * all_to_allv call of the comm backend (counts in rows times the row size),
 * recognising the op by address (its comm kind is DG_COMM_ALL_TO_ALL, so
 * everything that treats all-to-alls alike treats this one so too).
 */
#ifndef DG_COLLECTIVE_V_H
#define DG_COLLECTIVE_V_H

#include "dg_graph.h"
#include "dg_op.h"

enum {
    DG_COLLV_GROUP_SIZE = 0, /* == DG_COLL_GROUP_SIZE */
    DG_COLLV_ROWS_OUT = 1,
};

extern const dg_op_def dg_op_all_to_all_v;

/* Add an all_to_all_v node over `axis` (a group of group_size ranks) on the
 * comm stream. x is [N, ...] of any dtype; send_counts and recv_counts are
 * i32 [group_size * G] for some G >= 1. Returns y's id ([rows_out, ...]),
 * or -1 after an error (g->status, g->err). */
int dg_all_to_all_v(dg_graph *g, int x, int send_counts, int recv_counts, dg_axis axis,
                    int group_size, int64_t rows_out);

/* The flat layout of node n (an all_to_all_v) for a group of `size` ranks:
 * element counts and displacements per rank, as dg_comm's all_to_allv
 * takes them. send_counts and recv_counts are the node's i32 inputs.
 * Returns DG_OK, or DG_EINPUT when a count is negative or the totals pass
 * the static bounds (err names the node). *recv_elems gets the received
 * total, so the caller can zero what lies beyond it. Lives here, not in
 * sched/, so the rule is written once next to the op it belongs to. */
int dg_all_to_all_v_layout(const dg_graph *g, const dg_node *n, int size,
                           const int32_t *send_counts, const int32_t *recv_counts, int64_t *sc,
                           int64_t *sd, int64_t *rc, int64_t *rd, int64_t *recv_elems,
                           dg_err *err);

#endif /* DG_COLLECTIVE_V_H */
