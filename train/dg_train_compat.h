/* dg_train_compat.h — the rest of Megatron-LM's `pretrain_gpt.py` flags, so
 * the launch scripts of Megatron's own examples run unchanged.
 *
 * The flags of `dagatron train` are two tables: dg_train_config.c's (what
 * dagatron builds, with its own fields) and this module's, looked up after
 * it. Each flag here is one of:
 *   - built here: schedules by samples (--train-samples, --lr-decay-samples,
 *     --lr-warmup-samples, --lr-warmup-fraction, --lr-warmup-init), the log's
 *     --log-throughput and --moe-per-layer-logging, older spellings
 *     (--use-rotary-position-embeddings, --no-position-embedding), --kv-channels
 *     when it is hidden / heads, Megatron's operations flags
 *     (--exit-duration-in-mins, --exit-signal-handler);
 *   - accepted without effect, because dagatron always does what it asks or
 *     it cannot change the numbers (fusions, kernels choices, recompute,
 *     data-loader workers, options only read by a feature that is refused):
 *     a one-line note at start-up names them;
 *   - refused as "not supported" (exit 2, one line naming the flag and why)
 *     when its meaning is not built and its value would change the numbers.
 * docs/megatron_compat.md lists every one.
 */
#ifndef DG_TRAIN_COMPAT_H
#define DG_TRAIN_COMPAT_H

#include <stdint.h>

#include "dg_args.h"

typedef struct dg_train_compat {
    int bf16;                   /* --bf16: bf16 activations and working copies (dg_pass_precision.h) */
    int grad_reduce_in_bf16;    /* --grad-reduce-in-bf16: DP reduces gradients in bf16 (dg_pass_dp.h) */
    int fp16;                   /* --fp16: the same in fp16, with a loss scale (dg_loss_scaler.h) */
    double loss_scale;          /* --loss-scale (0: dynamic) */
    double initial_loss_scale, min_loss_scale; /* --initial-loss-scale (2^32) --min-loss-scale (1) */
    int loss_scale_window, hysteresis;         /* --loss-scale-window (1000) --hysteresis (2) */
    int log_throughput;         /* --log-throughput */
    int moe_per_layer_logging;  /* --moe-per-layer-logging: routed tokens per expert and layer */
    int train_samples;          /* --train-samples (0: --train-iters) */
    int lr_decay_samples, lr_warmup_samples; /* --lr-decay-samples --lr-warmup-samples */
    double lr_warmup_fraction;  /* --lr-warmup-fraction (< 0: not given) */
    double lr_warmup_init;      /* --lr-warmup-init: warmup starts here */
    int use_rotary_position_embeddings, no_position_embedding;
    int exit_signal_handler;    /* --exit-signal-handler: SIGTERM saves and exits */
    int exit_duration_in_mins;  /* --exit-duration-in-mins (0: none) */
    char optimizer[DG_ARG_STR_LEN];        /* --optimizer adam|sgd (adam) */
    char moe_router_dtype[DG_ARG_STR_LEN]; /* --moe-router-dtype fp32|fp64 */
    char rope_type[DG_ARG_STR_LEN];        /* --rope-type rope|yarn|llama */
    char softmax_type[DG_ARG_STR_LEN];     /* --softmax-type vanilla|off-by-one|learnable */
    int enable_gpt_oss;         /* --enable-gpt-oss: gpt-oss's YaRN (dg_train_compat.c) */
    int yarn_round, yarn_no_round; /* --[no-]yarn-correction-range-round-to-int */
    /* where accepted flags without effect put their values */
    int scratch_flag;
    char scratch_value[DG_ARG_STR_LEN];
    /* set by dg_train_compat_parse */
    int train_iters_given;
    int split_given;            /* --split was on the command line */
    int lr_schedule_by_samples; /* a samples flag or --lr-warmup-fraction was given */
    char notes[DG_ARG_STR_LEN]; /* the accepted flags without effect that were given */
} dg_train_compat;

struct dg_train_config;
struct dg_lr_schedule;

/* Defaults of the fields above (Megatron's). */
void dg_train_compat_defaults(dg_train_compat *x);

/* Parse argv[first..) against `specs` (dagatron's table) and this module's
 * table, then apply and check what this module's flags mean (refusals,
 * --train-samples -> train_iters, spellings). DG_OK or DG_EINPUT with one
 * line; err->msg "help" for --help. */
int dg_train_compat_parse(struct dg_train_config *c, const dg_arg_spec *specs, int n, int argc, char **argv,
                          int first, dg_err *err);

/* The same for a command whose flags fill a larger record `obj` holding a
 * train config at byte offset `at` (`dagatron dump`): `specs`' offsets are
 * into obj, and this module's flags land in the config at `at`. */
int dg_train_compat_parse_in(void *obj, size_t at, const dg_arg_spec *specs, int n, int argc, char **argv,
                             int first, dg_err *err);

/* Checks that need the derived config (dg_train_config_finish calls it):
 * --kv-channels against hidden / heads. */
int dg_train_compat_finish(const struct dg_train_config *c, dg_err *err);

/* The learning-rate schedule's fields set by samples flags
 * (--lr-decay-samples, --lr-warmup-samples, --lr-warmup-fraction,
 * --lr-warmup-init), on top of the one by iterations. */
void dg_train_compat_schedule(const struct dg_train_config *c, struct dg_lr_schedule *s);

/* This module's flags, for --help. */
void dg_train_compat_help(FILE *f);

#endif /* DG_TRAIN_COMPAT_H */
