/* dg_sim_internal.h — what the simulator's files share (not a public API). */
#ifndef DG_SIM_INTERNAL_H
#define DG_SIM_INTERNAL_H

#include "dg_grid.h"
#include "dg_sched.h"
#include "dg_sim.h"

/* Read the device profile JSON file `path` (dg_sim_profile_read.c): every
 * figure required, of its type and range, no unknown key. `what` opens the
 * one-line DG_EINPUT message ("--device-profile FILE: peak_fp32: expected a
 * finite number > 0, it is missing"). */
int dg_sim_device_read_json(const char *path, const char *what, dg_sim_device *d, dg_err *err);

/* One pipeline stage's step graph, as the trainer builds it, and its plan
 * (sched/dg_sched.h, with the trainer's cost model for the same links, so
 * the priorities and the memory plan are the real run's). */
typedef struct dg_sim_stage {
    dg_graph *g;
    dg_sched_plan *plan;
} dg_sim_stage;

/* Build stage pp_stage (train/dg_step_build.h) and plan it; links: the
 * spec the engine times the collectives with (NULL: the config's
 * --emulate-link), whose emulated axes the plan's cost model takes. */
int dg_sim_build_stage(const dg_train_config *c, const dg_grid_sizes *sz, int pp_stage, int memory_plan,
                       const dg_link_spec *links, dg_sim_stage *out, dg_err *err);
void dg_sim_stage_free(dg_sim_stage *s);

/* Stages with more nodes are planned without the memory plan (its
 * placement is quadratic); their memory is the live-bytes peak. */
#define DG_SIM_MEMPLAN_MAX_NODES 60000

/* The most activation bytes live at once on the plan's simulated timeline
 * (the memory plan's lower bound; it reaches it within a few %). */
double dg_sim_live_peak(const dg_sim_stage *s);

/* The device's time for node n of g (seconds, > 0), collectives on `links`
 * (resolved per axis: dg_sim_axis_links). */
double dg_sim_node_time(const dg_sim_device *d, const dg_link axis_link[DG_AXIS_COUNT], int bf16,
                        const dg_graph *g, const dg_node *n);

/* The link of each axis: the spec's where it names one, else the device's
 * intra-node link when the axis's groups fit in a node, else inter-node. */
void dg_sim_axis_links(const dg_sim_device *d, const dg_link_spec *spec, const dg_grid_sizes *sz,
                       dg_link out[DG_AXIS_COUNT]);

/* A point-to-point message's tag (the runtime's, sched/dg_comm.c): what a
 * send and its recv share. */
int dg_sim_p2p_tag(const dg_node *n);

/* A step of m >= DG_SIM_MB_MIN x p micro-batches on p > 1 stages is
 * simulated at DG_SIM_MB_LO x p and DG_SIM_MB_HI x p micro-batches and
 * extrapolated to m (dg_sim_run.c says why that is exact past the fill). */
#define DG_SIM_MB_LO 1
#define DG_SIM_MB_HI 2
#define DG_SIM_MB_MIN 4

/* dg_sim_run, with full = 1: every micro-batch simulated, never
 * extrapolated (what the extrapolation is tested against). */
int dg_sim_run_mode(const dg_train_config *cfg, const dg_sim_device *dev, const dg_link_spec *spec,
                    const dg_sim_opts *o, int full, dg_sim_result *r, dg_err *err);

#endif /* DG_SIM_INTERNAL_H */
