/* dg_rank_bytes.h — what one rank holds of the model (issue 12): the bytes
 * of its parameters, their gradients and its optimizer state, printed at
 * startup so a layout's memory per rank can be read off the log (TP=2
 * holds about half the dense parameters of TP=1).
 *
 * Megatron prints, from each rank of data-parallel rank 0,
 *   " > number of parameters on (tensor, pipeline) model parallel rank (t, p): N"
 * dagatron prints that line, then
 *   "dagatron train: rank R (tensor, pipeline) (t, p): parameters X bytes,
 *    gradients Y bytes, optimizer state Z bytes"
 * from the same ranks (each its own lines, flushed at once).
 */
#ifndef DG_RANK_BYTES_H
#define DG_RANK_BYTES_H

#include <stdint.h>
#include <stdio.h>

#include "dg_graph.h"

typedef struct dg_rank_bytes {
    int64_t params;         /* parameter elements this rank holds */
    int64_t param_bytes;    /* their bytes */
    int64_t grad_bytes;     /* bytes of their gradients in the step graph */
    int64_t optim_bytes;    /* optimizer state (master weights, moments) */
} dg_rank_bytes;

/* Sum over g's parameters; optim_bytes as given (dg_dist_state_bytes). */
dg_rank_bytes dg_rank_bytes_of(const dg_graph *g, int64_t optim_bytes);

/* The two lines above for world rank `rank` at coordinates coord (per axis,
 * dg_grid_coords): its tp and pp name the piece of the model it holds. */
void dg_rank_bytes_print(const dg_rank_bytes *b, int rank, const int coord[DG_AXIS_COUNT], FILE *f);

#endif /* DG_RANK_BYTES_H */
