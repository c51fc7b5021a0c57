/* dg_train_trace.h — `dagatron train --trace`: what it names each rank, and
 * the start-up check of its path. */
#ifndef DG_TRAIN_TRACE_H
#define DG_TRAIN_TRACE_H

#include "dg_base.h"
#include "dg_grid.h"
#include "dg_trace.h"

/* Name the recorder's process by the rank's grid coordinates, e.g.
 * "rank 3 (pp 1, tp 1)": pp and tp always, cp, ep and dp where > 1, so that
 * the merged file reads as the pipeline drawings do (one row per stage). */
void dg_train_trace_name(dg_trace *tr, const dg_grid *g);

/* Can the trace be written to `path` (--trace), known before iteration 1
 * rather than after the traced one? It is not a directory; a regular file,
 * or a path that does not exist yet, is created in its directory (a writer
 * may put its temporary file beside it), so that directory exists and a
 * file can be created there (tested by creating one with O_EXCL and
 * removing it, as permission bits say nothing of root or of read-only
 * mounts), and an existing file is writable; anything else (a device, a
 * FIFO) is written in place and must be writable. Leaves nothing behind and
 * removes nothing it did not create. DG_EINPUT with one line naming
 * --trace, the path and the problem. */
int dg_train_trace_check_path(const char *path, dg_err *err);

#endif /* DG_TRAIN_TRACE_H */
