/* dg_pool.h — the compute team: a fixed set of pinned threads behind a dg_team.
 *
 * A pool of n threads is the calling thread (member 0, the compute stream's
 * driver) plus n-1 helpers it owns. dg_team_run(team, n, fn, arg) hands
 * member i the range dg_team_split(n, nthreads, i), runs member 0's range on
 * the caller, and returns when every range is done. Because the split only
 * depends on (n, nthreads) and kernels never split a reduction, a kernel's
 * result does not depend on which thread ran which range or when.
 *
 * Idle helpers sleep on a condition variable: they spin a few microseconds
 * after a job (back-to-back kernels are common inside a step) and then block,
 * so nothing burns a core while the team has no work. One caller at a time:
 * the compute stream runs one kernel at a time, which is what the executor
 * guarantees.
 */
#ifndef DG_POOL_H
#define DG_POOL_H

#include "dg_team.h"
#include "dg_topo.h"

typedef struct dg_pool dg_pool;

/* Start nthreads-1 helpers (nthreads >= 1). With a topo, helper i binds to
 * slot first_slot + i and is logged as "<name>.<i>"; the caller binds
 * itself (member 0) if it wants to. topo may be NULL (no pinning). */
dg_pool *dg_pool_new(int nthreads, dg_topo *topo, int first_slot, const char *name);

/* Stop and join the helpers. */
void dg_pool_free(dg_pool *p);

/* The team view kernels receive (valid until dg_pool_free). */
const dg_team *dg_pool_team(const dg_pool *p);

#endif /* DG_POOL_H */
