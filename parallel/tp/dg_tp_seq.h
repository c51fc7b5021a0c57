/* dg_tp_seq.h — sequence parallelism (Megatron's SP), the part of the TP
 * pass (dg_pass_tp.c) that runs when --sequence-parallel is on, and what
 * it shares with the pass's dropout rewrite (dg_tp_coord_form,
 * dg_tp_rule_on). Internal to that pass.
 *
 * Under SP the activations between the linears, [B, S, H], are split on the
 * sequence (dim 1) over tp: the layout [-,tp,-]. Nothing marks a layer: the
 * pass prefers that layout wherever an op's sharding rule takes it, and
 * inserts, in front of a node,
 *
 *   - all_gather(seq) of a sequence-split input of a linear whose weight is
 *     split over tp (column parallel: QKV, fc1, and the output layer, split
 *     on the vocabulary): the linear runs on the whole sequence (the gather's
 *     adjoint reduce-scatters the input's gradient, so no copy_to_group);
 *     a linear with a replicated weight (the MoE router) runs on the slice;
 *   - reduce_scatter(seq) of a partial(tp) [B, S, H] input (a row-parallel
 *     linear's output) where the op's rule takes the sequence-split layout
 *     (bias add, residual add, norms): instead of the all-reduce;
 *   - scatter_to_group(seq) of a replicated [B, S, H] activation there (the
 *     embedding's output, where the SP region starts: no traffic, its
 *     adjoint all-gathers);
 *
 * and, after the layouts fit, wraps each replicated parameter of a node
 * that runs on a tp slice (norm weights and biases, row-parallel biases,
 * the router) in a copy_to_group over tp: identity forward, so its adjoint
 * all-reduces the parameter's gradient over tp, which each rank only summed
 * over its own tokens (Megatron all-reduces these "sequence parallel"
 * gradients over tp too). The verifier checks the pairing both ways
 * (dg_verify_sharding.c, 'grad-group').
 *
 * Dropout runs on the slice too: the pass's table rewrites it to its form
 * with the tp coordinate (dg_op_dropout.h, dg_tp_coord_form), whose mask is the whole
 * sample's at the slice's place. Ops whose rule refuses a sequence split keep the TP
 * layouts: attention and RoPE (after the gathered QKV), the learned
 * position table's add, the cross entropy (on vocab-split logits).
 */
#ifndef DG_TP_SEQ_H
#define DG_TP_SEQ_H

#include <stdbool.h>

#include "dg_graph.h"

typedef struct dg_tp_seq {
    int tp;
    int cap;
    /* [cap] per dst tensor, or -1: its all-gather on the sequence, its
     * reduce-scatter or scatter (a tensor is partial or replicated, not
     * both), the copy_to_group of a parameter */
    int *gathered, *scattered, *param_copy;
} dg_tp_seq;

/* The dim of [B, S, H] activations SP splits. */
enum { DG_TP_SEQ_DIM = 1 };

void dg_tp_seq_init(dg_tp_seq *s, int tp);
void dg_tp_seq_free(dg_tp_seq *s);

/* Before the TP rules: gather, reduce-scatter or scatter n's inputs `in`
 * (dst tensors) as above. whole_linear: n is a linear that needs the whole
 * sequence (its weight split over tp). */
int dg_tp_seq_inputs(dg_tp_seq *s, dg_graph *dst, const dg_node *n, int *in, bool whole_linear);

/* Whether the TP pass emits n in its form with the tp coordinate, with or
 * without SP: dropout (DG_TRAIT_RANDOM; dg_op_dropout.h), which takes an
 * input split on dim 1 over tp: SP's sequence, or the heads of unfused
 * attention's probabilities [B, H, S, S]; on a replicated input the
 * rewrite (dg_tp_rewrites.c) copies it. (The fused attention, RANDOM for
 * its dropout, keeps its form: its rewrite puts the head offset in its
 * key; dg_tp_rule_on asks the coordinate form of two-input nodes only.) */
bool dg_tp_coord_form(const dg_node *n);

/* n's rule on inputs `in` (dst tensors) laid out `lay`, as the TP pass emits
 * n: DG_OK and the outputs' layouts in out[DG_MAX_OUTPUTS], or
 * DG_SHARD_CANNOT. A dropout is asked in that form (dg_tp_coord_form),
 * with the tp coordinate (replicated; input 1 stands in for its id). May
 * write lay[n_in]. */
int dg_tp_rule_on(const dg_graph *dst, const dg_node *n, const int *in, dg_sharding *lay, dg_sharding *out);

/* Whether n's rule, in the form the pass emits n (as dg_tp_rule_on),
 * takes inputs `in` (tensors of dst) as they are laid out. */
int dg_tp_rule_takes(const dg_graph *dst, const dg_node *n, const int *in);

/* After them: the copy_to_group of each replicated parameter of a node that
 * runs on a tp slice. */
int dg_tp_seq_params(dg_tp_seq *s, dg_graph *dst, const dg_node *n, int *in);

/* --tp-comm-overlap: the linears around the SP region in chunks of the
 * sequence, so one chunk's all-gather or reduce-scatter runs beside another
 * chunk's GEMM (a rewrite: the scheduler overlaps what the graph lets it).
 * The TP pass rewrites such a matmul through its table
 * (dg_tp_rewrites.h) with this record:
 *   column parallel, input split on the sequence: chunk j of each rank's
 *     slice is all-gathered (chunks of one input shared by q, k and v) and
 *     multiplied; the products, rows (rank, j, i), are put back in sequence
 *     order;
 *   row parallel: chunk j takes rows (rank, j, i) of the whole-sequence
 *     input, is multiplied and reduce-scattered on the sequence; the pieces
 *     concatenate to the rank's slice, so the output is split on the
 *     sequence (no reduce-scatter behind it). */
#define DG_TP_OVERLAP_CHUNKS 2
typedef struct dg_tp_overlap {
    int tp, chunks;
    int cap;
    int (*gathered)[DG_TP_OVERLAP_CHUNKS]; /* [cap] per dst tensor: its chunks' all-gathers, or -1 */
} dg_tp_overlap;

#endif /* DG_TP_SEQ_H */
