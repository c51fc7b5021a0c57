/* dg_pass_pp_interleave.h — interleaved 1F1B (Megatron's schedule with
 * virtual pipeline stages) as ordering edges.
 *
 * With v = dg_pp_chunks(o) > 1 each rank holds v model chunks
 * (dg_pass_pp.h). A rank's blocks are F(mb, c) and B(mb, c): micro-batch
 * mb's forward / backward nodes of local chunk c, block id
 * 2 (mb v + c) + (1 for B). The order follows Megatron's
 * forward_backward_pipelining_with_interleaving over the m v "virtual
 * micro-batches" k = 0 .. m v - 1 of a rank:
 *
 *   k names micro-batch (k / (p v)) p + k mod p — groups of p micro-batches
 *   — and chunk (k mod p v) / p for a forward, v - 1 - that for a backward
 *   (the backward walks the chunks from the last);
 *   rank r runs W = min((p - r - 1) 2 + (v - 1) p, m v) warmup forwards
 *   (all m v when m = p, as Megatron does), then one forward and one
 *   backward at a time (forward W + i, backward i), then the remaining
 *   backwards.
 *
 * So rank 0 starts its first backward after about (v - 1) p + 2 (p - 1)
 * forwards of chunk size L / (p v): the pipeline fills with smaller blocks,
 * and the bubble shrinks by v ((p - 1) / (v m) of the ideal time, Narayanan
 * et al., 2021). Under --pipeline-schedule all-forward-all-backward with
 * virtual stages every forward runs first (W = m v), in the same order.
 * Micro-batches must come in groups of p (Megatron's rule, checked by the
 * trainer: dg_pp_interleave_check).
 *
 * The pass also stamps node.stage of every micro-batch node with its
 * virtual stage (rank + p chunk), which the stages after the PP pass
 * (autodiff, the micro-batches' gradient accumulation) leave at the rank:
 * a node of decoder layer l is in l's chunk; a node outside the layers in
 * the latest chunk it reads from in its micro-batch (the gradient
 * accumulation of a parameter in its chunk), else the embedding's chunk 0
 * on rank 0, the loss's chunk v - 1 on the last rank.
 */
#ifndef DG_PASS_PP_INTERLEAVE_H
#define DG_PASS_PP_INTERLEAVE_H

#include "dg_pass_pp.h"

/* n_mb micro-batches fit the interleaved schedule: DG_OK, or DG_EINPUT
 * with one line (n_mb not a multiple of the pipeline size; `what` names
 * the flags that make n_mb, e.g. "--global-batch-size 6 / (...)"). */
int dg_pp_interleave_check(const dg_pp_opts *o, int n_mb, const char *what, dg_err *err);

/* Rank o->rank's blocks in order (ids as above). Returns the count, 2 m v. */
int dg_pp_interleave_blocks(const dg_pp_opts *o, int n_mb, int *seq);

/* Stamp the virtual stages and add the schedule's edges (as
 * dg_pass_pp_schedule, which calls this when o has virtual stages). */
int dg_pass_pp_interleave(dg_graph *g, const dg_pp_opts *o, int n_mb, int *n_edges, dg_err *err);

#endif /* DG_PASS_PP_INTERLEAVE_H */
