/* dg_op_vocab.h — vocabulary parallelism (Megatron's VocabParallelEmbedding
 * and vocab_parallel_cross_entropy) as ops: only the TP pass's rewrites
 * emit them (dg_tp_rewrites.c).
 *
 * Under TP the word embedding and the output layer hold rows
 * [r * Vl, (r + 1) * Vl) of the padded vocabulary on tp rank r. `rank` below
 * is the tp coordinate input (dg_mesh_coord_input, i32 [1]); attr V is the
 * whole vocabulary, so a token or target outside [0, V) is still an error.
 *
 *   vocab_embedding(table [Vl, H], tokens [...], rank) -> [..., H]
 *       the rows of tokens in this slice, zero rows for the others: a
 *       partial sum over tp (dg_shard_embedding); the consumer's rule
 *       cannot take a partial sum, so the TP pass puts the all-reduce there.
 *       Adjoint: vocab_embedding_bwd(dout, tokens, rank) -> dtable [Vl, H],
 *       from the tokens in this slice only.
 *   vocab_xent_stats(logits [..., Vl], targets, rank) -> [1, N, 2]
 *       per row the slice's logsumexp and the target's logit (0 when
 *       another rank holds it); split on dim 0 over tp, so an all-gather
 *       makes the group's [tp, N, 2] (2 floats a row, never the logits).
 *   vocab_xent_combine(stats [tp, N, 2], targets) -> lse, tlogit (targets' shape)
 *   vocab_xent(logits, targets, rank, lse, tlogit [, mask]) -> loss []
 *       Megatron's masked mean of lse - tlogit. The logits are an input for
 *       the backward only: the adjoint is vocab_xent_bwd(logits, targets,
 *       rank, lse, dloss [, mask]) -> dlogits [..., Vl] = softmax minus the
 *       one-hot of a target in the slice, on the slice, no communication;
 *       no gradient flows back through the statistics.
 *
 * The TP pass's rewrites of embedding and softmax_xent (DG_TRAIT_VOCAB):
 * with the table (the logits) split over an axis on the vocabulary they
 * emit the chains above, otherwise the op as it was.
 */
#ifndef DG_OP_VOCAB_H
#define DG_OP_VOCAB_H

#include "dg_op.h"

extern const dg_op_def dg_op_vocab_embedding;
extern const dg_op_def dg_op_vocab_embedding_bwd;
extern const dg_op_def dg_op_vocab_xent_stats;
extern const dg_op_def dg_op_vocab_xent_combine;
extern const dg_op_def dg_op_vocab_xent;
extern const dg_op_def dg_op_vocab_xent_bwd;

/* The mesh axis that splits the last dim of t alone (no second axis, no
 * stride), or DG_AXIS_NONE: a vocab-parallel logits tensor. */
dg_axis dg_vocab_split_axis(const dg_graph *g, int t);

#endif /* DG_OP_VOCAB_H */
