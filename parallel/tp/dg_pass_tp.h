/* dg_pass_tp.h — tensor parallelism (Megatron's TP, and SP) as a graph
 * pass.
 *
 * The model builder places each weight over tp (dg_tensor.place): column-
 * parallel weights (QKV, fc1; SwiGLU's fused fc1 strided by 2) split their
 * output dim, row-parallel ones (the attention projection, fc2) their input
 * dim. The TP pass re-emits the logical graph (dg_reemit.h) and
 *
 *   1. makes each parameter placed over tp this rank's shard (local shape,
 *      layout split over tp as placed); the sharding rules then give every
 *      activation its layout and rewrite reshape dims for local shapes, so
 *      attention runs on this rank's heads and query groups;
 *   2. inserts, in front of a node, the collective that makes its inputs'
 *      layouts agree with its rule: a copy_to_group (identity forward,
 *      all-reduce of the gradient) before the input of a column-parallel
 *      linear, an all-reduce of a partial sum where the rule cannot take it
 *      (the residual add behind a row-parallel linear), an all-gather of a
 *      split where nothing else helps. One collective per tensor: q, k and v
 *      share the copy of their input. Only the forward changes: autodiff
 *      derives the backward communication from the collectives' adjoints.
 *
 *   3. rewrites the ops with a trait TP handles (DG_TP_TRAITS) through its
 *      table (dg_tp_rewrites.h), refusing one with no entry: the
 *      vocabulary's two ops (dg_op_vocab.h): the word embedding, its table split on the
 *      vocabulary, becomes a masked local lookup whose output is a partial
 *      sum over tp, so step 2 puts the all-reduce in front of its first
 *      consumer; the cross entropy on logits split on the vocabulary (the
 *      output layer is column-parallel, tied or not) becomes per-row
 *      statistics on the slice, one all-gather of those (2 floats a row),
 *      and the loss on every rank: the whole logits never exist on a rank,
 *      and the backward is local to the slice; dropout to its form with
 *      the tp coordinate (dg_op_dropout.h), so unfused
 *      attention's dropout runs on this rank's heads of the probabilities
 *      and the chain from the scores to the context is never gathered.
 *
 * Gradients of the replicated parameters (norms, row-parallel biases) are
 * identical on every tp rank, since their inputs are replicated without SP;
 * one read on a tp slice (SP's sequence, --qk-layernorm's weight on this
 * rank's heads) is read through a copy_to_group (dg_tp_seq_params), so its
 * gradient is all-reduced over tp.
 * The vocabulary must divide by tp: the trainer pads it to a multiple of
 * --make-vocab-size-divisible-by x tp, as Megatron does.
 *
 * With --sequence-parallel (dg_pass_tp_sp) the activations between the
 * linears are split on the sequence over tp instead of replicated
 * (dg_tp_seq.h): all-gathers and reduce-scatters replace the copies and
 * all-reduces, and the parameters replicated over tp under the split read
 * through a copy_to_group, so their gradients are all-reduced over tp.
 *
 * With tp = 1 the pass copies the graph as it is.
 */
#ifndef DG_PASS_TP_H
#define DG_PASS_TP_H

#include <stdbool.h>

#include "dg_graph.h"

/* The pass's options (the pipeline's tp stage). */
typedef struct dg_pass_tp_opts {
    int tp_size;            /* --tensor-model-parallel-size; 0 counts as 1 */
    bool sequence_parallel; /* --sequence-parallel (dg_tp_seq.h: activations between the linears
                             * split on the sequence over tp, all-gathers before the column-parallel
                             * linears and reduce-scatters after the row-parallel ones); off at tp 1,
                             * as Megatron turns SP off */
    bool comm_overlap;      /* --tp-comm-overlap (with SP): those linears in chunks of the sequence,
                             * each chunk's collective beside another's GEMM */
} dg_pass_tp_opts;

/* Run the pass on the logical graph src: *out gets a new graph (free with
 * dg_graph_free), tmap[t] the id in *out of src's tensor t. Returns DG_OK,
 * or DG_EINPUT naming the parameter whose placed dim tp does not divide,
 * the node no collective can fix, or an op with a trait TP rewrites and no
 * entry in the pass's table (dg_tp_rewrites.h). */
int dg_pass_tp_run(const dg_graph *src, const dg_pass_tp_opts *o, dg_graph **out, int *tmap, dg_err *err);

/* dg_pass_tp_run with {tp_size} and with {tp_size, sequence_parallel,
 * tp_comm_overlap}. */
int dg_pass_tp(const dg_graph *src, int tp_size, dg_graph **out, int *tmap, dg_err *err);
int dg_pass_tp_sp(const dg_graph *src, int tp_size, bool sequence_parallel, bool tp_comm_overlap, dg_graph **out,
                  int *tmap, dg_err *err);

#endif /* DG_PASS_TP_H */
