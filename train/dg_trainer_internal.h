/* dg_trainer_internal.h — the training run's state, shared by the two files
 * of the trainer: dg_trainer.c (setup, the step, the loop) and
 * dg_trainer_log.c (what the run prints: the startup lines, Megatron's
 * iteration line, the routed tokens per expert). Not a public header.
 */
#ifndef DG_TRAINER_INTERNAL_H
#define DG_TRAINER_INTERNAL_H

#include "dg_ckpt_async.h"
#include "dg_dist.h"
#include "dg_feed.h"
#include "dg_grid.h"
#include "dg_loss_scaler.h"
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
    dg_dp_buckets buckets; /* the DP pass's gradient buckets */
    dg_optim optim;    /* the optimizer pass's tensors */
    dg_dist dist;      /* the optimizer state per bucket, and the step's inputs */
    void **ptrs;       /* per tensor: its buffer in the runtime */
    dg_comm *data_comm; /* the data shards (NULL: one) */
    int data_rank, data_size, grad_shards; /* grad_shards: CP x EP x DP */
    int log;           /* this rank prints (world rank 0) */
    int32_t *batch;    /* [mbs][S + 1] */
    double peak_flops; /* measured sgemm peak x compute threads */
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
    dg_comm *pp_comm;          /* the pipeline group (NULL: no PP): losses live on its last stage */
    char *ckpt_skip;           /* per tensor: another stage writes it to checkpoints (dg_train_pp_ckpt_skip) */
    uint64_t ckpt_bytes;       /* what one checkpoint takes on disk (dg_dist_ckpt_bytes) */
} dg_trainer_state;

/* A step's logged losses: the language-model loss, the MoE aux and z
 * losses (as the graph sums them over layers), and their total. */
typedef struct dg_trainer_losses {
    double lm, aux, z, total;
} dg_trainer_losses;

/* What the run prints (dg_trainer_log.c). */
void dg_trainer_print_startup(const dg_trainer_state *t);
/* The tokenizer the flags left to Megatron's default, in one line (once it
 * opened, as Megatron's "> building ... tokenizer"); nothing otherwise. */
void dg_trainer_print_tokenizer_default(const dg_train_config *c);
/* Megatron's iteration line for the log window ending at iteration it. */
void dg_trainer_log_line(const dg_trainer_state *t, int it, int64_t consumed, double ms,
                         const dg_trainer_losses *l, double lr, double gnorm, int64_t skipped, int64_t nans);
/* A MoE loss as the log shows it (dg_train_log_moe_loss), or -1 when the
 * graph has none (tensor < 0: a dense model). */
double dg_trainer_moe_loss_logged(const dg_trainer_state *t, int tensor, double raw, double coeff);
/* Routed tokens per expert over the log window, summed over the data
 * shards (and pipeline stages), printed with --moe-per-layer-logging; the
 * window restarts. A collective: every rank calls it. */
int dg_trainer_log_expert_tokens(dg_trainer_state *t, dg_err *err);

#endif /* DG_TRAINER_INTERNAL_H */
