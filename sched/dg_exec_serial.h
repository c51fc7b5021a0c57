/* dg_exec_serial.h — the reference executor: every node, one at a time, in
 * topological order, on per-tensor buffers.
 *
 * No streams, no arena, no overlap: it is the oracle the real scheduler is
 * compared against, and what op tests use. Collectives are not supported
 * (they need a comm backend): running one is an error.
 */
#ifndef DG_EXEC_SERIAL_H
#define DG_EXEC_SERIAL_H

#include "dg_buffers.h"
#include "dg_op.h"

/* Run all nodes of g (order: NULL for dg_graph_topo_order's, which obeys the
 * ordering edges as well as the data edges; a caller's order must too) with kernels
 * split over `team` (NULL: this thread). Leaves (inputs, parameters) must be
 * filled in b by the caller. Returns DG_OK or an error naming the node. */
int dg_run_serial(const dg_graph *g, const int *order, dg_buffers *b, const dg_team *team,
                  dg_err *err);

/* Like dg_run_serial but only nodes whose phase is `phase`. */
int dg_run_serial_phase(const dg_graph *g, const int *order, dg_buffers *b, const dg_team *team,
                        dg_phase phase, dg_err *err);

#endif /* DG_EXEC_SERIAL_H */
