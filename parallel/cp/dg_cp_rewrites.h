/* dg_cp_rewrites.h — the CP pass's table: for each op with a trait CP
 * handles (DG_CP_TRAITS), the rewrite that emits its form on this rank's
 * two chunks of the sequence (dg_pass_cp.h says what each computes). Internal
 * to parallel/cp: only dg_pass_cp.c reads it
 * (tests/parallel/passes_own_rewrites.sh checks).
 */
#ifndef DG_CP_REWRITES_H
#define DG_CP_REWRITES_H

#include "dg_op.h"
#include "dg_pass_cp.h"
#include "dg_reemit.h"

/* The traits whose ops CP rewrites: they see positions or the whole
 * sequence, reduce over all tokens, draw by global place, or regroup the
 * token dims. */
#define DG_CP_TRAITS \
    (DG_TRAIT_POSITIONS | DG_TRAIT_SEQUENCE | DG_TRAIT_TOKEN_STAT | DG_TRAIT_RANDOM | DG_TRAIT_REGROUP)

/* Node n (its inputs in[], tensors of g, split as the CP pass left them):
 * emit its CP form into g with out[] its outputs and return DG_OK, or
 * return DG_REEMIT_COPY (the node is copied: its tokens are not split over
 * cp), or an error in err naming the flag. */
typedef int (*dg_cp_rewrite_fn)(dg_graph *g, const dg_node *n, const int *in, int *out, const dg_pass_cp_opts *o,
                                dg_err *err);

typedef struct dg_cp_rewrite {
    const dg_op_def *op;
    dg_cp_rewrite_fn fn;
} dg_cp_rewrite;

/* Ends with {NULL, NULL}. */
extern const dg_cp_rewrite dg_cp_rewrites[];

#endif /* DG_CP_REWRITES_H */
