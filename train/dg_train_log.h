/* dg_train_log.h — the training log's lines, in Megatron-LM's format.
 *
 * Megatron's `training_log` (megatron/training/training.py) prints one line
 * per log interval and `evaluate_and_print_results` one block per
 * evaluation; scripts and dashboards parse them, so dagatron prints the same
 * fields, in the same order, with the same number formats:
 *
 *    [2026-11-24 04:10:31.123456] iteration       10/     100 | consumed samples:           40 |
 *    elapsed time per iteration (ms): 35.2 | [throughput per GPU (TFLOP/s/GPU): 0.1 |]
 *    learning rate: 1.000000E-03 | global batch size:     4 | lm loss: 4.512345E+00 |
 *    [load_balancing_loss: ... | z_loss: ... |] loss scale: 1.0 | grad norm: 1.234 |
 *    number of skipped iterations:   0 | number of nan iterations:   0 |
 *
 * (one line), followed by dagatron's own fields in the same " key: value |"
 * shape: tokens per second, MFU, peak memory (MB). The losses are those of
 * Megatron's total_loss_dict, in the order it first saw them (which
 * losses, and when, is the trainer's: train/dg_trainer_log.c). After the
 * first logged iterations Megatron's report_memory line follows:
 *
 *    [Rank 0] (after 1 iterations) memory (MB) | allocated: 1.50 | max allocated: 2.25 |
 *    reserved: 180.12 | max reserved: 181.00
 *
 * An evaluation is
 *
 *    ------------------------------------------------------------------------
 *     validation loss at iteration 10 | lm loss value: 4.5E+00 | lm loss PPL: 9.1E+01 |
 *    ------------------------------------------------------------------------
 *
 * with the prefix "iteration N" during training, "iteration N on validation
 * set" / "iteration N on test set" after it, and dashes one longer than the
 * line. PPL is exp(min(20, loss)), as Megatron caps it.
 */
#ifndef DG_TRAIN_LOG_H
#define DG_TRAIN_LOG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The most losses one line carries: lm loss, load_balancing_loss,
 * seq_load_balancing_loss, z_loss, and "mtp_<k> loss" for 8 MTP modules. */
#define DG_TRAIN_LOG_MAX_LOSSES 12

/* What one iteration line reports (averages over the log window where
 * Megatron averages: time, losses). */
typedef struct dg_train_log_fields {
    int iteration, train_iters;
    int64_t consumed_samples;
    double ms_per_iteration;
    int log_throughput;        /* --log-throughput: print throughput per GPU */
    double tflops_per_gpu;     /* model FLOPs / time / ranks, in TFLOP/s */
    double learning_rate;
    int global_batch_size;
    /* Megatron's losses (its total_loss_dict) in its order, each printed
     * " name: value |" when the value is >= 0 (a NaN is not) */
    int n_losses;
    const char *loss_name[DG_TRAIN_LOG_MAX_LOSSES];
    double loss[DG_TRAIN_LOG_MAX_LOSSES];
    double loss_scale;         /* 1.0 without a loss scaler */
    double grad_norm;          /* printed when finite */
    int64_t skipped_iterations, nan_iterations;
    /* dagatron's own, after Megatron's fields */
    double tokens_per_second, mfu_percent, peak_memory_mb; /* mfu_percent < 0: no peak known ("MFU: n/a") */
    /* with activation recompute: the planned activation peak and what
     * recompute took off it */
    int has_recompute;
    double activation_planned_mb, activation_saved_mb;
} dg_train_log_fields;

/* A MoE loss as Megatron's log shows it: the graph's loss is the
 * coefficient-weighted sum over layers, Megatron's log the loss over its
 * coefficient averaged over the MoE layers. -1 (not tracked: left out of
 * the line) when the coefficient is 0. */
struct dg_model_config;
double dg_train_log_moe_loss(const struct dg_model_config *m, double raw, double coeff);

/* This process's peak resident memory, MB. */
double dg_train_log_peak_rss_mb(void);

/* This process's resident memory now and at its peak (VmRSS, VmHWM of
 * /proc/self/status), MB; the peak from getrusage and now = peak where
 * /proc is not there. */
void dg_train_log_rss_mb(double *now, double *peak);

/* Megatron's timestamp prefix " [YYYY-MM-DD HH:MM:SS.ffffff]" (local time). */
void dg_train_log_timestamp(char *out, size_t cap);

/* Write the iteration line (no newline) into out[cap]. Returns its length
 * (snprintf's: >= cap means it was cut). */
int dg_train_log_iteration(char *out, size_t cap, const dg_train_log_fields *f);

/* Megatron's report_memory line, as training_log prints it after the
 * first logged iterations, figures in MB:
 *   "[Rank R] (after N iterations) memory (MB) | allocated: A | max allocated: M | reserved: V | max reserved: X"
 * (no newline) into out[cap]. Returns its length, as snprintf. */
int dg_train_log_memory(char *out, size_t cap, int rank, int iteration, double allocated_mb,
                        double max_allocated_mb, double reserved_mb, double max_reserved_mb);

/* Print an evaluation block to f: prefix is "iteration N", "iteration N on
 * validation set" or "iteration N on test set". */
void dg_train_log_eval(FILE *f, const char *prefix, double lm_loss);

#endif /* DG_TRAIN_LOG_H */
