/* dg_ckpt_pieces.h — what one rank holds of each global tensor, as
 * checkpoint pieces (io/dg_ckpt_shards.h): boxes of the global tensor, found
 * from the tensor's layout (graph/dg_layout.h: TP splits, strided fused
 * weights, expert rows over EP) and, for the distributed optimizer's
 * moments, the flat element range of the tensor this rank owns.
 *
 * A local tensor maps to the global one dim by dim (each dim's local index
 * goes to one global index), so a box of local elements maps to the product
 * of each dim's runs of consecutive global indices: one box for a plain
 * split, k for a stride-k split (SwiGLU's [gate; up], fused QKV). A flat
 * range of local elements (an optimizer shard) is first cut into at most
 * 2 ndim - 1 local boxes. */
#ifndef DG_CKPT_PIECES_H
#define DG_CKPT_PIECES_H

#include "dg_ckpt_shards.h"
#include "dg_graph.h"

typedef struct dg_ckpt_pieces {
    int n, cap;
    dg_ckpt_piece *p;
} dg_ckpt_pieces;

void dg_ckpt_pieces_free(dg_ckpt_pieces *l);

/* Append the pieces of local tensor t (its local shape and layout; mesh and
 * coord as dg_shard_copy's) for its local elements [lo, hi) (row-major),
 * named prefix + t->name, whose memory starts with element lo at mem.
 * DG_EINTERNAL when the name does not fit. */
int dg_ckpt_pieces_add(dg_ckpt_pieces *l, const dg_tensor *t, const char *prefix, const int *mesh, const int *coord,
                       int64_t lo, int64_t hi, void *mem, dg_err *err);

#endif /* DG_CKPT_PIECES_H */
