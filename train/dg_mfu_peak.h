/* dg_mfu_peak.h — the peak a run's MFU is measured against, and which one.
 *
 * --device cpu: the measured single-thread sgemm rate (dg_flops.h) times
 * the rank's compute threads. --device cuda: the GPU's dense datasheet peak
 * for the run's dtype — 16-bit tensor cores under --bf16/--fp16, else fp32
 * on the CUDA cores (dagatron's fp32 GEMMs run without TF32) — from a small
 * table keyed by compute capability, SM count and name. A GPU the table does
 * not know has no peak: the log then prints "MFU: n/a" rather than a figure
 * against the wrong reference (a CPU's sgemm gave 'MFU: 238%' on an H200). */
#ifndef DG_MFU_PEAK_H
#define DG_MFU_PEAK_H

#include "dg_train_config.h"

typedef struct dg_mfu_peak {
    double flops;   /* FLOP/s of one rank; 0: unknown */
    char what[384]; /* which peak, for the log's first lines ("MFU against <what>") */
} dg_mfu_peak;

/* A GPU's dense peak (FLOP/s) at 16 bits (half = 1) or fp32 (half = 0), and
 * the table row's label in *label; 0 when the table has no row for it. */
double dg_gpu_dense_peak(const char *name, int cc_major, int cc_minor, int sm_count, int half, const char **label);

/* The peak of a run of config c (c->device resolved) whose rank computes
 * on `threads` CPU threads. */
void dg_mfu_peak_of(const dg_train_config *c, int threads, dg_mfu_peak *p);

#endif
