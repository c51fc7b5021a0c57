/* dg_train_config.c — the flag table and checks of `dagatron train`. */
#include "dg_train_config.h"

#include <stddef.h>
#include <string.h>

#include "dg_comm_emulate.h"
#include "dg_ep.h"
#include "dg_recompute.h"
#include "dg_train_attn.h"
#include "dg_tokenizer.h"
#include "dg_tp_seq.h"
#include "dg_train_pp.h"
#include "dg_upcycle.h"

#define M(f) offsetof(dg_train_config, model.f)
#define T(f) offsetof(dg_train_config, f)
#define NR 1, 0 /* no range check */

static const dg_arg_spec dg_train_specs[] = {
    /* model */
    {"--num-layers", DG_ARG_INT, M(num_layers), "transformer layers", 1, 4096, NULL},
    {"--hidden-size", DG_ARG_INT, M(hidden_size), "model width", 1, 1 << 20, NULL},
    {"--ffn-hidden-size", DG_ARG_INT, M(ffn_hidden_size), "dense MLP width (default 4 x hidden)", 1, 1 << 22, NULL},
    {"--num-attention-heads", DG_ARG_INT, M(num_attention_heads), "query heads", 1, 4096, NULL},
    {"--group-query-attention", DG_ARG_FLAG, T(group_query_attention), "use --num-query-groups KV heads", NR, NULL},
    {"--num-query-groups", DG_ARG_INT, M(num_query_groups), "KV heads with --group-query-attention", 1, 4096, NULL},
    {"--seq-length", DG_ARG_INT, M(seq_length), "tokens per sample", 1, 1 << 24, NULL},
    {"--max-position-embeddings", DG_ARG_INT, T(max_position_embeddings), "longest position (>= --seq-length)", 1, 1 << 24, NULL},
    {"--normalization", DG_ARG_CHOICE, T(normalization), "norm layer (default LayerNorm)", NR, "LayerNorm|RMSNorm"},
    {"--norm-epsilon", DG_ARG_DOUBLE, M(norm_epsilon), "norm epsilon", 0, 1, NULL},
    {"--rotary-base", DG_ARG_DOUBLE, M(rope_base), "RoPE base", 1, 1e12, NULL},
    {"--rotary-percent", DG_ARG_DOUBLE, M(rotary_percent), "share of each head RoPE rotates (default 1.0)", 0, 1, NULL},
    {"--kv-channels", DG_ARG_INT, M(kv_channels), "each attention head's size (default: --hidden-size / --num-attention-heads)", 1, 1 << 20, NULL},
    {"--qk-layernorm", DG_ARG_FLAG, M(qk_layernorm), "a norm of --normalization's kind over each head's queries and keys", NR, NULL},
    {"--multi-latent-attention", DG_ARG_FLAG, M(multi_latent_attention), "DeepSeek's multi-latent attention (MLA)", NR, NULL},
    {"--q-lora-rank", DG_ARG_INT, M(q_lora_rank), "MLA: rank of q's low-rank projection (default: none, one linear)", 1, 1 << 20, NULL},
    {"--kv-lora-rank", DG_ARG_INT, M(kv_lora_rank), "MLA: rank of k and v's latent (32)", 1, 1 << 20, NULL},
    {"--qk-head-dim", DG_ARG_INT, M(qk_head_dim), "MLA: each head's q/k dims without RoPE (128)", 1, 1 << 20, NULL},
    {"--qk-pos-emb-head-dim", DG_ARG_INT, M(qk_pos_emb_head_dim), "MLA: each head's RoPE dims (64)", 1, 1 << 20, NULL},
    {"--v-head-dim", DG_ARG_INT, M(v_head_dim), "MLA: each head's v dims (128)", 1, 1 << 20, NULL},
    {"--rotary-scaling-factor", DG_ARG_DOUBLE, M(rotary_scaling_factor), "YaRN's scaling factor (MLA, or --position-embedding-type yarn; 1.0)", 0, 1e9, NULL},
    {"--mscale", DG_ARG_DOUBLE, M(mscale), "YaRN's mscale (1.0)", 0, 1e9, NULL},
    {"--mscale-all-dim", DG_ARG_DOUBLE, M(mscale_all_dim), "YaRN's mscale over all dims (0.0)", 0, 1e9, NULL},
    {"--yarn-original-max-position-embeddings", DG_ARG_INT, M(yarn_original_max_pos), "--position-embedding-type yarn: the original context of the frequency correction (4096)", 1, 1 << 30, NULL},
    {"--yarn-beta-fast", DG_ARG_DOUBLE, M(yarn_beta_fast), "--position-embedding-type yarn: the correction range's fast rotations (32)", 0, 1e9, NULL},
    {"--yarn-beta-slow", DG_ARG_DOUBLE, M(yarn_beta_slow), "--position-embedding-type yarn: the correction range's slow rotations (1)", 0, 1e9, NULL},
    {"--swiglu", DG_ARG_FLAG, T(swiglu), "SwiGLU MLPs (default: GeLU)", NR, NULL},
    {"--quick-geglu", DG_ARG_FLAG, M(quick_geglu), "quick GeGLU MLPs: x sigmoid(1.702 x) of the gate times the linear half (default: GeLU)", NR, NULL},
    {"--glu-linear-offset", DG_ARG_DOUBLE, M(glu_linear_offset), "offset added to the GLU's linear half, with --quick-geglu (0)", -1e6, 1e6, NULL},
    {"--mtp-num-layers", DG_ARG_INT, M(mtp_num_layers), "multi-token prediction: DeepSeek-V3's sequential MTP modules after the decoder (default: none)", 1, 8, NULL},
    {"--mtp-loss-scaling-factor", DG_ARG_DOUBLE, M(mtp_loss_scaling_factor), "weight of the MTP modules' losses, split evenly over them (0.1)", 0, 1e6, NULL},
    {"--activation-func-clamp-value", DG_ARG_DOUBLE, M(activation_clamp), "clamp fc1's output before a GLU: the gate to <= c, the linear half to [-c, c] (default: none; ignored by GeLU)", 1e-30, 1e30, NULL},
    {"--untie-embeddings-and-output-weights", DG_ARG_FLAG, M(untie_embeddings), "separate LM head", NR, NULL},
    {"--make-vocab-size-divisible-by", DG_ARG_INT, T(make_vocab_divisible_by), "vocabulary padding", 1, 1 << 20, NULL},
    /* MoE */
    {"--num-experts", DG_ARG_INT, M(num_experts), "routed experts per MoE layer (0: dense)", 0, 1 << 16, NULL},
    {"--moe-router-topk", DG_ARG_INT, M(moe_router_topk), "experts per token", 1, 64, NULL},
    {"--moe-ffn-hidden-size", DG_ARG_INT, M(moe_ffn_hidden_size), "expert MLP width (default --ffn-hidden-size)", 1, 1 << 22, NULL},
    {"--moe-router-load-balancing-type", DG_ARG_CHOICE, T(load_balancing), "balancing loss (global_aux_loss, sinkhorn: not supported)", NR, "aux_loss|seq_aux_loss|global_aux_loss|sinkhorn|none"},
    {"--moe-aux-loss-coeff", DG_ARG_DOUBLE, M(moe_aux_loss_coeff), "load-balancing loss weight", 0, 1e6, NULL},
    {"--moe-z-loss-coeff", DG_ARG_DOUBLE, M(moe_z_loss_coeff), "router z-loss weight", 0, 1e6, NULL},
    {"--moe-router-score-function", DG_ARG_CHOICE, T(score_function), "router scores", NR, "softmax|sigmoid"},
    {"--moe-router-pre-softmax", DG_ARG_FLAG, M(router_pre_softmax), "softmax before top-k", NR, NULL},
    {"--moe-expert-capacity-factor", DG_ARG_DOUBLE, M(moe_capacity_factor), "capacity per expert (0: dropless)", 0, 1e6, NULL},
    {"--moe-shared-expert-intermediate-size", DG_ARG_INT, M(moe_shared_expert_size), "shared expert width (0: none)", 0, 1 << 22, NULL},
    {"--moe-token-drop-policy", DG_ARG_CHOICE, T(drop_policy), "which slots a full expert drops", NR, "probs|position"},
    {"--moe-router-topk-scaling-factor", DG_ARG_DOUBLE, M(moe_router_topk_scaling_factor), "scale the routing probs (0: none)", 0, 1e6, NULL},
    {"--moe-router-num-groups", DG_ARG_INT, M(moe_router_num_groups), "expert groups for group-limited routing (0: off)", 0, 1 << 16, NULL},
    {"--moe-router-group-topk", DG_ARG_INT, M(moe_router_group_topk), "groups each token may use", 0, 1 << 16, NULL},
    {"--moe-router-enable-expert-bias", DG_ARG_FLAG, M(moe_expert_bias), "aux-loss-free balancing: a per-expert bias on the sigmoid scores for the top-k choice, updated after each step", NR, NULL},
    {"--moe-router-bias-update-rate", DG_ARG_DOUBLE, T(moe_router_bias_update_rate), "the expert bias's step per iteration (1e-3)", 0, 1e6, NULL},
    {"--moe-use-upcycling", DG_ARG_FLAG, T(moe_use_upcycling), "first run of an MoE model: upcycle the dense checkpoint of --load (none: the dense model's random init) into the experts, save it to --save at iteration 1 and train on", NR, NULL},
    {"--moe-upcycling-granularity", DG_ARG_INT, T(moe_upcycling_granularity), "with --moe-use-upcycling: the dense FFN (--ffn-hidden-size x G) is cut into G expert slices (1)", 1, 1 << 16, NULL},
    {"--moe-router-force-load-balancing", DG_ARG_FLAG, M(moe_force_load_balancing), "benchmarking: the router's logits are normal draws (gradients pass straight through)", NR, NULL},
    {"--moe-input-jitter-eps", DG_ARG_DOUBLE, M(moe_input_jitter_eps), "the router's input times a uniform draw in [1-eps, 1+eps) while training (0: none)", 0, 1, NULL},
    {"--calculate-per-token-loss", DG_ARG_FLAG, M(per_token_loss), "the gradient is the global batch's summed losses over its tokens (the MoE losses weigh 1 / tokens per micro-batch)", NR, NULL},
    {"--moe-grouped-gemm", DG_ARG_FLAG, T(moe_grouped_gemm), "accepted: experts always run as one grouped GEMM", NR, NULL},
    {"--disable-bias-linear", DG_ARG_FLAG, T(disable_bias_linear), "no biases on linear layers", NR, NULL},
    {"--use-flash-attn", DG_ARG_FLAG, T(use_flash_attn), "accepted: --attention-backend auto is the fused flash-style kernel", NR, NULL},
    {"--position-embedding-type", DG_ARG_CHOICE, T(position_embedding_type), "position embeddings (default learned_absolute); yarn: RoPE with YaRN's frequencies", NR, "learned_absolute|rope|yarn|none"},
    {"--attention-backend", DG_ARG_CHOICE, T(attention_backend), "auto, flash, fused: the fused flash-style op; unfused, local: scores, softmax, dropout as nodes", NR, "auto|flash|fused|unfused|local"},
    {"--attention-dropout", DG_ARG_DOUBLE, M(attention_dropout), "dropout on attention probabilities (0.1, as Megatron); drawn inside the fused attention, or as a node of the unfused chain", 0, 1, NULL},
    {"--hidden-dropout", DG_ARG_DOUBLE, M(hidden_dropout), "dropout after the embedding and on each residual branch (0.1)", 0, 1, NULL},
    {"--window-size", DG_ARG_STRING, T(window_size), "sliding-window attention L,0: each query sees its own key and the L before it (-1: unbounded)", NR, NULL},
    {"--window-attn-skip-freq", DG_ARG_STRING, T(window_attn_skip_freq), "with --window-size: every N-th layer has full attention, or a 1 (window) / 0 (full) list per layer", NR, NULL},
    {"--moe-layer-freq", DG_ARG_STRING, T(moe_layer_freq), "every N-th layer is MoE, or a 0/1 list per layer, e.g. \"([0]*1+[1]*3)\"", NR, NULL},
    /* batch, optimizer */
    {"--micro-batch-size", DG_ARG_INT, M(micro_batch_size), "samples per micro batch", 1, 1 << 20, NULL},
    {"--global-batch-size", DG_ARG_INT, T(global_batch_size), "samples per iteration", 1, 1 << 30, NULL},
    {"--lr", DG_ARG_DOUBLE, T(lr), "peak learning rate", 0, 1e3, NULL},
    {"--min-lr", DG_ARG_DOUBLE, T(min_lr), "final learning rate", 0, 1e3, NULL},
    {"--lr-warmup-iters", DG_ARG_INT, T(lr_warmup_iters), "linear warmup iterations", 0, 1 << 30, NULL},
    {"--lr-decay-style", DG_ARG_CHOICE, T(lr_decay_style), "decay after warmup", NR, "constant|linear|cosine"},
    {"--lr-decay-iters", DG_ARG_INT, T(lr_decay_iters), "iterations to decay over (default --train-iters)", 1, 1 << 30, NULL},
    {"--weight-decay", DG_ARG_DOUBLE, T(weight_decay), "AdamW decoupled weight decay", 0, 1e3, NULL},
    {"--adam-beta1", DG_ARG_DOUBLE, T(adam_beta1), "", 0, 1, NULL},
    {"--adam-beta2", DG_ARG_DOUBLE, T(adam_beta2), "", 0, 1, NULL},
    {"--adam-eps", DG_ARG_DOUBLE, T(adam_eps), "", 0, 1, NULL},
    {"--clip-grad", DG_ARG_DOUBLE, T(clip_grad), "global L2 norm clip (0: off)", 0, 1e9, NULL},
    {"--init-method-std", DG_ARG_DOUBLE, T(init_method_std), "std of the normal init", 0, 1e3, NULL},
    {"--seed", DG_ARG_INT, T(seed), "random seed", 0, 2147483647, NULL},
    {"--train-iters", DG_ARG_INT, T(train_iters), "iterations, counted from 0", 1, 1 << 30, NULL},
    /* data */
    {"--data-path", DG_ARG_LIST, T(data_path), "[weight] prefix ... (default: the fortunes corpus)", NR, NULL},
    {"--train-data-path", DG_ARG_LIST, T(train_data_path), "[weight] prefix ... of the train split alone, used whole (instead of --data-path and --split)", NR, NULL},
    {"--valid-data-path", DG_ARG_LIST, T(valid_data_path), "[weight] prefix ... of the valid split alone (none: no validation)", NR, NULL},
    {"--test-data-path", DG_ARG_LIST, T(test_data_path), "[weight] prefix ... of the test split alone (none: no test)", NR, NULL},
    {"--mock-data", DG_ARG_FLAG, T(mock_data), "train on generated tokens", NR, NULL},
    {"--split", DG_ARG_STRING, T(split), "train,valid,test weights", NR, NULL},
    {"--tokenizer-type", DG_ARG_CHOICE, T(tokenizer_type), "tokenizer (with --vocab-file/--merge-file: GPT2BPETokenizer)", NR, DG_TOK_TYPE_NAMES},
    {"--tokenizer-model", DG_ARG_STRING, T(tokenizer_model), "tokenizer.json (HuggingFaceTokenizer) or tokenizer.model (SentencePiece)", NR, NULL},
    {"--vocab-file", DG_ARG_STRING, T(vocab_file), "GPT-2 BPE vocab.json", NR, NULL},
    {"--merge-file", DG_ARG_STRING, T(merge_file), "GPT-2 BPE merges.txt", NR, NULL},
    {"--vocab-size", DG_ARG_INT, T(null_vocab_size), "NullTokenizer / mock data: ids 0..N, N the end of document", 2, 1 << 30, NULL},
    {"--data-cache-path", DG_ARG_STRING, T(data_cache_path), "where built datasets and indices go", NR, NULL},
    /* parallelism */
    {"--tensor-model-parallel-size", DG_ARG_INT, T(tensor_model_parallel_size), "TP ranks", 1, 1 << 16, NULL},
    {"--sequence-parallel", DG_ARG_FLAG, T(sequence_parallel), "split the activations between the linears on the sequence over tp", NR, NULL},
    {"--tp-comm-overlap", DG_ARG_FLAG, T(tp_comm_overlap), "overlap TP communication with GEMMs: the linears in chunks of the sequence (with --sequence-parallel)", NR, NULL},
    {"--context-parallel-size", DG_ARG_INT, T(context_parallel_size), "CP ranks", 1, 1 << 16, NULL},
    {"--cp-comm-type", DG_ARG_CHOICE, T(cp_comm_type), "how CP ranks exchange K/V: p2p (default, the ring) or a2a (all-to-all between sequence and heads)", NR, "p2p|a2a|allgather|a2a+p2p"},
    {"--expert-model-parallel-size", DG_ARG_INT, T(expert_model_parallel_size), "EP ranks", 1, 1 << 16, NULL},
    {"--expert-tensor-parallel-size", DG_ARG_INT, T(expert_tensor_parallel_size), "TP ranks of each expert: 1 or the TP size (default: the TP size)", 1, 1 << 16, NULL},
    {"--moe-token-dispatcher-type", DG_ARG_CHOICE, T(moe_token_dispatcher_type), "how tokens reach the EP ranks' experts (flex: as alltoall)", NR, "alltoall|allgather|flex"},
    {"--moe-a2a-overlap-chunks", DG_ARG_INT, M(moe_a2a_overlap_chunks), "split a micro-batch's tokens into N chunks so chunk i's all-to-all overlaps chunk i-1's expert GEMMs (1: off)", 1, 4, NULL},
    {"--pipeline-model-parallel-size", DG_ARG_INT, T(pipeline_model_parallel_size), "PP stages", 1, 1 << 16, NULL},
    {"--use-distributed-optimizer", DG_ARG_FLAG, T(use_distributed_optimizer), "shard optimizer state over DP (ZeRO-1)", NR, NULL},
    {"--overlap-grad-reduce", DG_ARG_FLAG, T(overlap_grad_reduce), "reduce gradient buckets during backward", NR, NULL},
    {"--overlap-param-gather", DG_ARG_FLAG, T(overlap_param_gather), "gather updated parameters under the next forward", NR, NULL},
    {"--emulate-link", DG_ARG_LIST, T(emulate_link), "make each collective last its alpha-beta time on a link: GBPS,USEC, or per axis tp=GBPS,USEC ep=... dp=...", NR, NULL},
    {"--ddp-bucket-size", DG_ARG_INT, T(ddp_bucket_size), "gradient bucket size in elements (default max(40M, 1M x DP))", 1, 2147483647, NULL},
    {"--decoder-first-pipeline-num-layers", DG_ARG_INT, T(decoder_first_pipeline_num_layers), "layers on the first pipeline stage (uneven split)", 1, 1 << 16, NULL},
    {"--decoder-last-pipeline-num-layers", DG_ARG_INT, T(decoder_last_pipeline_num_layers), "layers on the last pipeline stage (uneven split)", 1, 1 << 16, NULL},
    {"--num-layers-per-virtual-pipeline-stage", DG_ARG_INT, T(num_layers_per_virtual_pipeline_stage), "interleaved 1F1B: layers per virtual stage", 1, 1 << 16, NULL},
    {"--num-virtual-stages-per-pipeline-rank", DG_ARG_INT, T(num_virtual_stages_per_pipeline_rank), "interleaved 1F1B: virtual stages per pipeline rank", 1, 1 << 16, NULL},
    {"--pipeline-schedule", DG_ARG_CHOICE, T(pipeline_schedule), "order of the micro-batches' forwards and backwards under PP (default 1f1b)", NR, "1f1b|all-forward-all-backward|zero-bubble-h1"},
    /* checkpoints, logging */
    {"--save", DG_ARG_STRING, T(save), "checkpoint directory to write", NR, NULL},
    {"--load", DG_ARG_STRING, T(load), "checkpoint directory to resume from", NR, NULL},
    {"--ckpt-keep-last", DG_ARG_INT, T(keep_last), "checkpoints to keep (0: all)", 0, 1 << 30, NULL},
    {"--ckpt-format", DG_ARG_CHOICE, T(ckpt_format), "checkpoint format: torch_dist = dagatron's sharded format (metadata.json + per-rank files)", NR, "torch_dist"},
    {"--no-load-optim", DG_ARG_FLAG, T(no_load_optim), "load parameters, not the optimizer state", NR, NULL},
    {"--no-load-rng", DG_ARG_FLAG, T(no_load_rng), "accepted: random streams follow --seed and the iteration", NR, NULL},
    {"--finetune", DG_ARG_FLAG, T(finetune), "load parameters only and start at iteration 0", NR, NULL},
    {"--ckpt-fully-parallel-save", DG_ARG_FLAG, T(ckpt_fully_parallel_save), "accepted: every rank always writes its part", NR, NULL},
    {"--ckpt-fully-parallel-load", DG_ARG_FLAG, T(ckpt_fully_parallel_load), "accepted: every rank always reads its part", NR, NULL},
    {"--async-save", DG_ARG_FLAG, T(async_save), "write checkpoints on a background thread from a host snapshot", NR, NULL},
    {"--save-interval", DG_ARG_INT, T(save_interval), "iterations between checkpoints", 1, 1 << 30, NULL},
    {"--exit-interval", DG_ARG_INT, T(exit_interval), "stop (saving a checkpoint) when the iteration is a multiple of N", 1, 1 << 30, NULL},
    {"--log-interval", DG_ARG_INT, T(log_interval), "iterations between log lines", 1, 1 << 30, NULL},
    {"--eval-interval", DG_ARG_INT, T(eval_interval), "iterations between evaluations", 1, 1 << 30, NULL},
    {"--eval-iters", DG_ARG_INT, T(eval_iters), "batches per evaluation (0: none)", 0, 1 << 30, NULL},
    {"--tensorboard-dir", DG_ARG_STRING, T(tensorboard_dir), "write TensorBoard event files of the logged scalars here", NR, NULL},
    {"--tensorboard-log-interval", DG_ARG_INT, T(tensorboard_log_interval), "iterations between TensorBoard scalars (1)", 1, 1 << 30, NULL},
    {"--tensorboard-queue-size", DG_ARG_INT, T(tensorboard_queue_size), "accepted: events are written as they come", 1, 1 << 30, NULL},
    {"--wandb-project", DG_ARG_STRING, T(wandb_project), "accepted: W&B is not available (a note is printed)", NR, NULL},
    {"--wandb-exp-name", DG_ARG_STRING, T(wandb_exp_name), "accepted: W&B is not available", NR, NULL},
    {"--wandb-save-dir", DG_ARG_STRING, T(wandb_save_dir), "accepted: W&B is not available", NR, NULL},
    {"--trace", DG_ARG_STRING, T(trace), "Chrome trace-event JSON of one step", NR, NULL},
    {"--compute-threads", DG_ARG_INT, T(compute_threads), "compute workers (default: this rank's cores)", 0, 1024, NULL},
    {"--device", DG_ARG_CHOICE, T(device), "where kernels run (default: cuda when a GPU is usable, else cpu; emulated: the GPU runtime on the CPU, for testing)", NR, "cuda|cpu|emulated"},
    {"--emulated-delay-us", DG_ARG_INT, T(emulated_delay_us), "--device emulated: each stream task first waits a random 0..N microseconds (0)", 0, 1000000, NULL},
    {"--emulated-missing-ops", DG_ARG_LIST, T(emulated_missing_ops), "--device emulated: ops (by name) the device pretends to have no kernel for, as a GPU lacking them would", NR, NULL},
    {"--device-host-fallback", DG_ARG_FLAG, T(device_host_fallback), "debugging: an op without a kernel on the device runs on the host (its buffers copied around it) instead of being refused", NR, NULL},
    /* activation recompute (train/dg_recompute.h) */
    {"--recompute-activations", DG_ARG_FLAG, T(recompute_activations), "recompute activations: --recompute-granularity selective", NR, NULL},
    {"--recompute-granularity", DG_ARG_CHOICE, T(recompute_granularity), "full: whole layers; selective: the --recompute-modules", NR, "full|selective"},
    {"--recompute-method", DG_ARG_CHOICE, T(recompute_method), "full: uniform (groups of --recompute-num-layers) or block (the first N layers), per pipeline stage", NR, "uniform|block"},
    {"--recompute-num-layers", DG_ARG_INT, T(recompute_num_layers), "full: layers per group (uniform) or recomputed (block)", 1, 4096, NULL},
    {"--recompute-modules", DG_ARG_LIST, T(recompute_modules), "selective: core_attn (default) moe_act layernorm mlp moe shared_experts", NR, NULL},
    {"--recompute-memory-budget", DG_ARG_DOUBLE, T(recompute_memory_budget), "MB (MiB): recompute the cheapest activations so the planned activation peak fits", 0, 1e12, NULL},
    {"--overlap-moe-expert-parallel-comm", DG_ARG_FLAG, T(overlap_moe_expert_parallel_comm), "two micro-batches in flight: one's all-to-alls beside the other's compute (without PP)", NR, NULL},
};

const dg_arg_spec *dg_train_flags(int *n) {
    *n = (int)DG_ARRAY_LEN(dg_train_specs);
    return dg_train_specs;
}

void dg_train_config_defaults(dg_train_config *c) {
    memset(c, 0, sizeof *c);
    dg_model_config *m = &c->model;
    /* The main job's model: small enough to train in minutes on 2 cores. */
    m->num_layers = 4;
    m->hidden_size = 256;
    m->num_attention_heads = 8;
    m->seq_length = 128;
    m->micro_batch_size = 4;
    /* Megatron's defaults (arguments.py, TransformerConfig): a dense GPT
     * with GeLU MLPs, LayerNorm, learned absolute positions, biases, tied
     * embeddings; MoE losses off until their coefficients are set. */
    m->num_experts = 0;
    m->moe_router_topk = 2;
    m->moe_aux_loss_coeff = 0.0;
    m->moe_z_loss_coeff = 0.0;
    m->rope_base = 10000.0;
    /* MLA's flags: Megatron's defaults (arguments.py _add_mla_args) */
    m->kv_lora_rank = 32;
    m->qk_head_dim = 128;
    m->qk_pos_emb_head_dim = 64;
    m->v_head_dim = 128;
    m->rotary_scaling_factor = 1.0;
    m->mscale = 1.0;
    m->mscale_all_dim = 0.0;
    /* non-MLA YaRN's flags: YarnRotaryEmbedding's defaults (argument_utils.py) */
    m->yarn_original_max_pos = 4096;
    m->yarn_beta_fast = 32.0;
    m->yarn_beta_slow = 1.0;
    m->norm_epsilon = 1e-5;
    m->moe_layer_freq = 1;
    m->hidden_dropout = 0.1;
    m->mtp_loss_scaling_factor = 0.1;
    m->attention_dropout = 0.1;
    c->moe_router_bias_update_rate = 1e-3;
    c->moe_upcycling_granularity = 1;
    snprintf(c->normalization, sizeof c->normalization, "LayerNorm");
    snprintf(c->score_function, sizeof c->score_function, "softmax");
    snprintf(c->moe_token_dispatcher_type, sizeof c->moe_token_dispatcher_type, "alltoall");
    c->model.moe_a2a_overlap_chunks = 1;
    snprintf(c->load_balancing, sizeof c->load_balancing, "aux_loss");
    snprintf(c->moe_layer_freq, sizeof c->moe_layer_freq, "1");
    snprintf(c->drop_policy, sizeof c->drop_policy, "probs");
    snprintf(c->position_embedding_type, sizeof c->position_embedding_type, "learned_absolute");
    snprintf(c->attention_backend, sizeof c->attention_backend, "auto");
    snprintf(c->lr_decay_style, sizeof c->lr_decay_style, "linear");
    snprintf(c->split, sizeof c->split, "969,30,1");
    c->make_vocab_divisible_by = 128;
    c->tensorboard_log_interval = 1;
    c->lr = 1e-3;
    c->min_lr = 0.0;
    c->lr_warmup_iters = 0;
    c->weight_decay = 0.01;
    c->adam_beta1 = 0.9;
    c->adam_beta2 = 0.999;
    c->adam_eps = 1e-8;
    c->clip_grad = 1.0;
    c->init_method_std = 0.02;
    c->seed = 1234;
    c->train_iters = 100;
    c->log_interval = 100;
    c->eval_interval = 1000;
    c->eval_iters = 100;
    c->dp_size = 1;
    c->tensor_model_parallel_size = 1;
    c->context_parallel_size = 1;
    c->expert_model_parallel_size = 1;
    c->pipeline_model_parallel_size = 1;
    dg_train_compat_defaults(&c->compat);
    snprintf(c->pipeline_schedule, sizeof c->pipeline_schedule, "1f1b");
}

int dg_train_config_parse(dg_train_config *c, int argc, char **argv, int first, dg_err *err) {
    /* dagatron's flags, then the rest of Megatron's (dg_train_compat.h) */
    DG_TRY(dg_train_compat_parse(c, dg_train_specs, (int)DG_ARRAY_LEN(dg_train_specs), argc, argv, first, err));
    /* Megatron's pretrain_gpt.py defaults --tokenizer-type to GPT2BPETokenizer;
     * dagatron's own default (byte-level, NullTokenizer on mock data) needs
     * no files, so it stays unless GPT-2 BPE files are named. With
     * --tokenizer-model too the files are ambiguous, and stay refused. */
    if (c->tokenizer_type[0] || c->tokenizer_model[0] || (!c->vocab_file[0] && !c->merge_file[0])) return DG_OK;
    if (!c->vocab_file[0] || !c->merge_file[0])
        return dg_err_set(err, DG_EINPUT,
                          "%s given without %s: the default --tokenizer-type, %s (Megatron's pretrain_gpt.py), "
                          "needs both",
                          c->vocab_file[0] ? "--vocab-file" : "--merge-file",
                          c->vocab_file[0] ? "--merge-file" : "--vocab-file", DG_TOK_GPT2BPE_NAME);
    snprintf(c->tokenizer_type, sizeof c->tokenizer_type, "%s", DG_TOK_GPT2BPE_NAME);
    c->tokenizer_type_default = 1;
    return DG_OK;
}

/* --moe-layer-freq as Megatron takes it: an integer N (every N-th layer,
 * starting at layer 0, is MoE) or a list expression with one 0/1 per layer. */
static int parse_layer_freq(dg_train_config *c, dg_err *err) {
    dg_model_config *m = &c->model;
    const char *s = c->moe_layer_freq;
    char *end = NULL;
    long k = strtol(s, &end, 10);
    if (end != s && *end == 0) {
        if (k < 1)
            return dg_err_set(err, DG_EINPUT, "--moe-layer-freq: expected >= 1 or a list, got %ld", k);
        m->moe_layer_freq = (int)k;
        memset(m->moe_layer_mask, 0, sizeof m->moe_layer_mask);
        return DG_OK;
    }
    int v[DG_MODEL_MAX_PATTERN_LAYERS + 1], n = 0;
    dg_err e = {{0}};
    if (dg_parse_int_list(s, v, DG_MODEL_MAX_PATTERN_LAYERS + 1, &n, &e) != DG_OK)
        return dg_err_set(err, DG_EINPUT, "--moe-layer-freq: %s", e.msg);
    if (n != m->num_layers)
        return dg_err_set(err, DG_EINPUT, "--moe-layer-freq: the list has %d entries, --num-layers is %d", n,
                          m->num_layers);
    memset(m->moe_layer_mask, 0, sizeof m->moe_layer_mask);
    for (int l = 0; l < n; l++) {
        if (v[l] != 0 && v[l] != 1)
            return dg_err_set(err, DG_EINPUT, "--moe-layer-freq: entry %d is %d, expected 0 or 1", l, v[l]);
        if (v[l]) m->moe_layer_mask[l / 32] |= (int)(1u << (l % 32));
    }
    m->moe_layer_freq = 0;
    return DG_OK;
}

int dg_train_config_check_tp(const dg_train_config *c, dg_err *err) {
    const dg_model_config *m = &c->model;
    int tp = c->tensor_model_parallel_size;
    int groups = c->group_query_attention && m->num_query_groups > 0 ? m->num_query_groups : m->num_attention_heads;
    if (c->tp_comm_overlap && (tp <= 1 || !c->sequence_parallel))
        return dg_err_set(err, DG_EINPUT, "--tp-comm-overlap needs --sequence-parallel and "
                                          "--tensor-model-parallel-size > 1 (got %d%s)",
                          tp, c->sequence_parallel ? "" : ", no --sequence-parallel");
    int etp = c->expert_tensor_parallel_size > 0 ? c->expert_tensor_parallel_size : tp;
    if (etp != 1 && etp != tp)
        return dg_err_set(err, DG_EINPUT,
                          "--expert-tensor-parallel-size %d: expected 1 or --tensor-model-parallel-size %d "
                          "(other expert foldings are not built)",
                          etp, tp);
    if (tp <= 1) return DG_OK;
    if (c->sequence_parallel && m->seq_length % tp != 0)
        return dg_err_set(err, DG_EINPUT, "--sequence-parallel: --tensor-model-parallel-size %d does not divide "
                                          "--seq-length %lld",
                          tp, (long long)m->seq_length);
    if (c->tp_comm_overlap && m->seq_length % (tp * DG_TP_OVERLAP_CHUNKS) != 0)
        return dg_err_set(err, DG_EINPUT, "--tp-comm-overlap: --seq-length %d is not %d chunks per rank of "
                                          "--tensor-model-parallel-size %d",
                          m->seq_length, DG_TP_OVERLAP_CHUNKS, tp);
    if (m->num_attention_heads % tp != 0)
        return dg_err_set(err, DG_EINPUT, "--tensor-model-parallel-size %d does not divide --num-attention-heads %d",
                          tp, m->num_attention_heads);
    if (groups % tp != 0)
        return dg_err_set(err, DG_EINPUT, "--tensor-model-parallel-size %d does not divide --num-query-groups %d", tp,
                          groups);
    int f = m->moe_ffn_hidden_size > 0 ? m->moe_ffn_hidden_size : m->ffn_hidden_size;
    if (m->num_experts > 0 && etp > 1 && f > 0 && f % etp != 0)
        return dg_err_set(err, DG_EINPUT, "--expert-tensor-parallel-size %d does not divide --moe-ffn-hidden-size %d",
                          etp, f);
    return DG_OK;
}

/* Megatron's expert-parallel checks, on the flags rather than on the weight
 * the EP pass would fail to split: EP needs routed experts, and an equal
 * share of them on each EP rank. */
static int check_ep(const dg_train_config *c, dg_err *err) {
    int ep = c->expert_model_parallel_size, e = c->model.num_experts;
    if (ep <= 1) return DG_OK;
    if (e <= 0)
        return dg_err_set(err, DG_EINPUT,
                          "--expert-model-parallel-size %d needs routed experts (--num-experts > 0; the model is dense)",
                          ep);
    if (e % ep != 0)
        return dg_err_set(err, DG_EINPUT,
                          "--num-experts %d: expected a multiple of --expert-model-parallel-size %d (each EP rank "
                          "holds an equal share of the experts)",
                          e, ep);
    return DG_OK;
}

/* --attention-backend and --attention-dropout: the fused op (auto, flash,
 * fused) draws the dropout inside (kernels/cpu/dg_cpu_attention.h) and is
 * what CP lowers to its ring; the unfused chain (unfused, local: Megatron's
 * own attention of 2022) has both scores and dropout as nodes. Both draw
 * the same mask. */
static int attention_backend(dg_train_config *c, dg_err *err) {
    dg_model_config *m = &c->model;
    m->attention_unfused = !strcmp(c->attention_backend, "unfused") || !strcmp(c->attention_backend, "local");
    if (!(m->attention_dropout >= 0 && m->attention_dropout < 1))
        return dg_err_set(err, DG_EINPUT, "--attention-dropout %g: expected [0, 1)", m->attention_dropout);
    if (m->attention_unfused && c->use_flash_attn)
        return dg_err_set(err, DG_EINPUT, "--use-flash-attn contradicts --attention-backend %s", c->attention_backend);
    if (m->attention_unfused && c->context_parallel_size > 1)
        return dg_err_set(err, DG_EINPUT,
                          "--attention-backend %s: --context-parallel-size %d runs the fused attention (its ring "
                          "or all-to-all); use --attention-backend auto, flash or fused",
                          c->attention_backend, c->context_parallel_size);
    return DG_OK;
}

int dg_train_config_finish(dg_train_config *c, int64_t vocab_from_data, dg_err *err) {
    return dg_train_config_finish_run(c, vocab_from_data, c->dp_size, err);
}

int dg_train_config_finish_run(dg_train_config *c, int64_t vocab_from_data, int data_size, dg_err *err) {
    dg_model_config *m = &c->model;
    m->normalization_layernorm = !strcmp(c->normalization, "LayerNorm");
    if (m->quick_geglu && c->swiglu)
        return dg_err_set(err, DG_EINPUT, "--quick-geglu and --swiglu exclude each other (one MLP activation)");
    m->mlp_gelu = !c->swiglu && !m->quick_geglu;
    if (m->mlp_gelu) m->activation_clamp = 0; /* Megatron's GeLU path reads no clamp */
    m->add_bias_linear = !c->disable_bias_linear;
    int yarn = !strcmp(c->position_embedding_type, "yarn");
    m->position_embedding = !strcmp(c->position_embedding_type, "rope") || yarn ? DG_MODEL_POS_ROPE
                            : !strcmp(c->position_embedding_type, "none") ? DG_MODEL_POS_NONE
                                                                          : DG_MODEL_POS_LEARNED;
    DG_TRY(attention_backend(c, err));
    if (!(m->hidden_dropout < 1))
        return dg_err_set(err, DG_EINPUT, "--hidden-dropout %g: expected [0, 1)", m->hidden_dropout);
    m->score_function_sigmoid = !strcmp(c->score_function, "sigmoid");
    /* Megatron reads --moe-router-pre-softmax only with softmax scores */
    if (m->score_function_sigmoid) m->router_pre_softmax = 0;
    m->expert_model_parallel_size = c->expert_model_parallel_size;
    m->moe_token_dispatcher_type = !strcmp(c->moe_token_dispatcher_type, "allgather")
                                       ? DG_EP_DISPATCH_ALLGATHER
                                       : DG_EP_DISPATCH_ALLTOALL;
    if (!strcmp(c->load_balancing, "none")) m->moe_aux_loss_coeff = 0.0;
    m->moe_seq_aux_loss = !strcmp(c->load_balancing, "seq_aux_loss");
    if (!strcmp(c->load_balancing, "global_aux_loss") || !strcmp(c->load_balancing, "sinkhorn"))
        return dg_err_set(err, DG_EINPUT,
                          "--moe-router-load-balancing-type %s: not supported: only aux_loss, seq_aux_loss and none "
                          "are built (docs/megatron_compat.md)",
                          c->load_balancing);
    DG_TRY(parse_layer_freq(c, err));
    DG_TRY(dg_train_attn_variants(c, err));
    dg_link_spec links;
    if (c->emulate_link[0]) DG_TRY(dg_link_spec_parse(c->emulate_link, "--emulate-link", &links, err));
    m->moe_token_drop_policy = !strcmp(c->drop_policy, "position");
    /* --kv-channels of Megatron's default size is the default (one record for one model) */
    if (m->kv_channels > 0 && (int64_t)m->kv_channels * m->num_attention_heads == m->hidden_size) m->kv_channels = 0;
    if (!m->multi_latent_attention) { /* MLA's settings are unread without it (one record for one model) */
        m->q_lora_rank = m->kv_lora_rank = m->qk_head_dim = m->qk_pos_emb_head_dim = m->v_head_dim = 0;
        m->rope_yarn = yarn; /* Megatron's GPTModel: YaRN on ordinary attention */
        if (!yarn) m->rotary_scaling_factor = m->mscale = m->mscale_all_dim = 0.0;
    }
    if (m->multi_latent_attention || !m->rope_yarn) { /* read only by ordinary attention's YaRN */
        m->yarn_original_max_pos = m->yarn_unrounded = 0;
        m->yarn_beta_fast = m->yarn_beta_slow = 0.0;
    }
    if (!c->group_query_attention) m->num_query_groups = m->num_attention_heads;
    if (m->num_query_groups <= 0) m->num_query_groups = m->num_attention_heads;
    /* Megatron's default: 4 x hidden; with --swiglu two thirds of that (the
     * GLU's two projections keep the parameter count), rounded down to 64 */
    if (m->ffn_hidden_size <= 0)
        m->ffn_hidden_size = c->swiglu ? (int)(4.0 * m->hidden_size * 2 / 3 / 64) * 64 : 4 * m->hidden_size;
    if (m->moe_ffn_hidden_size <= 0) m->moe_ffn_hidden_size = m->ffn_hidden_size;
    if (c->max_position_embeddings <= 0) c->max_position_embeddings = m->seq_length;
    if (c->max_position_embeddings < m->seq_length)
        return dg_err_set(err, DG_EINPUT, "--seq-length %d exceeds --max-position-embeddings %d",
                          m->seq_length, c->max_position_embeddings);
    /* the learned position table's rows; no other model reads it */
    m->max_position_embeddings = m->position_embedding == DG_MODEL_POS_LEARNED ? c->max_position_embeddings : 0;

    /* Vocabulary: the tokenizer's (NullTokenizer and mock data: --vocab-size),
     * padded like Megatron to a multiple of --make-vocab-size-divisible-by
     * times tp, so the vocab-parallel table and LM head split evenly. */
    int64_t v = vocab_from_data;
    if (v <= 0) {
        if (c->null_vocab_size <= 0)
            return dg_err_set(err, DG_EINPUT,
                              "--vocab-size: required with --tokenizer-type NullTokenizer or --mock-data");
        v = dg_tok_null_vocab_size(c->null_vocab_size); /* Megatron's NullTokenizer: N + 1 ids, EOD N */
    }
    int64_t d = (int64_t)c->make_vocab_divisible_by * DG_MAX(c->tensor_model_parallel_size, 1); /* Megatron: x tp */
    m->vocab_size = (int)((v + d - 1) / d * d);

    if (c->global_batch_size <= 0) c->global_batch_size = m->micro_batch_size * data_size;
    int per = m->micro_batch_size * data_size;
    if (c->global_batch_size % per != 0)
        return dg_err_set(err, DG_EINPUT,
                          "--global-batch-size %d is not a multiple of --micro-batch-size %d x data-parallel size %d",
                          c->global_batch_size, m->micro_batch_size, data_size);
    c->num_microbatches = c->global_batch_size / per;
    DG_TRY(dg_train_pp_check_microbatches(c, data_size, err));
    DG_TRY(dg_train_compat_finish(c, err));
    if (c->lr_decay_iters <= 0) c->lr_decay_iters = c->train_iters;
    if (c->min_lr > c->lr)
        return dg_err_set(err, DG_EINPUT, "--min-lr %g exceeds --lr %g", c->min_lr, c->lr);
    if (c->lr_warmup_iters > c->lr_decay_iters)
        return dg_err_set(err, DG_EINPUT, "--lr-warmup-iters %d exceeds --lr-decay-iters %d",
                          c->lr_warmup_iters, c->lr_decay_iters);
    if (c->overlap_param_gather && !c->use_distributed_optimizer)
        return dg_err_set(err, DG_EINPUT, "--overlap-param-gather needs --use-distributed-optimizer");
    if (c->overlap_moe_expert_parallel_comm && c->pipeline_model_parallel_size > 1)
        return dg_err_set(err, DG_EINPUT, "--overlap-moe-expert-parallel-comm with --pipeline-model-parallel-size %d: "
                          "not supported yet (the pipeline schedule orders the micro-batches)",
                          c->pipeline_model_parallel_size);
    if (c->mock_data && c->data_path[0])
        return dg_err_set(err, DG_EINPUT, "--mock-data and --data-path exclude each other");
    DG_TRY(dg_train_config_check_tp(c, err));
    DG_TRY(check_ep(c, err));
    DG_TRY(dg_upcycle_check_flags(c, err));
    DG_TRY(dg_model_config_check(m, err));
    return dg_recompute_check(c, err);
}
