/* dg_grid_opts.h — the rank grid's options from the flags.
 *
 * The one place where the parallel flags (--tensor-model-parallel-size,
 * --context-parallel-size, --expert-model-parallel-size,
 * --pipeline-model-parallel-size, --expert-tensor-parallel-size) become the
 * grid's sizes (sched/dg_grid.h), and where they are checked before a grid
 * is made. The trainer asks here and reads no parallel size itself: what
 * it needs of the axes afterwards, the grid answers (dg_grid_coords,
 * dg_grid_first_replica, the groups).
 *
 *   if (comm == MPI_COMM_NULL) return dg_grid_opts_check_one_rank(c, err);
 *   DG_TRY(dg_grid_opts_check(c, err));          // the same on every rank
 *   dg_grid_sizes sz = dg_grid_opts_sizes(c);
 *   dg_grid *g = dg_grid_new(comm, &sz, &st, err);
 */
#ifndef DG_GRID_OPTS_H
#define DG_GRID_OPTS_H

#include "dg_grid.h"
#include "dg_train_config.h"

/* The sizes the flags ask for: tp, cp, ep, pp and etp as given (etp 0:
 * Megatron's default, tp); dp 0, derived from the world by dg_grid_new. */
dg_grid_sizes dg_grid_opts_sizes(const dg_train_config *c);

/* The parallel flags' own checks, in this order: TP's
 * (dg_train_config_check_tp), CP's (dg_train_config_check_cp), PP's
 * (dg_train_pp_check). They read the flags alone, so every rank gets the
 * same answer. DG_OK or DG_EINPUT with the failing check's line. */
int dg_grid_opts_check(const dg_train_config *c, dg_err *err);

/* A run without MPI is a world of one: DG_OK when the flags ask for no
 * model parallelism (tp x cp x ep x pp = 1); otherwise DG_EINPUT, with the
 * line of the flags' own check when one fails (dg_grid_opts_check), else
 * "model parallelism needs MPI (run under mpirun)". */
int dg_grid_opts_check_one_rank(const dg_train_config *c, dg_err *err);

#endif /* DG_GRID_OPTS_H */
