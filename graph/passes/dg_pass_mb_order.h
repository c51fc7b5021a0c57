/* dg_pass_mb_order.h — the micro-batch schedule as ordering edges.
 *
 * A step graph holds every micro-batch of a rank's share of the global batch
 * (nodes tagged node->microbatch = 0, 1, ...; -1 for the nodes outside any,
 * such as the step's loss). Without a schedule the scheduler would be free
 * to run every micro-batch's forward before any backward, and the arena
 * would hold all their activations. This pass writes the schedule Megatron's
 * non-pipelined loop (and 1F1B on one stage) follows: micro-batches run
 * first to last, each one's forward and backward before the next starts, so
 * the arena holds about one micro-batch's activations (plus the gradients
 * accumulated so far).
 *
 * The edges: for each m >= 1, from every node that ends micro-batch m-1
 * (no successor in m-1) to every node that starts micro-batch m (no
 * predecessor in m). Nodes outside any micro-batch are left to the
 * scheduler's policy. Run it after autodiff (the backward nodes carry their
 * forward node's micro-batch) and before passes whose nodes belong to no
 * micro-batch (DP); follow it with the verifier.
 */
#ifndef DG_PASS_MB_ORDER_H
#define DG_PASS_MB_ORDER_H

#include "dg_graph.h"

/* Add the edges to g. *n_edges (may be NULL) gets how many were added.
 * A graph with fewer than two micro-batches gets none. Returns DG_OK, or
 * DG_EINTERNAL when the builder fails (g->err). */
int dg_pass_mb_order(dg_graph *g, int *n_edges, dg_err *err);

/* --overlap-moe-expert-parallel-comm (Megatron's batch-level overlap,
 * "combined 1F1B"): two micro-batches in flight, so one's expert-parallel
 * all-to-alls run on the comm stream beside the other's compute. Edges:
 * forwards in order (F(m-1) before F(m)), backwards in order (B(m-1)
 * before B(m)), and B(m-2) before F(m) (at most two micro-batches' activations
 * live). F(m) is micro-batch m's forward-phase nodes, B(m) the rest of it.
 * The scheduler's policy picks among the ready tasks of both. Same
 * contract as dg_pass_mb_order. */
int dg_pass_mb_order_overlap(dg_graph *g, int *n_edges, dg_err *err);

/* The general form, which pipeline schedules use too: blk[v] is node v's
 * block (-1: none); for k >= 1, edges from every node that ends block
 * seq[k-1] (no successor in it) to every node that starts seq[k] (no
 * predecessor in it). Returns how many were added (g->status says whether
 * the builder failed). */
int dg_order_blocks(dg_graph *g, const int *blk, const int *seq, int n_seq);

#endif /* DG_PASS_MB_ORDER_H */
