/* dg_trainer_internal.h — the training run's state, shared by the two files
 * of the trainer: dg_trainer.c (setup, the step, the loop) and
 * dg_trainer_log.c (what the run prints: the startup lines, Megatron's
 * iteration and memory lines, the routed tokens per expert). Not a public header.
 */
#ifndef DG_TRAINER_INTERNAL_H
#define DG_TRAINER_INTERNAL_H

#include "dg_ckpt_async.h"
#include "dg_dist.h"
#include "dg_expert_bias.h"
#include "dg_feed.h"
#include "dg_grid.h"
#include "dg_loss_scaler.h"
#include "dg_mem_estimate.h"
#include "dg_mfu_peak.h"
#include "dg_pipeline.h"
#include "dg_recompute.h"
#include "dg_sched.h"
#include "dg_tensorboard.h"
#include "dg_train_config.h"
#include "dg_trainer.h"

/* Everything one run holds. */
typedef struct dg_trainer_state {
    dg_train_config *c;
    dg_graph *g;
    dg_model_io *io;   /* [num_microbatches]: each micro-batch's inputs and losses */
    int n_mb;          /* micro-batches in the step graph */
    int loss;          /* the step's loss: the micro-batches' mean */
    dg_sched_plan *plan;
    dg_runtime *rt;
    const dg_team *team;
    dg_feed feed;
    int n_params;
    int *params;       /* tensor ids of the parameters, in graph order */
    dg_grid *grid;     /* NULL: no MPI (a world of one) */
    int coord[DG_AXIS_COUNT]; /* this rank's place on every axis (dg_grid_coords: all 0 without a grid) */
    dg_dp_buckets buckets; /* the DP pass's gradient buckets */
    dg_optim optim;    /* the optimizer pass's tensors */
    dg_dist dist;      /* the optimizer state per bucket, and the step's inputs */
    void **ptrs;       /* per tensor: its buffer in the runtime */
    dg_comm *dev_groups[DG_AXIS_COUNT]; /* --device cuda: the step's NCCL comms (dg_train_device.h) */
    int device_said;   /* the device's one line was printed */
    dg_comm *data_comm; /* the data shards (NULL: one) */
    int data_rank, data_size;
    int log;           /* this rank prints (world rank 0) */
    int32_t *batch;    /* [mbs][S + 1] */
    dg_mfu_peak peak;  /* what MFU is against: the GPU's dense peak, or sgemm x threads (dg_mfu_peak.h) */
    const dg_train_hooks *hooks;
    int iteration;             /* where the loop is, for the hooks */
    int64_t *expert_tokens;    /* [layers][E]: routed tokens over the log window */
    int64_t eval_consumed;     /* validation samples read so far */
    dg_sched_stats *stats;     /* non-NULL: the step being traced records here */
    dg_train_result *res;      /* step statistics add up here */
    int failure_agreed;        /* the failure being returned is known to every rank */
    int ranks_on_node;         /* ranks sharing this node's memory */
    dg_tb *tb;                 /* --tensorboard-dir: the event file (logging rank), or NULL */
    dg_ckpt_async *ckpt_async; /* --async-save: the background checkpoint writer, or NULL */
    dg_loss_scaler scaler;     /* --fp16's loss scale (1.0 otherwise) */
    dg_recompute_report rc;    /* what activation recompute chose and saved */
    dg_model_io lio;           /* the logical micro-batch's io: which losses the model has */
    int *param_seed;           /* per parameter: its index among the logical graph's (init stream) */
    dg_comm *pp_comm;          /* the pipeline group (one rank without PP; NULL without MPI): losses live on
                                * its last stage */
    char *ckpt_skip;           /* per tensor: another stage writes it to checkpoints (dg_train_pp_ckpt_skip) */
    uint64_t ckpt_bytes;       /* what one checkpoint takes on disk (dg_dist_ckpt_bytes) */
    dg_mem_need mem;           /* what the runtime and the optimizer allocate (dg_mem_estimate_plan) */
    dg_expert_bias ebias;      /* --moe-router-enable-expert-bias: the routers' biases (dg_expert_bias.h) */
} dg_trainer_state;

/* A step's logged losses: the language-model loss, the MoE aux and z
 * losses (as the graph sums them over layers), their total, and each MTP
 * module's loss (moe/dg_model_mtp.h). */
typedef struct dg_trainer_losses {
    double lm, aux, z, total;
    double mtp[DG_MODEL_MAX_MTP];
} dg_trainer_losses;

/* The losses of the log line, by Megatron's names (dg_trainer_log.c). */
typedef enum dg_trainer_log_key {
    DG_LOG_LM_LOSS,               /* "lm loss" */
    DG_LOG_LOAD_BALANCING_LOSS,   /* "load_balancing_loss" */
    DG_LOG_SEQ_LOAD_BALANCING_LOSS, /* "seq_load_balancing_loss" */
    DG_LOG_Z_LOSS,                /* "z_loss" */
    DG_LOG_MTP_LOSS,              /* "mtp_1 loss", then one key per MTP module */
    DG_LOG_N_KEYS = DG_LOG_MTP_LOSS + DG_MODEL_MAX_MTP
} dg_trainer_log_key;

/* Megatron's training_log accumulators (its total_loss_dict) over the
 * iterations since the last log line that reset them. */
typedef struct dg_trainer_window {
    double sum[DG_LOG_N_KEYS];  /* per key: the iterations' values added up */
    int order[DG_LOG_N_KEYS];   /* keys in the order first added (the dict's), n_keys of them */
    int n_keys;
    int advanced, skipped, nans; /* iterations that updated, were skipped, had a NaN loss */
    double ms;                   /* their time */
} dg_trainer_window;

/* What the run prints (dg_trainer_log.c). */
void dg_trainer_print_startup(const dg_trainer_state *t);
/* The tokenizer the flags left to Megatron's default, in one line (once it
 * opened, as Megatron's "> building ... tokenizer"); nothing otherwise. */
void dg_trainer_print_tokenizer_default(const dg_train_config *c);
/* Add one iteration to the window as Megatron's training_log does: the lm
 * loss of an iteration that updated, the MoE losses of every iteration. */
void dg_trainer_window_add(const dg_trainer_state *t, dg_trainer_window *w, const dg_trainer_losses *l, int skipped,
                           int nan_loss, double ms);
/* Start the next window (the keys already seen stay: Megatron zeroes its
 * dict's values, it keeps their keys). */
void dg_trainer_window_reset(dg_trainer_window *w);
/* Megatron's iteration line for the window ending at iteration it: lr and
 * gnorm are the iteration's. */
void dg_trainer_log_line(const dg_trainer_state *t, int it, int64_t consumed, const dg_trainer_window *w, double lr,
                         double gnorm);
/* Megatron's report_memory line after iteration it, printed by every rank
 * of data-parallel rank 0 (each its own line). */
void dg_trainer_report_memory(const dg_trainer_state *t, int it);
/* A MoE loss as the log shows it (dg_train_log_moe_loss), or -1 when the
 * graph has none (tensor < 0: a dense model). */
double dg_trainer_moe_loss_logged(const dg_trainer_state *t, int tensor, double raw, double coeff);
/* Routed tokens per expert over the log window, summed over the data
 * shards (and pipeline stages), printed with --moe-per-layer-logging; the
 * window restarts when `reset`. A collective: every rank calls it. */
int dg_trainer_log_expert_tokens(dg_trainer_state *t, int reset, dg_err *err);

#endif /* DG_TRAINER_INTERNAL_H */
