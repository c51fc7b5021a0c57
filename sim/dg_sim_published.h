/* dg_sim_published.h — Megatron-LM's published training throughput, as data,
 * and `dagatron simulate --table published`, which simulates each published
 * configuration and prints predicted MFU beside the published one.
 *
 * Rows (sources in docs/simulate.md, "Published configurations"):
 *  - GPT 22B, 175B, 530B, 1T on A100s with TP 8, PP 1/8/35/64, DP 1,
 *    sequence parallelism and selective recompute: the MFU table of the
 *    Megatron-LM README (2022-2024) = Korthikanti et al. 2022 (arXiv
 *    2205.05198), configurations from the paper's Table 3.
 *  - Mixtral 8x7B on 64 H100s, TP 1 EP 8 PP 4 (VP 8), seq 4096: 438
 *    TFLOPS/GPU (Megatron-Core MoE README, MCore v0.8, Aug 2024).
 *
 * MFU is Megatron's: model FLOPs of an iteration by its formula
 * (train/dg_flops.h: 72 B s l h^2 (1 + s/6h + V/12lh) for the dense GPT,
 * no recompute counted) over step time x GPUs x the part's dense bf16 peak.
 */
#ifndef DG_SIM_PUBLISHED_H
#define DG_SIM_PUBLISHED_H

#include <stdio.h>

#include "dg_base.h"

/* (dg_sim_table_published, the command, is declared in dg_sim.h.) */

typedef struct dg_sim_published_row {
    const char *model;      /* "GPT 175B" */
    const char *device;     /* built-in profile: "a100" | "h100" */
    int world;              /* GPUs */
    const char *flags;      /* the run's Megatron flags, space-separated */
    double mfu;             /* published MFU (fraction) */
    double hfu;             /* published HFU (fraction; 0: not published) */
    const char *source;     /* where the number is published */
    const char *note;       /* what the simulated run differs in ("" if nothing) */
} dg_sim_published_row;

/* The published rows (n set to their count). */
const dg_sim_published_row *dg_sim_published_rows(int *n);

/* Row i's flags parsed into c (train's defaults, then the flags; not
 * finished). DG_EINPUT naming the row when they do not parse. */
struct dg_train_config;
int dg_sim_published_config(int i, struct dg_train_config *c, dg_err *err);

/* What the simulator predicts for one row. */
typedef struct dg_sim_published_result {
    double step_s;          /* predicted step time */
    double mfu;             /* predicted MFU */
    double ratio;           /* predicted / published MFU */
    double bubble;          /* predicted pipeline bubble fraction */
    double exposed_comm_s;  /* predicted exposed communication per step */
    char layout[96];        /* "TP8 PP8 DP1" */
} dg_sim_published_result;

/* Simulate row i. DG_OK, or the simulator's error (DG_EINPUT naming the
 * row when its flags do not parse). */
int dg_sim_published_run(int i, dg_sim_published_result *out, dg_err *err);

/* `dagatron simulate --table published [--row NAME]`: simulate every row
 * (or those whose model name contains `only`, when not NULL) and print one
 * table to out (model, layout, GPUs, predicted step time, predicted MFU,
 * published MFU, ratio, within ±25%, bubble, exposed communication, the
 * simulator's own seconds). Returns DG_OK when every row ran (whether or not
 * it is within the band: the band is a test's business,
 * tests/sim_published/), else the first error; DG_EINPUT when `only` names
 * no row. */
int dg_sim_published_table(FILE *out, const char *only, dg_err *err);

#endif /* DG_SIM_PUBLISHED_H */
