/* dg_pass_pp_sched.h — pipeline schedules as ordering edges.
 *
 * Under PP each rank's step graph holds its stage's forward and backward of
 * every micro-batch (dg_pass_pp.h). A schedule is the order in which the
 * rank runs these blocks — F(mb): the micro-batch's forward nodes,
 * B(mb): its backward nodes (the gradient accumulation of micro-batch mb
 * included) — written as ordering edges from every node that ends a block
 * (no successor in the block) to every node that starts the next (no
 * predecessor in it), so a block's recv waits for the previous block's
 * sends. That keeps p2p from deadlocking: the comm stream runs in order and
 * a recv blocks it, sends never block (sched/dg_comm.h), and the blocks'
 * order is the same one the stages' data dependencies allow.
 *
 *   1f1b (PipeDream-Flush, Megatron's non-interleaved schedule): stage s
 *       of p runs min(p - s - 1, m) warmup forwards, then one forward and
 *       one backward at a time, then the remaining backwards. A stage holds
 *       at most p - s micro-batches' activations.
 *   all-forward-all-backward (GPipe): every forward, then every backward;
 *       all m micro-batches' activations are live at once. The memory
 *       baseline 1F1B is measured against.
 *   zero-bubble-h1 (after Qi et al., 2023): 1F1B's order with each
 *       backward split in two blocks, B — the input gradients, ending in
 *       the send upstream — then W — the weight gradients and their
 *       accumulation — so no weight-gradient work delays a gradient
 *       another stage waits for, and W fills the wait for the next recv.
 *       The same micro-batches in flight as 1F1B, so about its memory.
 *
 * With virtual stages (dg_pp_chunks(o) > 1) dg_pass_pp_schedule runs the
 * interleaved schedule instead (dg_pass_pp_interleave.h).
 */
#ifndef DG_PASS_PP_SCHED_H
#define DG_PASS_PP_SCHED_H

#include "dg_pass_pp.h"

/* The blocks in order for stage o->rank: seq[k] = 2 mb + (1 for B), or
 * for ZB-H1 3 mb + (1 for B, 2 for W). Returns the count (2 m or 3 m). */
int dg_pp_schedule_blocks(const dg_pp_opts *o, int n_mb, int *seq);

/* Add the schedule's edges to g (a stage's step graph with n_mb
 * micro-batches). *n_edges (may be NULL): how many. */
int dg_pass_pp_schedule(dg_graph *g, const dg_pp_opts *o, int n_mb, int *n_edges, dg_err *err);

/* The edges of a schedule: blk[v] is node v's block (0 .. n_ids-1; -1
 * none), seq[0..n_seq) the blocks in order (empty ones are dropped from
 * it, in place). Chains the blocks (dg_order_blocks) and, within each, its
 * PP sends and its recvs in tag slot order (the two sides of a boundary
 * then issue them in the same order). Returns the edges added. */
int dg_pp_order_blocks(dg_graph *g, const int *blk, int *seq, int n_seq, int n_ids);

/* The nodes of phase optimizer that talk over the pipeline group (the tied
 * embedding's gradient exchange, the gradient norm's all-gather) wait for
 * every p2p node of the micro-batches, and run in the order the passes
 * made them, on every stage: the comm stream runs in order, and such a
 * node blocking ahead of a send another stage waits for would deadlock
 * the pipeline. */
int dg_pass_pp_fence(dg_graph *g, dg_err *err);

#endif /* DG_PASS_PP_SCHED_H */
