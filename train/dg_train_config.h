/* dg_train_config.h — everything `dagatron train` is told, under Megatron's
 * flag names, with Megatron's defaults.
 *
 *   dg_train_config c;
 *   dg_train_config_defaults(&c);
 *   if (dg_train_config_parse(&c, argc, argv, 1, &err)) ...   // flags
 *   if (dg_train_config_finish(&c, &err)) ...                 // derived values, cross checks
 *
 * dg_train_config_finish() rejects inconsistent sets with one line naming
 * both flags ("--global-batch-size 10 is not a multiple of --micro-batch-size 4
 * x data-parallel size 1").
 */
#ifndef DG_TRAIN_CONFIG_H
#define DG_TRAIN_CONFIG_H

#include "dg_args.h"
#include "dg_model.h"
#include "dg_train_compat.h"

typedef struct dg_train_config {
    dg_model_config model; /* filled by the model flags */

    /* model flags that are not plain fields of dg_model_config */
    int group_query_attention;   /* --group-query-attention */
    int max_position_embeddings; /* --max-position-embeddings (>= seq length) */
    char normalization[DG_ARG_STR_LEN];  /* --normalization RMSNorm|LayerNorm */
    int swiglu;                          /* --swiglu (default: GeLU MLP) */
    char score_function[DG_ARG_STR_LEN]; /* --moe-router-score-function softmax|sigmoid */
    char moe_token_dispatcher_type[DG_ARG_STR_LEN]; /* --moe-token-dispatcher-type alltoall|allgather */
    char load_balancing[DG_ARG_STR_LEN]; /* --moe-router-load-balancing-type aux_loss|none */
    char moe_layer_freq[DG_ARG_STR_LEN]; /* --moe-layer-freq: N, or a list "([0]*1+[1]*3)" */
    char window_size[DG_ARG_STR_LEN];    /* --window-size L,R ("": none; dg_train_attn.h) */
    char window_attn_skip_freq[DG_ARG_STR_LEN]; /* --window-attn-skip-freq: N, or a 1/0 list per layer */
    char drop_policy[DG_ARG_STR_LEN];    /* --moe-token-drop-policy probs|position */
    int disable_bias_linear;             /* --disable-bias-linear (default: biases) */
    double moe_router_bias_update_rate;  /* --moe-router-bias-update-rate (1e-3): the expert bias's step
                                          * (model.moe_expert_bias; train/dg_expert_bias.h) */
    int moe_use_upcycling;               /* --moe-use-upcycling: start from the dense model (train/dg_upcycle.h) */
    int moe_upcycling_granularity;       /* --moe-upcycling-granularity G (1): expert slices per dense MLP */
    /* Accepted so Megatron scripts run unchanged: they name what dagatron
     * always does (fused attention, grouped GEMM). */
    int use_flash_attn, moe_grouped_gemm;
    char position_embedding_type[DG_ARG_STR_LEN]; /* --position-embedding-type learned_absolute|rope|none */
    char attention_backend[DG_ARG_STR_LEN]; /* --attention-backend (model.attention_unfused; the
                                             * dropouts are model.attention_dropout, hidden_dropout) */
    int make_vocab_divisible_by;         /* --make-vocab-size-divisible-by (128) */

    /* batch and optimizer */
    int global_batch_size; /* --global-batch-size (0: micro batch x dp) */
    double lr, min_lr;     /* --lr --min-lr */
    int lr_warmup_iters;   /* --lr-warmup-iters */
    char lr_decay_style[DG_ARG_STR_LEN]; /* --lr-decay-style constant|linear|cosine */
    int lr_decay_iters;    /* --lr-decay-iters (0: --train-iters) */
    double weight_decay, adam_beta1, adam_beta2, adam_eps, clip_grad;
    double init_method_std; /* --init-method-std */
    int seed;               /* --seed */
    int train_iters;        /* --train-iters */

    /* data */
    char data_path[DG_ARG_STR_LEN]; /* --data-path [w1] p1 [w2 p2 ...] ("" = the fortunes corpus) */
    /* --train-data-path, --valid-data-path, --test-data-path: each split's own
     * blend, written as --data-path ("" = none for that split) */
    char train_data_path[DG_ARG_STR_LEN], valid_data_path[DG_ARG_STR_LEN], test_data_path[DG_ARG_STR_LEN];
    int mock_data;                  /* --mock-data */
    char split[DG_ARG_STR_LEN];     /* --split "969,30,1" */
    char tokenizer_type[DG_ARG_STR_LEN]; /* --tokenizer-type, one of DG_TOK_TYPE_NAMES (dg_tokenizer.h) */
    char tokenizer_model[DG_ARG_STR_LEN]; /* --tokenizer-model (HuggingFace / SentencePiece) */
    char vocab_file[DG_ARG_STR_LEN], merge_file[DG_ARG_STR_LEN];
    int null_vocab_size;            /* --vocab-size (NullTokenizer / mock data) */
    int tokenizer_type_default;     /* --tokenizer-type not given with --vocab-file/--merge-file: set to
                                     * GPT2BPETokenizer, Megatron's pretrain_gpt.py default */
    char data_cache_path[DG_ARG_STR_LEN]; /* --data-cache-path */

    /* checkpoints, logs */
    char save[DG_ARG_STR_LEN], load[DG_ARG_STR_LEN];
    int save_interval, log_interval, eval_interval, eval_iters;
    int exit_interval;              /* --exit-interval: stop (and save) when iteration % N == 0 */
    char tensorboard_dir[DG_ARG_STR_LEN]; /* --tensorboard-dir ("" = none) */
    int tensorboard_log_interval, tensorboard_queue_size; /* --tensorboard-log-interval (1); queue size accepted */
    /* --wandb-*: accepted so scripts run; W&B is not available (a note says so) */
    char wandb_project[DG_ARG_STR_LEN], wandb_exp_name[DG_ARG_STR_LEN], wandb_save_dir[DG_ARG_STR_LEN];
    char trace[DG_ARG_STR_LEN];     /* --trace PATH: Chrome trace of the first logged step */
    int compute_threads;            /* --compute-threads (0: this rank's cores) */
    char device[DG_ARG_STR_LEN];    /* --device cuda|cpu|emulated ("": cuda when a GPU is usable, else cpu;
                                     * dg_train resolves it: train/dg_device_pick.h). emulated: the
                                     * device runtime on the CPU (sched/dg_device_emu.h) */
    int emulated_delay_us;          /* --emulated-delay-us: each emulated stream task waits 0..N us first */
    char emulated_missing_ops[DG_ARG_STR_LEN]; /* --emulated-missing-ops: ops the emulated device lacks */
    int device_host_fallback;       /* --device-host-fallback: ops a device lacks run on the host */

    /* parallelism (dg_grid.h); DP is derived from the world size */
    int tensor_model_parallel_size;   /* --tensor-model-parallel-size */
    int context_parallel_size;        /* --context-parallel-size */
    int expert_model_parallel_size;   /* --expert-model-parallel-size */
    int pipeline_model_parallel_size; /* --pipeline-model-parallel-size */
    int use_distributed_optimizer;    /* --use-distributed-optimizer (ZeRO-1) */
    int overlap_grad_reduce;          /* --overlap-grad-reduce */
    int overlap_param_gather;         /* --overlap-param-gather (with the distributed optimizer) */
    char emulate_link[DG_ARG_STR_LEN]; /* --emulate-link: links to emulate (dg_comm_emulate.h; "": none) */
    int ddp_bucket_size;              /* --ddp-bucket-size, elements (0: max(40M, 1M x DP)) */
    int keep_last;                    /* --ckpt-keep-last: checkpoints kept (0: all) */

    /* derived: dp_size by dg_step_config (simulate, dump: a run's trainer
     * keeps its own, its grid's data size, and leaves this 1); the micro-batch
     * count by dg_train_config_finish */
    int dp_size;          /* data shards: Megatron's data-parallel size (EP x DP ranks) */
    int num_microbatches; /* global batch / (micro batch x dp) */

    int sequence_parallel; /* --sequence-parallel (off at tp 1, as in Megatron) */
    int tp_comm_overlap;   /* --tp-comm-overlap (with --sequence-parallel) */
    int expert_tensor_parallel_size; /* --expert-tensor-parallel-size: 1 or TP (0: TP, Megatron's default;
                                      * dg_grid.h) */
    /* checkpoints (train/dg_dist_ckpt.h) */
    char ckpt_format[DG_ARG_STR_LEN]; /* --ckpt-format: "" or torch_dist (= dagatron's sharded format) */
    int no_load_optim;                /* --no-load-optim */
    int no_load_rng;                  /* --no-load-rng (accepted: no RNG state to skip) */
    int finetune;                     /* --finetune: parameters only, iteration 0 */
    int ckpt_fully_parallel_save;     /* --ckpt-fully-parallel-save (accepted: always) */
    int ckpt_fully_parallel_load;     /* --ckpt-fully-parallel-load (accepted: always) */
    int async_save;                   /* --async-save */
    dg_train_compat compat; /* the rest of Megatron's flags (dg_train_compat.h) */
    /* activation recompute (train/dg_recompute.h) */
    int recompute_activations;                  /* --recompute-activations: selective */
    char recompute_granularity[DG_ARG_STR_LEN]; /* --recompute-granularity full|selective ("": none) */
    char recompute_method[DG_ARG_STR_LEN];      /* --recompute-method uniform|block (full only) */
    int recompute_num_layers;                   /* --recompute-num-layers (full only; 0: not given) */
    char recompute_modules[DG_ARG_STR_LEN];     /* --recompute-modules ("": Megatron's core_attn) */
    double recompute_memory_budget;             /* --recompute-memory-budget MB (0: none) */
    char cp_comm_type[DG_ARG_STR_LEN]; /* --cp-comm-type p2p|a2a|allgather|a2a+p2p (train/dg_cp.h) */
    /* pipeline parallelism (graph/passes/dg_pass_pp.h, train/dg_train_pp.h) */
    int decoder_first_pipeline_num_layers; /* --decoder-first-pipeline-num-layers (0: even split) */
    int decoder_last_pipeline_num_layers;  /* --decoder-last-pipeline-num-layers (0: even split) */
    int num_layers_per_virtual_pipeline_stage; /* --num-layers-per-virtual-pipeline-stage (0: none) */
    int num_virtual_stages_per_pipeline_rank;  /* --num-virtual-stages-per-pipeline-rank (0: none) */
    char pipeline_schedule[DG_ARG_STR_LEN];    /* --pipeline-schedule 1f1b|all-forward-all-backward|zero-bubble-h1 */
    int overlap_moe_expert_parallel_comm;      /* --overlap-moe-expert-parallel-comm (two micro-batches in flight) */
} dg_train_config;

void dg_train_config_defaults(dg_train_config *c);

/* Parse flags argv[first..). `seen` is internal. Returns DG_OK or DG_EINPUT;
 * err->msg is "help" for --help. --vocab-file/--merge-file without
 * --tokenizer-type name GPT2BPETokenizer (tokenizer_type_default). */
int dg_train_config_parse(dg_train_config *c, int argc, char **argv, int first, dg_err *err);

/* What tensor parallelism needs of the model, from the flags alone (so it
 * is found before any other work): --tensor-model-parallel-size divides
 * the attention heads and the query groups (Megatron's replication of
 * groups over tp is not supported); --expert-tensor-parallel-size is 1 or
 * the TP size (sched/dg_grid.h) and divides the experts' FFN size. DG_OK
 * or DG_EINPUT naming both values. */
int dg_train_config_check_tp(const dg_train_config *c, dg_err *err);

/* Resolve derived values (vocabulary from the tokenizer when known, padded;
 * model fields from string flags; the global batch and the micro-batch
 * count for data_size data shards, Megatron's data-parallel size) and check
 * the set. vocab_from_data: the tokenizer's vocabulary size, or 0 when not
 * known yet. A run passes its grid's data size; c->dp_size is left as it
 * is (the trainer keeps its own). */
int dg_train_config_finish_run(dg_train_config *c, int64_t vocab_from_data, int data_size, dg_err *err);

/* dg_train_config_finish_run for c->dp_size data shards (dg_step_config sets
 * the field first). */
int dg_train_config_finish(dg_train_config *c, int64_t vocab_from_data, dg_err *err);

/* The flag table (for --help and for other subcommands that take model flags). */
const dg_arg_spec *dg_train_flags(int *n);

#endif /* DG_TRAIN_CONFIG_H */
