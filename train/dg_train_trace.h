/* dg_train_trace.h — what `dagatron train --trace` names each rank. */
#ifndef DG_TRAIN_TRACE_H
#define DG_TRAIN_TRACE_H

#include "dg_grid.h"
#include "dg_trace.h"

/* Name the recorder's process by the rank's grid coordinates, e.g.
 * "rank 3 (pp 1, tp 1)": pp and tp always, cp, ep and dp where > 1, so that
 * the merged file reads as the pipeline drawings do (one row per stage). */
void dg_train_trace_name(dg_trace *tr, const dg_grid *g);

#endif /* DG_TRAIN_TRACE_H */
