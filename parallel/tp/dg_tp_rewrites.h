/* dg_tp_rewrites.h — the TP pass's table: for each op with a trait TP
 * handles (DG_TP_TRAITS), the rewrite that emits its tensor-parallel form.
 * Internal to parallel/tp: only dg_pass_tp.c reads it
 * (tests/parallel/passes_own_rewrites.sh checks).
 *
 *   embedding      with its table split on the vocabulary: vocab_embedding,
 *                  a partial sum over tp (dg_op_vocab.h);
 *   softmax_xent   on logits split on the vocabulary: per-row statistics on
 *                  the slice, one all-gather of those, the loss on every
 *                  rank (the whole logits never exist on a rank);
 *   dropout        on an input split on dim 1 over tp: the form with the tp
 *                  coordinate (dg_op_dropout.h);
 *   attention      with dropout on heads split over tp: its key with the
 *                  rank's first global head (dg_op_attn_key.h);
 *   matmul         under --tp-comm-overlap, a linear in chunks of the
 *                  sequence (dg_tp_seq.h, dg_tp_overlap);
 *   expand_heads   onto heads split over tp: its input through a
 *                  copy_to_group (the gradient sums a rank's heads only).
 * Anything else of these ops is copied.
 */
#ifndef DG_TP_REWRITES_H
#define DG_TP_REWRITES_H

#include <stdbool.h>

#include "dg_op.h"
#include "dg_tp_seq.h"
#include "dg_reemit.h"

#define DG_TP_TRAITS (DG_TRAIT_VOCAB | DG_TRAIT_RANDOM | DG_TRAIT_LINEAR | DG_TRAIT_BROADCAST)

/* What the pass tells a rewrite about the node besides its inputs. */
typedef struct dg_tp_node {
    bool as_is;             /* the entry's takes_as_is said yes: the inputs were not fitted */
    dg_tp_overlap *overlap; /* --tp-comm-overlap's record (chunks' gathers, memoised); NULL: off */
} dg_tp_node;

/* Node n of src on inputs in[] (tensors of g, fitted by the pass): emit its
 * TP form into g with out[] its outputs and return DG_OK, or return
 * DG_REEMIT_COPY, or an error in err. */
typedef int (*dg_tp_rewrite_fn)(dg_graph *g, const dg_graph *src, const dg_node *n, const int *in, int *out,
                                dg_tp_node *tn, dg_err *err);

typedef struct dg_tp_rewrite {
    const dg_op_def *op;
    dg_tp_rewrite_fn fn;
    /* NULL, or whether the rewrite takes n's inputs (tensors of g) as they
     * are, so the pass puts no collective in front (the vocab-parallel
     * loss takes logits split on the vocabulary; a chunked linear gathers
     * or scatters in its chunks). May record in tn. */
    bool (*takes_as_is)(const dg_graph *g, const dg_node *n, const int *in, dg_tp_node *tn);
} dg_tp_rewrite;

/* Ends with {NULL, NULL}. */
extern const dg_tp_rewrite dg_tp_rewrites[];

#endif /* DG_TP_REWRITES_H */
