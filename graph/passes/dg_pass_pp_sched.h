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
 *   zero-bubble-h1 (ZB-H1 of Qi et al., 2023): each backward split in two
 *       blocks, B — the input gradients, ending in the send upstream —
 *       and W — the weight gradients and their accumulation. F and B run
 *       in 1F1B's order; stage s defers its W by s micro-batches (W(i-s)
 *       right after B(i), the last s after the final B). No stage waits on
 *       another's W, so the gradients come back upstream sooner, and the
 *       deferred W fill the cooldown where 1F1B idles: with F = B = W the
 *       bubble is (p-1)/(3m+p-1), a third of 1F1B's (dg_pp_sim.h). Every
 *       stage holds at most p micro-batches between F and W, which is the
 *       first stage's 1F1B peak: the same memory. Where what a deferred
 *       W keeps (layer inputs, output gradients) outweighs a micro-batch's
 *       forward activations, the pass defers less (dg_pass_pp_schedule).
 *
 * With virtual stages (dg_pp_chunks(o) > 1) dg_pass_pp_schedule runs the
 * interleaved schedule instead (dg_pass_pp_interleave.h).
 */
#ifndef DG_PASS_PP_SCHED_H
#define DG_PASS_PP_SCHED_H

#include "dg_pass_pp.h"

/* The blocks in order for stage o->rank: seq[k] = 2 mb + (1 for B), or
 * for ZB-H1 3 mb + (1 for B, 2 for W). Returns the count (2 m or 3 m).
 * ZB-H1 defers W by o->rank micro-batches (the paper's). */
int dg_pp_schedule_blocks(const dg_pp_opts *o, int n_mb, int *seq);
/* The same with ZB-H1's W deferred by `delay` micro-batches instead (the
 * pass lowers it where deferring would cost memory, see zb_delay). */
int dg_pp_schedule_blocks_deferred(const dg_pp_opts *o, int n_mb, int delay, int *seq);

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
