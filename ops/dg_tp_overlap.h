/* dg_tp_overlap.h — the chunked linears of --tp-comm-overlap (the record
 * and what they compute: graph/passes/dg_tp_seq.h, dg_tp_overlap). */
#ifndef DG_TP_OVERLAP_H
#define DG_TP_OVERLAP_H

#include "dg_op.h"

/* dg_op_matmul's `lower`: x = in[0], w = in[1]; opts is a dg_tp_overlap.
 * A column-parallel linear whose x is split on the sequence, or a
 * row-parallel one, in chunks of the sequence. */
int dg_matmul_lower_tp_overlap(dg_graph *g, const dg_graph *src, const dg_node *n, const int *in, int *out,
                               const void *opts, dg_err *err);

#endif /* DG_TP_OVERLAP_H */
