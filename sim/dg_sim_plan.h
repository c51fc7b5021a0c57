/* dg_sim_plan.h — `dagatron plan`: the parallel layouts of a model on a
 * cluster, searched in two levels and ranked by predicted step time.
 *
 *   1. enumerate: TP (powers of two within a node), CP (powers of two), EP
 *      (divisors of the experts) with ETP = TP or 1, PP (divisors of the
 *      layers) with virtual stages, micro-batch size, SP, recompute (none,
 *      selective, full), the distributed optimizer; DP is what the world
 *      leaves. Each candidate is finished by the trainer's own checks
 *      (dg_step_config): what `train` would refuse is dropped.
 *   2. memory: the analytical model (sim/dg_sim_memory.h) of every stage;
 *      a candidate over the device's capacity is dropped, before any cost.
 *   3. rank: an analytical step time from the simulator's own constants
 *      (dg_sim_device: peak x per-kind efficiency, HBM bandwidth, the links'
 *      alpha-beta through dg_link_time):
 *        per micro-batch on the slowest stage: its layers' FLOPs (Megatron's
 *        formula's terms, times 4/3 under full recompute) on GEMM and
 *        attention efficiency, the element-wise traffic (three passes over
 *        the layer's activations, Korthikanti's bytes) at HBM speed, TP's
 *        all-reduces (SP: all-gathers and reduce-scatters), CP's ring
 *        (hidden behind attention where it can be), EP's all-to-alls, PP's
 *        send/recv;
 *        step = (m + (p - 1) / v) x that (1F1B's and interleaved 1F1B's
 *        bubble) + the DP gradient reduce (and the distributed optimizer's
 *        gather; with --overlap-grad-reduce only what outlasts the
 *        backward) + the optimizer's pass over its shard at HBM speed.
 *   4. simulate: the best K by that estimate run through dg_sim_run (the
 *      full virtual-time simulation) within a time budget; each in a child
 *      process, so one that outlasts the budget is stopped, not waited for.
 *      The table is ranked by the simulated step time where there is one.
 */
#ifndef DG_SIM_PLAN_H
#define DG_SIM_PLAN_H

#include <stdio.h>

#include "dg_sim.h"

typedef struct dg_sim_plan_opts {
    int world_size;       /* GPUs (required) */
    int gpus_per_node;    /* 0: the profile's devices_per_node */
    int top;              /* rows printed (default 5) */
    int simulate_top;     /* candidates run through dg_sim_run (default 3; 0: none) */
    double budget_s;      /* wall seconds for those simulations (default 60) */
} dg_sim_plan_opts;

/* One layout. */
typedef struct dg_sim_plan_cand {
    int tp, cp, ep, etp, pp, vp, dp, mbs; /* dp: Megatron's data-parallel size (ep x the grid's dp) */
    int sp, dist_opt;
    dg_sim_recompute rc;
    int microbatches;
    double mem_bytes;     /* the memory model's largest stage, per GPU */
    double est_step_s, est_mfu;  /* the analytical estimate */
    double sim_step_s, sim_mfu;  /* dg_sim_run's; 0: not simulated */
    int sim_status;       /* 0: simulated; 1: not tried; 2: over the budget; 3: the simulator failed */
} dg_sim_plan_cand;

typedef struct dg_sim_plan_result {
    int n_enumerated;     /* combinations tried */
    int n_valid;          /* accepted by the trainer's checks */
    int n_fit;            /* of those, within the memory capacity */
    double capacity;      /* bytes per GPU */
    double smallest_bytes; /* the least memory of any valid candidate (when none fits) */
    int n;                /* candidates kept (the best, ranked) */
    dg_sim_plan_cand *cand;
    double search_s, sim_s;
} dg_sim_plan_result;

/* Search base's model (the train flags; its own parallel sizes ignored) on
 * o->world_size GPUs of dev. DG_EINPUT with one line when nothing fits
 * ("nothing fits: ...", the smallest need beside the capacity) or the
 * flags are bad; r->cand[0] is the best. */
int dg_sim_plan_search(const dg_train_config *base, const dg_sim_device *dev, const dg_sim_plan_opts *o,
                       dg_sim_plan_result *r, dg_err *err);
void dg_sim_plan_result_free(dg_sim_plan_result *r);

/* base with cand's layout applied (parallel sizes, virtual stages,
 * micro-batch size, SP, recompute, distributed optimizer). */
void dg_sim_plan_apply(const dg_train_config *base, const dg_sim_plan_cand *cand, dg_train_config *out);

/* The analytical step time of a finished config c on grid sz (step 3 of the
 * search); *mfu gets Megatron's MFU for it. */
double dg_sim_plan_estimate(const dg_train_config *c, const dg_grid_sizes *sz, const dg_sim_device *dev,
                            double *mfu);

/* dg_sim_run of cfg (not finished, as dg_sim_run takes it) on `world`
 * GPUs of dev in a child process, given `left` wall seconds: 0 with
 * *step_s and *mfu; 2 it ran out of time (the child is stopped); 3 the
 * simulator failed. */
int dg_sim_plan_simulate(const dg_train_config *cfg, const dg_sim_device *dev, int world, double left,
                         double *step_s, double *mfu);

/* The train flags of cand: "--tensor-model-parallel-size 8 ..." (every
 * flag the plan decides, always written). */
void dg_sim_plan_flags(const dg_sim_plan_cand *cand, char *buf, size_t n);

/* Whether argv[i] is a flag the plan decides (its value follows unless it
 * is a switch): *takes_value set. */
int dg_sim_plan_owns_flag(const char *flag, int *takes_value);

#endif /* DG_SIM_PLAN_H */
