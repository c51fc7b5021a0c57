/* dg_sim.h — `dagatron simulate`: the scheduler in virtual time over the
 * very step graphs the ranks of a run would execute, for any world size and
 * parallel layout, without launching ranks or allocating a tensor.
 *
 *   dg_sim_device dev;
 *   dg_sim_device_load("local", &dev, &err);          // or "h100", "a100", "h200", FILE.json
 *   dg_link_spec links = {0};                         // axes left 0: the device's defaults
 *   dg_link_spec_parse("ep=25,10", "--emulate-link", &links, &err);
 *   dg_sim_opts o = {.world_size = 16};
 *   dg_sim_result r;
 *   dg_sim_run(&train_cfg, &dev, &links, &o, &r, &err);
 *   dg_sim_result_print(&r, stdout);
 *   dg_sim_result_free(&r);
 *
 * What it runs. The rank grid (sched/dg_grid.h) puts tp innermost, then cp,
 * ep/dp, pp outermost. Ranks that differ only in their tp, cp, ep or dp
 * coordinate run the same graph (their coordinates are runtime inputs), so
 * one representative rank per pipeline stage stands for all: its step graph
 * is built by the trainer's own path (the model builder, then
 * parallel/dg_pipeline.h: parallel passes, autodiff, recompute, micro-batches,
 * the schedule, DP, the optimizer) and planned by sched/dg_sched_plan.c
 * (priorities, streams, memory plan). Nothing is allocated for tensors.
 * Memory per GPU comes from an analytical model (sim/dg_sim_memory.h:
 * Megatron's accounting and Korthikanti et al.'s activation formulas),
 * computed before any graph is built; a configuration over the device's
 * capacity is refused. The planned arena is reported beside it.
 *
 * How it runs them. Each representative rank has the executor's two
 * streams: the compute stream takes its most urgent ready task (the plan's
 * priority rank), the comm stream runs its tasks in plan order, each task
 * waits for all its predecessors (data, ordering and memory edges). A node
 * lasts its cost-model time (below). Collectives over tp/cp/ep/dp are
 * symmetric (every member runs the same graph at the same time), so each
 * costs its alpha-beta time from the moment the representative starts it.
 * PP send/recv are matched between stages by (stage pair, tag) in order:
 * a send is eager (it ends after its wire time; the receiver need not be
 * there, as with the runtime's staging copy), a recv ends no earlier than
 * the matching send's end. That is where the pipeline bubble comes from.
 *
 * The cost model (docs/simulate.md has the constants and their sources):
 *   compute node of kind k:  task_s + max(flops / (peak * eff[k]),
 *                                          bytes / (mem_bytes_per_s * mem_eff[k]))
 *   collective over p >= 2:  comm_task_s + dg_link_time() on its axis' link
 *                            (sched/dg_comm_emulate.h: the same alpha-beta
 *                            formulas the link emulation waits for)
 *   collective over 1 rank:  task_s + bytes / mem_bytes_per_s (a local copy)
 * with `peak` the device's fp32 or 16-bit peak as the run trains in. The op
 * kind comes from the op's name (dg_sim_op_kind). On native16 devices
 * (GPUs, dg_sim_device.native16) a reshape is a view (task_s only).
 */
#ifndef DG_SIM_H
#define DG_SIM_H

#include <stdio.h>

#include "dg_comm_emulate.h"
#include "dg_op.h"
#include "dg_sim_memory.h"
#include "dg_train_config.h"

/* ---- device profiles ------------------------------------------------------ */

/* What kind of work an op is, for its efficiency. */
typedef enum dg_sim_kind {
    DG_SIM_GEMM = 0,   /* matmul, grouped GEMMs */
    DG_SIM_ATTENTION,  /* attention forward/backward, CP's blocks */
    DG_SIM_ELEMWISE,   /* norms, activations, rope, adds, MoE permutes and copies */
    DG_SIM_EMBED,      /* embeddings, vocab-parallel cross entropy */
    DG_SIM_OPTIM,      /* AdamW, gradient norm, DP pack/unpack */
    DG_SIM_KIND_COUNT
} dg_sim_kind;

/* "gemm", "attention", "elemwise", "embed", "optim". */
const char *dg_sim_kind_name(dg_sim_kind k);

/* The kind of an op, from its name (ops that are not listed: elemwise). */
dg_sim_kind dg_sim_op_kind(const dg_op_def *op);

typedef struct dg_sim_device {
    char name[64];
    char source[256];        /* where the figures come from (one line) */
    double peak_fp32;        /* FLOP/s at fp32 (the whole device, or a rank's cores) */
    double peak_16;          /* FLOP/s at bf16/fp16 (tensor cores); CPUs: = peak_fp32 */
    double mem_bytes_per_s;  /* memory bandwidth */
    double task_s;           /* fixed cost of a compute task (launch, scheduler) */
    double comm_task_s;      /* fixed cost of a collective beyond its link latency */
    double eff[DG_SIM_KIND_COUNT];     /* fraction of peak FLOP/s each kind reaches */
    double mem_eff[DG_SIM_KIND_COUNT]; /* fraction of mem_bytes_per_s each kind reaches */
    dg_link intra;           /* link between devices of one node (NVLink; local: shared memory) */
    dg_link inter;           /* link between nodes (InfiniBand) */
    int devices_per_node;    /* ranks on a node: groups within it use `intra` */
    /* 1: the device computes on 16-bit tensors natively (GPUs): under
     * --bf16 / --fp16 a kernel's memory traffic counts 2 bytes per element
     * (op costs count f32's 4) except the optimizer's. 0 (local): the CPU
     * kernels convert to f32 and back, as costed. Collectives count the
     * bytes of their tensors' own dtypes either way. */
    int native16;
    /* Memory of one device (a GPU's HBM), bytes; 0: not known (nothing is
     * checked). mem_per_node 1: it is the node's memory, which its ranks
     * share (local: this machine's RAM), so a rank has
     * mem_capacity_bytes / min(world, devices_per_node). */
    double mem_capacity_bytes;
    int mem_per_node;
} dg_sim_device;

/* Load a profile: a built-in name ("local", or a vendor profile from
 * dg_sim_device_vendor) or a JSON file with the fields above (each figure
 * required; name, source, devices_per_node, native16, mem_capacity_bytes
 * and mem_per_node optional; see
 * docs/simulate.md). "local" reads the calibration cache
 * (dg_sim_calibration_path) when it exists, else the uncalibrated defaults.
 * DG_EINPUT with one line naming the name/file. */
int dg_sim_device_load(const char *name, dg_sim_device *out, dg_err *err);

/* The uncalibrated local profile (a few CPU cores, MPI over shared memory,
 * this machine's memory: dg_mem_available_bytes). */
void dg_sim_device_local_default(dg_sim_device *out);

/* Vendor built-ins (a100 = a100-80gb, a100-40gb, h100, h200), defined in
 * sim/dg_sim_vendor.c.
 * Returns 1 and fills *out if `name` is one, else 0. */
int dg_sim_device_vendor(const char *name, dg_sim_device *out);

/* Write / print a profile as JSON (the format dg_sim_device_load reads). */
int dg_sim_device_save(const dg_sim_device *d, const char *path, dg_err *err);
void dg_sim_device_print(const dg_sim_device *d, FILE *f);

/* Where the calibrated local profile is cached: $DG_SIM_PROFILE, else
 * $HOME/.cache/dagatron/local_profile.json (buf gets the path). */
void dg_sim_calibration_path(char *buf, size_t n);

/* Whether a profile is usable: finite rates > 0, efficiencies in (0, 1].
 * DG_EINPUT naming the field. */
int dg_sim_device_check(const dg_sim_device *d, dg_err *err);

/* ---- the simulation -------------------------------------------------------- */

typedef struct dg_sim_opts {
    int world_size;          /* ranks (0: tp x cp x ep x pp, the smallest world) */
    const char *trace_path;  /* write the virtual run as a Chrome trace (NULL: none) */
    int no_memory_plan;      /* skip the memory plan (faster): memory is the live peak */
    int quiet;               /* 1: no progress lines on stderr */
} dg_sim_opts;

/* One representative rank: a pipeline stage. */
typedef struct dg_sim_rank {
    int pp_stage;
    int n_nodes;
    int n_comm;              /* tasks on its comm stream */
    double end_s;            /* when its last task ends */
    double busy_compute_s;   /* compute stream busy time */
    double busy_comm_s;      /* comm stream busy time (waiting for a recv counts) */
    double exposed_comm_s;   /* comm busy with the compute stream idle */
    double idle_s;           /* neither stream busy before end_s (bubble) */
    double planned_bytes;    /* the memory plan's arena (activations); for stages
                              * too big for the planner, the live-bytes peak */
    int memory_planned;      /* 1: planned_bytes is the memory plan's arena */
    double flops;            /* FLOPs of its graph (the ops' costs: recompute included) */
    double persistent_bytes; /* parameters, gradients, optimizer state, inputs */
    dg_sim_mem mem;          /* the memory model's bytes per GPU (sim/dg_sim_memory.h) */
} dg_sim_rank;

typedef struct dg_sim_result {
    char device[64];
    int world_size, tp, cp, ep, pp, dp; /* dp: Megatron's data-parallel size (EP folds into it) */
    int n_microbatches;
    int bf16;                /* 1: the 16-bit peak was the reference */
    double step_s;           /* the slowest stage's end */
    double model_flops;      /* per step, whole world (Megatron's formula, train/dg_flops.h) */
    double graph_flops;      /* per step, whole world: the graphs' own FLOPs (recompute included) */
    double mfu;              /* model_flops / (step_s x world x peak) */
    double tokens_per_s;
    double exposed_comm_s;   /* the most exposed comm of any stage */
    double comm_s;           /* comm busy time of that stage */
    double hidden_frac;      /* h = 1 - exposed / comm over all stages (0 without comm) */
    double bubble_frac;      /* the average stage's idle time / step_s */
    double build_s, plan_s, run_s; /* wall seconds the simulator spent */
    double mem_capacity;     /* bytes a rank has (dg_sim_device.mem_capacity_bytes; 0: not known) */
    int mem_stage;           /* the stage the memory model gives the most bytes per GPU */
    int n_ranks;             /* representative ranks (= pp) */
    dg_sim_rank *rank;       /* [n_ranks] */
} dg_sim_result;

/* Simulate one training step of cfg (the trainer's config; defaults and
 * flags as for `dagatron train`; not finished: dg_sim_run finishes a copy
 * with the world's data-parallel size) on `world_size` ranks of `dev`, with
 * collectives on `links` (axes whose gbps is 0 take the device's intra- or
 * inter-node link by where their group lies; NULL: every axis). The plans
 * are made as train's under --emulate-link with the given axes: their cost
 * model knows those links (train/dg_step_build.h), whatever cfg's
 * emulate_link says. DG_EINPUT with one line for
 * sizes that do not fit (the same checks as train), and, before any graph
 * is built, for a configuration whose memory per GPU (the memory model's
 * largest stage) exceeds the device's capacity: "does not fit: needs X GB
 * of Y GB per GPU (...)"; DG_EINTERNAL if a graph cannot be built.
 * A step of many micro-batches on several stages (m >= 4p, no trace) is
 * simulated at p and 2p micro-batches and extrapolated: every stage's
 * figures are affine in m past the pipeline's fill (sim/dg_sim_run.c). */
int dg_sim_run(const dg_train_config *cfg, const dg_sim_device *dev, const dg_link_spec *links,
               const dg_sim_opts *o, dg_sim_result *r, dg_err *err);
void dg_sim_result_free(dg_sim_result *r);

/* The table `dagatron simulate` prints. */
void dg_sim_result_print(const dg_sim_result *r, FILE *f);

/* ---- calibration ----------------------------------------------------------- */

/* Fit a profile's per-kind rates and its link from a Chrome trace of a real
 * run (`dagatron train --trace F`) of cfg on world_size ranks: each event is
 * matched to its node in the simulator's graph of that rank (by node id and
 * op name) and, per kind, eff (FLOP-bound kinds) or mem_eff (memory-bound
 * ones) is set so that the kind's modelled time equals its measured time;
 * task_s is the median time of the cheapest tasks; the link's alpha-beta is
 * a least-squares fit of the collectives over two or more ranks. `base`
 * gives the rest of the profile. DG_EINPUT naming the file when it cannot
 * be read or does not match the graph. */
int dg_sim_calibrate_from_trace(const dg_train_config *cfg, int world_size, const char *trace_path,
                                const dg_sim_device *base, dg_sim_device *out, dg_err *err);

/* Calibrate by a short measured run: cfg's model on one rank (parallel
 * sizes 1, one micro-batch) with a rank's share of this machine's cores in
 * a world_size-rank run, 3 iterations, the second traced and fitted as
 * above. The run's own output goes to stdout. The link has no collectives
 * to fit there and keeps base's. */
int dg_sim_calibrate_run(const dg_train_config *cfg, int world_size, const dg_sim_device *base, dg_sim_device *out,
                         dg_err *err);

/* ---- the published table (h19pub's sim/dg_sim_published.c) ----------------- */

/* `dagatron simulate --table published [flags]`: argv after "--table
 * published". Returns the process exit code. */
int dg_sim_table_published(int argc, char **argv);

#endif /* DG_SIM_H */
