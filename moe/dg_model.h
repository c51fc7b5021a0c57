/* dg_model.h — the GPT decoder (Megatron's dense GPT, or Mixtral-style MoE)
 * lowered into a task graph.
 *
 * dg_model_config carries the model's shape with Megatron's flag names in the
 * comments; dg_model_build_forward() lowers one microbatch's forward pass into
 * graph nodes (embedding [+ learned positions] -> N x [norm, GQA attention
 * (RoPE or not), residual, norm, MoE or dense MLP (GeLU, SwiGLU or quick
 * GeGLU), residual]
 * -> final norm -> LM head -> cross entropy [-> MTP modules, each with its
 * own cross entropy: dg_model_mtp.h]), stamping each node with its layer;
 * linear layers carry biases under add_bias_linear. The graph is logical:
 * global shapes (read from the input tensors past the inputs themselves),
 * one moe_experts node per MoE layer, parameters annotated with placement
 * and init; it knows no parallel size. The step pipeline
 * (parallel/dg_pipeline.h) makes it what a rank runs; dg_model_forward_local()
 * (dg_ep_model.h) makes a runnable forward of it for tests and tools.
 */
#ifndef DG_MODEL_H
#define DG_MODEL_H

#include "dg_graph.h"

typedef struct dg_model_config {
    int num_layers;          /* --num-layers */
    int hidden_size;         /* --hidden-size */
    int ffn_hidden_size;     /* --ffn-hidden-size (dense MLP) */
    int num_attention_heads; /* --num-attention-heads */
    int num_query_groups;    /* --num-query-groups (== heads without --group-query-attention) */
    int seq_length;          /* --seq-length */
    int micro_batch_size;    /* --micro-batch-size */
    int vocab_size;          /* --vocab-size (padded) */
    int num_experts;         /* --num-experts (0: dense model) */
    int moe_router_topk;     /* --moe-router-topk */
    int moe_ffn_hidden_size; /* --moe-ffn-hidden-size */
    double moe_aux_loss_coeff; /* --moe-aux-loss-coeff */
    double moe_z_loss_coeff;   /* --moe-z-loss-coeff */
    double rope_base;          /* --rotary-base (10000) */
    double norm_epsilon;       /* --norm-epsilon (1e-5) */
    int untie_embeddings;      /* --untie-embeddings-and-output-weights */
    int normalization_layernorm; /* --normalization LayerNorm (default RMSNorm) */
    int score_function_sigmoid;  /* --moe-router-score-function sigmoid (default softmax) */
    int router_pre_softmax;      /* --moe-router-pre-softmax */
    double moe_capacity_factor;  /* --moe-expert-capacity-factor (0: dropless) */
    int moe_layer_freq;          /* --moe-layer-freq N: every n-th layer is MoE (1: all);
                                  * 0: moe_layer_mask says which */
    int moe_layer_mask[4];       /* --moe-layer-freq as a list ("([0]*1+[1]*3)"): bit
                                  * l % 32 of word l / 32 set = layer l is MoE */
    int moe_shared_expert_size;  /* --moe-shared-expert-intermediate-size (0: none) */
    /* The next three are the EP pass's options (parallel/ep/dg_pass_ep.h),
     * carried here for the checkpoint's config record; the model builder
     * never reads them (test_model_knows_no_parallel_size). */
    int expert_model_parallel_size; /* --expert-model-parallel-size (0 or 1: experts not split) */
    int moe_token_dispatcher_type;  /* --moe-token-dispatcher-type: a dg_ep_dispatcher
                                     * (0 alltoall, 1 allgather; parallel/ep/dg_ep.h) */
    int moe_a2a_overlap_chunks;     /* --moe-a2a-overlap-chunks (0 or 1: no overlap) */
    int moe_token_drop_policy;      /* --moe-token-drop-policy: 0 probs, 1 position */
    int moe_router_num_groups;      /* --moe-router-num-groups (0: not group-limited) */
    int moe_router_group_topk;      /* --moe-router-group-topk */
    double moe_router_topk_scaling_factor; /* --moe-router-topk-scaling-factor (0: none) */
    double rotary_percent;          /* --rotary-percent: share of each head RoPE rotates (0: all) */
    /* Megatron's dense-GPT choices. Zero means the Mixtral-style choice
     * (SwiGLU, no biases, RoPE), so a zeroed config (dg_model_config_tiny,
     * an old checkpoint's record) keeps its meaning; the trainer's flag
     * defaults (dg_train_config_defaults) are Megatron's: GeLU, biases,
     * learned absolute positions. */
    int mlp_gelu;                   /* GeLU MLP (no --swiglu); 0: SwiGLU */
    int add_bias_linear;            /* biases on linear layers (no --disable-bias-linear) */
    int position_embedding;         /* --position-embedding-type: a dg_model_pos */
    int max_position_embeddings;    /* rows of the learned position table (0: --seq-length) */
    double hidden_dropout;          /* --hidden-dropout: after the embedding and on each
                                     * residual branch (0: none; ops/dg_op_dropout.h) */
    int moe_seq_aux_loss;           /* --moe-router-load-balancing-type seq_aux_loss: the
                                     * load-balancing loss per sequence, averaged (0: per batch) */
    int attention_unfused;          /* --attention-backend unfused|local: the scores written out,
                                     * softmax, dropout and the product with V as nodes
                                     * (ops/dg_op_attn_unfused.h); 0: the fused op */
    double attention_dropout;       /* --attention-dropout on the probabilities (unfused only) */
    int kv_channels;                /* --kv-channels: each head's size (0: hidden / heads, Megatron's
                                     * default); q, k and v are heads x this, the projection back */
    int qk_layernorm;               /* --qk-layernorm: a norm of --normalization's kind over each
                                     * head's queries and keys (Qwen3, OLMoE), before RoPE */
    /* router variants (issue 29) */
    int moe_expert_bias;            /* --moe-router-enable-expert-bias: each MoE layer's router
                                     * selects by score + a per-expert bias, the input
                                     * "decoder.layers.L.mlp.router.expert_bias" f32 [E] that the
                                     * trainer updates after each step (train/dg_expert_bias.h) */
    int moe_force_load_balancing;   /* --moe-router-force-load-balancing: the router's logits are
                                     * replaced by standard normal draws (straight through) */
    double moe_input_jitter_eps;    /* --moe-input-jitter-eps: the router's input times a uniform
                                     * draw in [1 - eps, 1 + eps) while training (0: none) */
    int per_token_loss;             /* --calculate-per-token-loss: the step's gradient is that of
                                     * the global batch's summed losses over its token count (the
                                     * MoE losses' weight in the total changes; see loss) */
    /* attention variants (issue 29) */
    int attn_window;                /* --window-size L,0: the keys a windowed layer's query sees,
                                     * L + 1 (its own and the L before it); 0: no window (none
                                     * given, or L = -1, Megatron's unbounded) */
    int window_attn_skip_freq;      /* --window-attn-skip-freq N: layer l (from 0) is windowed
                                     * unless (l + 1) % N == 0 (Megatron counts layers from 1);
                                     * 0: every layer; -1: window_attn_mask says which */
    int window_attn_mask[4];        /* the list form: bit l % 32 of word l / 32 set = layer l windowed */
    int softmax_type;               /* --softmax-type: DG_ATTN_SOFTMAX_* (ops/dg_op_attention.h):
                                     * 0 vanilla, 1 off-by-one, 2 learnable: each layer's sink
                                     * logits self_attention.core_attention.softmax_offset [Hq] */
    /* multi-latent attention (issue 29) */
    int multi_latent_attention;     /* --multi-latent-attention: DeepSeek's MLA (dg_model_attn_project) */
    int q_lora_rank;                /* --q-lora-rank (0: Megatron's None, q is one linear_q_proj) */
    int kv_lora_rank;               /* --kv-lora-rank */
    int qk_head_dim;                /* --qk-head-dim: each head's q/k part without RoPE */
    int qk_pos_emb_head_dim;        /* --qk-pos-emb-head-dim: the RoPE part (k's shared by the heads) */
    int v_head_dim;                 /* --v-head-dim */
    int rope_yarn;                  /* YaRN frequencies (dg_op_rope.h): MLA's --rope-type yarn (its
                                     * default), or --position-embedding-type yarn on ordinary attention */
    double rotary_scaling_factor;   /* --rotary-scaling-factor (YaRN's factor; 1: none) */
    double mscale;                  /* --mscale (YaRN) */
    double mscale_all_dim;          /* --mscale-all-dim (YaRN; also MLA's softmax scale) */
    /* expert MLP variants (issue 29): the MLPs' (dense, routed experts, shared
     * expert) activation beyond mlp_gelu, as Megatron's activation_func with
     * gated_linear_unit; zero: SwiGLU / GeLU as mlp_gelu says */
    int quick_geglu;                /* --quick-geglu: quick_gelu(gate) * (linear + offset), a GLU */
    double glu_linear_offset;       /* --glu-linear-offset (0): added to the GLU's linear half */
    double activation_clamp;        /* --activation-func-clamp-value (0: none): gate clamped
                                     * above, linear half to [-c, c], before the GLU */
    /* multi-token prediction (issue 29; moe/dg_model_mtp.h) */
    int mtp_num_layers;             /* --mtp-num-layers: DeepSeek-V3's sequential MTP modules (0: none) */
    double mtp_loss_scaling_factor; /* --mtp-loss-scaling-factor (Megatron's 0.1): their losses' weight,
                                     * split evenly over the modules */
    /* YaRN on ordinary attention (--position-embedding-type yarn: rope_yarn
     * without MLA, position_embedding DG_MODEL_POS_ROPE), with
     * --rotary-scaling-factor, --mscale, --mscale-all-dim above; MLA keeps
     * DG_MODEL_YARN_* (Megatron's --yarn-* flags do not reach it); zero otherwise */
    int yarn_original_max_pos;      /* --yarn-original-max-position-embeddings (4096) */
    double yarn_beta_fast;          /* --yarn-beta-fast (32) */
    double yarn_beta_slow;          /* --yarn-beta-slow (1) */
    int yarn_unrounded;             /* --no-yarn-correction-range-round-to-int (gpt-oss) */
} dg_model_config;

/* --position-embedding-type (yarn is ROPE with rope_yarn) */
enum dg_model_pos { DG_MODEL_POS_ROPE = 0, DG_MODEL_POS_LEARNED = 1, DG_MODEL_POS_NONE = 2 };

/* A small MoE config: 2 layers, hidden 64, 4 heads / 2 groups, 4 experts top-2. */
void dg_model_config_tiny(dg_model_config *c);

/* Tensor ids of what a step needs from outside and what it produces. */
typedef struct dg_model_io {
    int tokens;   /* input  i32 [B, S] */
    int targets;  /* input  i32 [B, S] */
    int loss_mask;/* input  f32 [B, S] */
    int lm_loss;  /* f32 scalar: mean masked cross entropy */
    int aux_loss; /* f32 scalar: sum of load-balancing losses over layers (-1 if dense) */
    int z_loss;   /* f32 scalar: sum of router z-losses (-1 if dense) */
    int loss;     /* f32 scalar: lm + aux + z: what backward starts from; with
                   * per_token_loss lm + (aux + z) / (B S) (dg_model_build_forward) */
    /* Per layer: i32 [E] tokens routed to each expert (-1 for dense layers,
     * and for layers >= DG_MODEL_MAX_TRACKED). */
    int tokens_per_expert[64];
    /* input i32 [4] "rng_key" with hidden or attention dropout, router jitter or random
     * logits, else -1: seed, iteration,
     * global index of the micro-batch's first sample, 1 while training
     * (kernels/cpu/dg_cpu_dropout.h) */
    int rng_key;
    /* Per layer: input f32 [E] "decoder.layers.L.mlp.router.expert_bias" with
     * moe_expert_bias (-1 for dense layers, without the bias, and for layers
     * >= DG_MODEL_MAX_TRACKED, which the config check refuses then). */
    int expert_bias[64];
    /* Per MTP module d (depth d + 1; -1 past mtp_num_layers): the inputs
     * i32 "mtp_tokens_<d+1>", "mtp_targets_<d+1>" and f32 "mtp_loss_mask_<d+1>"
     * [B, S] (tokens, targets and mask shifted d + 1 to the left, zeros
     * past the end: Megatron's roll_tensor d + 1 times), and its loss, a
     * f32 scalar: the masked mean cross entropy of its prediction. */
    int mtp_tokens[8], mtp_targets[8], mtp_loss_mask[8], mtp_loss[8];
} dg_model_io;
#define DG_MODEL_MAX_TRACKED 64
/* MTP modules a model may have (dg_model_io's arrays). */
#define DG_MODEL_MAX_MTP 8
/* Layers a --moe-layer-freq list can describe (moe_layer_mask's bits). */
#define DG_MODEL_MAX_PATTERN_LAYERS 128

/* Parameter names follow Megatron-Core's state dict, e.g.
 *   embedding.word_embeddings.weight                     [V, H]
 *   decoder.layers.L.input_layernorm.weight              [H]
 *   decoder.layers.L.self_attention.linear_q.weight      [Hq*D, H]   (k, v: [Hkv*D, H])
 *   decoder.layers.L.self_attention.linear_proj.weight   [H, Hq*D]
 *   decoder.layers.L.pre_mlp_layernorm.weight            [H]
 *   decoder.layers.L.mlp.router.weight                   [E, H]
 *   decoder.layers.L.mlp.experts.linear_fc1.weight       [E, 2F, H]  (gate rows, then up rows)
 *   decoder.layers.L.mlp.experts.linear_fc2.weight       [E, H, F]
 *   decoder.layers.L.mlp.experts.linear_fc1.bias         [E, 2F]     (with biases; [E, F] GeLU)
 *   decoder.layers.L.mlp.experts.linear_fc2.bias         [E, H]      (with biases)
 *   decoder.layers.L.mlp.linear_fc1.weight               [2F, H]     (dense layers)
 *   decoder.final_layernorm.weight                       [H]
 *   output_layer.weight                                  [V, H]      (untied only)
 *   decoder.layers.L.self_attention.core_attention.softmax_offset [Hq] (--softmax-type learnable)
 *   embedding.position_embeddings.weight                 [P, H]      (learned positions)
 * With biases (add_bias_linear) every dense linear "X.weight" above has an
 * "X.bias" of its output size (linear_q/k/v, linear_proj, the dense MLP's
 * linear_fc1 / linear_fc2) and the routed experts have the two per-expert
 * biases above (Megatron's TEGroupedMLP keeps them in one [E, ...] tensor
 * each here, as it does the weights); the router has none, and the shared
 * expert takes none (Megatron's SharedExpertMLP refuses biases).
 * The MLPs (dense, routed experts, shared expert) all use the config's
 * activation (dg_model_mlp_act): fc1 [2F, H] for the gated ones (SwiGLU,
 * quick GeGLU), fc1 [F, H] for GeLU (the routed experts' fc1 [E, F, H]).
 * (Megatron fuses q, k and v into linear_qkv; they are separate here so
 * tensor parallelism can split each by heads without a reshuffle.)
 * Multi-latent attention (multi_latent_attention) has instead, with
 * Q = qk_head_dim + qk_pos_emb_head_dim, P = qk_pos_emb_head_dim:
 *   self_attention.linear_q_proj.weight       [Hq*Q, H]       (no q_lora_rank)
 *   self_attention.linear_q_down_proj.weight  [q_lora_rank, H] (replicated)
 *   self_attention.q_layernorm.weight         [q_lora_rank]  (--qk-layernorm)
 *   self_attention.linear_q_up_proj.weight    [Hq*Q, q_lora_rank]
 *   self_attention.linear_kv_down_proj.weight [kv_lora_rank + P, H] (replicated)
 *   self_attention.kv_layernorm.weight        [kv_lora_rank] (--qk-layernorm)
 *   self_attention.linear_kv_up_proj.weight   [Hq*(qk_head_dim + v_head_dim), kv_lora_rank]
 *   self_attention.linear_proj.weight         [H, Hq*v_head_dim]
 * (the local spec's names; as there, the latent norms exist only with
 * --qk-layernorm, and q has none without q_lora_rank; LayerNorm adds
 * ".bias"; MLA's linears have no biases but linear_proj's). */

/* Builder pieces shared by the training forward and the decode graph
 * (dg_model_decode.h), so both name and shape parameters identically:
 * a parameter named "<prefix><name>" (cut to the IR's name limit), and the
 * configured norm (RMSNorm, or LayerNorm with a bias) of x with parameters
 * "<prefix><name>.weight" / ".bias". */
/* What kind of weight a parameter is: says where it should live (its
 * placement, dg_tensor.place) and how it starts (dg_init):
 *   COLUMN        column-parallel linear [out, in]: out over tp
 *   COLUMN_GLU    SwiGLU's fused fc1 [gate; up]: out over tp, strided by 2
 *   ROW           row-parallel linear: in over tp; scaled init (it feeds the
 *                 residual stream: std / sqrt(2 L))
 *   VOCAB         word embedding, output layer [V, H]: V over tp
 *   EXPERTS_GLU   experts' fc1 [E, 2F, H]: E over ep, 2F over tp strided by 2
 *   EXPERTS_ROW   experts' fc2 [E, H, F]: E over ep, F over tp; scaled init
 *   EXPERTS_COLUMN      experts' GeLU fc1 [E, F, H]: E over ep, F over tp
 *   EXPERTS_GLU_BIAS    experts' gated fc1 bias [E, 2F]: zeros, E over ep,
 *                       2F over tp strided by 2
 *   EXPERTS_COLUMN_BIAS experts' GeLU fc1 bias [E, F]: zeros, E over ep, F over tp
 *   EXPERTS_ROW_BIAS    experts' fc2 bias [E, H]: zeros, E over ep, whole over
 *                       tp (added after fc2's all-reduce)
 *   NORM_WEIGHT   ones;  NORM_BIAS  zeros;  REPLICATED (the router)
 *   COLUMN_BIAS   a column-parallel linear's bias [out]: zeros, out over tp
 *   COLUMN_GLU_BIAS  SwiGLU fc1's bias [2F]: zeros, over tp strided by 2
 *   ROW_BIAS      a row-parallel linear's bias [out]: zeros, replicated
 *                 (added after the all-reduce, as RowParallelLinear does)
 *   POSITION      learned position embedding [P, H]: normal, replicated
 *   HEADS         one value per query head [Hq] (the learnable softmax
 *                 sink): normal (Megatron's init_method), heads over tp */
typedef enum dg_model_param_kind {
    DG_MODEL_PARAM_REPLICATED = 0,
    DG_MODEL_PARAM_COLUMN,
    DG_MODEL_PARAM_COLUMN_GLU,
    DG_MODEL_PARAM_ROW,
    DG_MODEL_PARAM_VOCAB,
    DG_MODEL_PARAM_EXPERTS_GLU,
    DG_MODEL_PARAM_EXPERTS_ROW,
    DG_MODEL_PARAM_NORM_WEIGHT,
    DG_MODEL_PARAM_NORM_BIAS,
    DG_MODEL_PARAM_COLUMN_BIAS,
    DG_MODEL_PARAM_COLUMN_GLU_BIAS,
    DG_MODEL_PARAM_ROW_BIAS,
    DG_MODEL_PARAM_POSITION,
    DG_MODEL_PARAM_HEADS,
    DG_MODEL_PARAM_EXPERTS_COLUMN,
    DG_MODEL_PARAM_EXPERTS_GLU_BIAS,
    DG_MODEL_PARAM_EXPERTS_COLUMN_BIAS,
    DG_MODEL_PARAM_EXPERTS_ROW_BIAS,
} dg_model_param_kind;
int dg_model_param(dg_graph *g, const char *prefix, const char *name, dg_model_param_kind kind,
                   int ndim, const int64_t *shape);
int dg_model_norm(dg_graph *g, const dg_model_config *c, const char *prefix, const char *name, int x);
/* The same norm over a last dim of size n (per-head and latent norms). */
int dg_model_norm_of(dg_graph *g, const dg_model_config *c, const char *prefix, const char *name, int x,
                     int64_t n);
/* Attention's projections, shared so both graphs name them alike: q
 * [B, L, Hq, D] and k, v [B, L, Hkv, D] from x [B, L, H] (before RoPE), and
 * the output projection's weight wo; dg_model_attn_output() turns the
 * attention's [B, L, Hq, D] into wo's [B, L, H]. */
typedef struct dg_model_qkv {
    int q, k, v, wo;
    int bo; /* linear_proj's bias, or -1 without biases */
} dg_model_qkv;
void dg_model_attn_project(dg_graph *g, const dg_model_config *c, const char *pre, int x,
                           int64_t B, int64_t L, dg_model_qkv *o);
int dg_model_attn_output(dg_graph *g, const dg_model_config *c, int a, int64_t B, int64_t L,
                         const dg_model_qkv *p);

/* SwiGLU MLP fc2(swiglu(fc1 x)) with parameters "<pre><what>.linear_fc1.weight"
 * [2F, H] (gate rows, then up rows) and "<pre><what>.linear_fc2.weight" [H, F]. */
int dg_model_swiglu_mlp(dg_graph *g, const char *pre, const char *what, int x, int64_t H,
                        int64_t F);
/* The dense MLP c asks for: SwiGLU, GeLU (tanh approximation, Megatron's
 * fused bias_gelu) or quick GeGLU, with the GLU offset and clamp, and with
 * biases under add_bias_linear. */
int dg_model_mlp(dg_graph *g, const dg_model_config *c, const char *pre, const char *what, int x,
                 int64_t F);
/* x plus the learned position embedding of positions 0..S-1 (training) when
 * c asks for one; x unchanged otherwise. */
int dg_model_add_positions(dg_graph *g, const dg_model_config *c, int x);

/* The MLPs' activation c asks for (ops/dg_op_glu.h's dg_mlp_act):
 * quick_geglu, else GeLU under mlp_gelu, else SwiGLU. */
int dg_model_mlp_act(const dg_model_config *c);

/* The MLP with c's activation and GLU options; biases only when with_bias
 * (the shared expert has none). */
int dg_model_mlp_biased(dg_graph *g, const dg_model_config *c, const char *pre, const char *what, int x,
                        int64_t F, int with_bias);

struct dg_moe_expert_mlp;
/* The routed experts' parameters of layer `pre` (fc1, fc2 and, under
 * add_bias_linear, their biases; shapes and kinds by the activation) and
 * their variant m, shared by the training forward and the decode graph. */
void dg_model_expert_params(dg_graph *g, const dg_model_config *c, const char *pre, struct dg_moe_expert_mlp *m,
                            int *w1, int *w2);

struct dg_router_opts;
/* The router settings c asks for (moe/dg_router.h), shared by the training
 * forward and the decode graph. */
void dg_model_router_opts(const dg_model_config *c, struct dg_router_opts *o);

/* The window of layer l's attention (0: none), by --window-size and
 * --window-attn-skip-freq as Megatron's is_layer_window_attention. */
int dg_model_layer_window(const dg_model_config *c, int l);

/* YaRN's fixed settings under MLA: MLATransformerConfig's defaults, which
 * Megatron's flags do not reach (its --yarn-* flags are for non-MLA yarn). */
#define DG_MODEL_YARN_ORIGINAL_MAX_POS 4096
#define DG_MODEL_YARN_BETA_FAST 32.0
#define DG_MODEL_YARN_BETA_SLOW 1.0

/* The YaRN options of ordinary attention's rope (plain unless rope_yarn):
 * Megatron's YarnRotaryEmbedding with the attention's concentration factor
 * mscale(factor, --mscale) / mscale(factor, --mscale-all-dim) on cos and
 * sin; the softmax scale stays 1/sqrt(head dim). */
struct dg_rope_yarn_opts;
void dg_model_yarn_opts(const dg_model_config *c, struct dg_rope_yarn_opts *y);

/* MLA's softmax scale: mscale(--rotary-scaling-factor, --mscale-all-dim)^2 /
 * sqrt(qk_head_dim + qk_pos_emb_head_dim), as Megatron's MultiLatentAttention
 * (under --rope-type rope too). */
double dg_model_mla_softmax_scale(const dg_model_config *c);

/* Each attention head's size: --kv-channels, or hidden / heads. */
int64_t dg_model_head_dim(const dg_model_config *c);

/* The rotary dim RoPE uses: head dim x --rotary-percent (Megatron's
 * int(kv_channels * rotary_percent)), the whole head dim for 0 or 1. */
int64_t dg_model_rotary_dim(const dg_model_config *c);

/* Is layer l an MoE layer under c (num_experts > 0 and the layer frequency)?
 * A layer l >= num_layers is an MTP module's (dg_model_mtp.h), which is
 * what the last decoder layer is, as Megatron builds it from that layer's spec. */
int dg_model_layer_is_moe(const dg_model_config *c, int l);

/* The layers the graph stamps: the decoder's num_layers, then one per MTP
 * module (layer num_layers + d for module d). */
int dg_model_total_layers(const dg_model_config *c);

/* The parameter-name prefix of stamped layer l, as Megatron's state dict:
 * "decoder.layers.<l>." for the decoder's, "mtp.layers.<d>.transformer_layer."
 * for MTP module d's (l = num_layers + d). */
void dg_model_layer_prefix(const dg_model_config *c, int l, char *out, size_t cap);

/* Where one transformer layer's random draws come from (sites of the
 * counter-based draws, ops/dg_op_dropout.h): hidden dropout after its
 * attention and after its MLP, attention dropout on the probabilities,
 * the router's input jitter and random logits. Decoder layer l of L:
 * 1 + 2l, 2 + 2l, 1 + 2L + l, 1 + 3L + l, 1 + 4L + l (site 0: the embedding);
 * MTP modules take theirs after 5L (dg_model_mtp.c). */
typedef struct dg_model_sites {
    int attn_out, mlp_out, attn_probs, router_jitter, router_logits;
} dg_model_sites;

/* What one transformer layer adds to the micro-batch's outputs: its MoE
 * losses summed into *aux / *z (-1: none yet), and for an MoE layer its
 * tokens-per-expert counts and its expert-bias input (-1 otherwise). */
typedef struct dg_model_layer_io {
    int aux, z, counts, bias;
} dg_model_layer_io;

/* One pre-norm transformer layer (norm, attention, residual, norm, MLP or
 * MoE by dg_model_layer_is_moe(c, l), residual) on x [B, S, H], its
 * parameters named "<pre>...", its nodes stamped with layer l; key: the
 * "rng_key" input (-1 without draws). Returns the layer's output. */
int dg_model_layer(dg_graph *g, const dg_model_config *c, const char *pre, int l, int x, int key,
                   const dg_model_sites *s, dg_model_layer_io *o);

/* Check the config's consistency (heads divide hidden size, groups divide
 * heads, top-k <= experts, ...). Returns DG_OK or DG_EINPUT naming both flags. */
int dg_model_config_check(const dg_model_config *c, dg_err *err);

/* Build the logical forward graph of one micro-batch into g (see the top of
 * this file). Parameters are looked up by name, so a second call on the
 * same g shares them. Returns DG_OK, or DG_EINPUT with err naming the
 * inconsistent setting. */
int dg_model_build_forward(dg_graph *g, const dg_model_config *c, dg_model_io *io, dg_err *err);

#endif /* DG_MODEL_H */
