/* dg_model.c — lower the Mixtral-style decoder into graph nodes (see dg_model.h). */
#include "dg_model.h"
#include "dg_model_mla.h"
#include "dg_model_mtp.h"

#include <math.h>
#include <string.h>

#include "dg_module.h"
#include "dg_moe_experts.h"
#include "dg_moe_loss.h"
#include "dg_op_attention.h"
#include "dg_op_attn_key.h"
#include "dg_op_attn_unfused.h"
#include "dg_ops.h"
#include "dg_router.h"

void dg_model_config_tiny(dg_model_config *c) {
    memset(c, 0, sizeof *c);
    c->num_layers = 2;
    c->hidden_size = 64;
    c->ffn_hidden_size = 128;
    c->num_attention_heads = 4;
    c->num_query_groups = 2;
    c->seq_length = 32;
    c->micro_batch_size = 2;
    c->vocab_size = 256;
    c->num_experts = 4;
    c->moe_router_topk = 2;
    c->moe_ffn_hidden_size = 96;
    c->moe_aux_loss_coeff = 1e-2;
    c->moe_z_loss_coeff = 1e-3;
    c->rope_base = 10000.0;
    c->norm_epsilon = 1e-5;
    c->untie_embeddings = 1;
    c->moe_layer_freq = 1;
}

int64_t dg_model_head_dim(const dg_model_config *c) {
    return c->kv_channels > 0 ? c->kv_channels : c->hidden_size / DG_MAX(c->num_attention_heads, 1);
}

int64_t dg_model_rotary_dim(const dg_model_config *c) {
    int64_t D = dg_model_head_dim(c);
    if (!(c->rotary_percent > 0) || c->rotary_percent >= 1.0) return D;
    return (int64_t)((double)D * c->rotary_percent);
}

void dg_model_router_opts(const dg_model_config *c, dg_router_opts *o) {
    *o = dg_router_opts_default(c->moe_router_topk);
    o->score = c->score_function_sigmoid ? DG_MOE_SCORE_SIGMOID : DG_MOE_SCORE_SOFTMAX;
    o->pre_softmax = c->router_pre_softmax;
    o->capacity_factor = c->moe_capacity_factor;
    o->drop_policy = c->moe_token_drop_policy ? DG_MOE_DROP_POSITION : DG_MOE_DROP_PROBS;
    o->scaling_factor = c->moe_router_topk_scaling_factor;
    o->num_groups = c->moe_router_num_groups;
    o->group_topk = c->moe_router_group_topk;
}

int dg_model_total_layers(const dg_model_config *c) { return c->num_layers + DG_MAX(c->mtp_num_layers, 0); }

void dg_model_layer_prefix(const dg_model_config *c, int l, char *out, size_t cap) {
    if (l < c->num_layers) snprintf(out, cap, "decoder.layers.%d.", l);
    else snprintf(out, cap, "mtp.layers.%d.transformer_layer.", l - c->num_layers);
}

int dg_model_layer_is_moe(const dg_model_config *c, int l) {
    if (c->num_experts <= 0) return 0;
    if (l >= c->num_layers && c->num_layers > 0) l = c->num_layers - 1; /* an MTP module's layer */
    if (c->moe_layer_freq > 0) return l % c->moe_layer_freq == 0;
    if (l < 0 || l >= DG_MODEL_MAX_PATTERN_LAYERS) return 0;
    return (c->moe_layer_mask[l / 32] >> (l % 32)) & 1;
}

int dg_model_layer_window(const dg_model_config *c, int l) {
    if (c->attn_window <= 0) return 0;
    if (c->window_attn_skip_freq > 0) return (l + 1) % c->window_attn_skip_freq ? c->attn_window : 0;
    if (c->window_attn_skip_freq == 0) return c->attn_window;
    if (l < 0 || l >= DG_MODEL_MAX_PATTERN_LAYERS) return 0;
    return (c->window_attn_mask[l / 32] >> (l % 32)) & 1 ? c->attn_window : 0;
}

int dg_model_config_check(const dg_model_config *c, dg_err *err) {
#define NEED(cond, ...) \
    if (!(cond)) return dg_err_set(err, DG_EINPUT, __VA_ARGS__)
    NEED(c->num_layers > 0, "--num-layers: expected > 0, got %d", c->num_layers);
    NEED(c->hidden_size > 0, "--hidden-size: expected > 0, got %d", c->hidden_size);
    NEED(c->num_attention_heads > 0, "--num-attention-heads: expected > 0, got %d",
         c->num_attention_heads);
    NEED(c->kv_channels > 0 || c->hidden_size % c->num_attention_heads == 0,
         "--num-attention-heads %d does not divide --hidden-size %d (or give the head size: --kv-channels)",
         c->num_attention_heads, c->hidden_size);
    NEED(c->kv_channels >= 0, "--kv-channels: expected > 0, got %d", c->kv_channels);
    NEED(c->position_embedding >= DG_MODEL_POS_ROPE && c->position_embedding <= DG_MODEL_POS_NONE,
         "--position-embedding-type: unknown kind %d", c->position_embedding);
    NEED(c->position_embedding != DG_MODEL_POS_LEARNED || c->max_position_embeddings <= 0 ||
             c->max_position_embeddings >= c->seq_length,
         "--seq-length %d exceeds --max-position-embeddings %d", c->seq_length,
         c->max_position_embeddings);
    if (c->multi_latent_attention) DG_TRY(dg_model_mla_check(c, err)); /* its own RoPE on its own dims */
    DG_TRY(dg_model_mtp_check(c, err));
    NEED(!c->multi_latent_attention || (c->attn_window == 0 && c->softmax_type == 0),
         "--multi-latent-attention with %s: not supported (MLA's attention has no window or sink yet)",
         c->attn_window > 0 ? "--window-size" : "--softmax-type");
    if (c->position_embedding == DG_MODEL_POS_ROPE && !c->multi_latent_attention) {
    NEED(dg_model_head_dim(c) % 2 == 0, "head size %lld (--kv-channels, or --hidden-size / --num-attention-heads) "
         "is odd; RoPE needs it even", (long long)dg_model_head_dim(c));
    NEED(!(c->rotary_percent < 0 || c->rotary_percent > 1),
         "--rotary-percent: expected a value in (0, 1], got %g", c->rotary_percent);
    NEED(dg_model_rotary_dim(c) >= 2 && dg_model_rotary_dim(c) % 2 == 0,
         "--rotary-percent %g of head size %d gives rotary dim %lld; it must be even and >= 2",
         c->rotary_percent, (int)dg_model_head_dim(c), (long long)dg_model_rotary_dim(c));
    NEED(!c->rope_yarn || dg_model_rotary_dim(c) == dg_model_head_dim(c),
         "--position-embedding-type yarn with --rotary-percent %g: not supported (Megatron's YaRN rotates the "
         "whole head and ignores it)", c->rotary_percent);
    NEED(!c->rope_yarn || (c->rotary_scaling_factor > 0 && c->yarn_beta_fast > 0 && c->yarn_beta_slow > 0 &&
                           c->yarn_original_max_pos > 0),
         "--position-embedding-type yarn: --rotary-scaling-factor, --yarn-beta-fast, --yarn-beta-slow and "
         "--yarn-original-max-position-embeddings must be > 0, got %g, %g, %g, %d", c->rotary_scaling_factor,
         c->yarn_beta_fast, c->yarn_beta_slow, c->yarn_original_max_pos);
    }
    NEED(c->num_query_groups > 0 && c->num_attention_heads % c->num_query_groups == 0,
         "--num-query-groups %d does not divide --num-attention-heads %d", c->num_query_groups,
         c->num_attention_heads);
    NEED(c->hidden_dropout >= 0 && c->hidden_dropout < 1, "--hidden-dropout: expected [0, 1), got %g",
         c->hidden_dropout);
    NEED(c->attention_dropout >= 0 && c->attention_dropout < 1, "--attention-dropout %g: expected [0, 1)",
         c->attention_dropout);
    NEED(c->attn_window >= 0, "--window-size: expected a window >= 0, got %d", c->attn_window);
    NEED(c->softmax_type >= DG_ATTN_SOFTMAX_VANILLA && c->softmax_type <= DG_ATTN_SOFTMAX_LEARNABLE,
         "--softmax-type: expected vanilla, off-by-one or learnable, got %d", c->softmax_type);
    NEED(!c->attention_unfused || (c->attn_window == 0 && c->softmax_type == DG_ATTN_SOFTMAX_VANILLA),
         "--attention-backend unfused/local with %s: not supported: the window and the sink are built in the fused "
         "attention (pass --attention-backend auto)", c->attn_window ? "--window-size" : "--softmax-type");
    NEED(c->window_attn_skip_freq >= 0 || c->num_layers <= DG_MODEL_MAX_PATTERN_LAYERS,
         "--window-attn-skip-freq: a list describes at most %d layers, --num-layers is %d",
         DG_MODEL_MAX_PATTERN_LAYERS, c->num_layers);
    NEED(c->seq_length > 0, "--seq-length: expected > 0, got %d", c->seq_length);
    NEED(c->micro_batch_size > 0, "--micro-batch-size: expected > 0, got %d", c->micro_batch_size);
    NEED(c->vocab_size > 1, "--vocab-size: expected > 1, got %d", c->vocab_size);
    if (c->num_experts > 0) {
        NEED(c->moe_router_topk >= 1 && c->moe_router_topk <= c->num_experts,
             "--moe-router-topk %d must be in [1, --num-experts %d]", c->moe_router_topk,
             c->num_experts);
        NEED(c->moe_router_topk <= DG_ROUTER_MAX_TOPK, "--moe-router-topk %d exceeds %d",
             c->moe_router_topk, DG_ROUTER_MAX_TOPK);
        NEED(c->moe_ffn_hidden_size > 0, "--moe-ffn-hidden-size: expected > 0, got %d",
             c->moe_ffn_hidden_size);
        NEED(c->moe_layer_freq > 0 || c->num_layers <= DG_MODEL_MAX_PATTERN_LAYERS,
             "--moe-layer-freq: a list describes at most %d layers, --num-layers is %d",
             DG_MODEL_MAX_PATTERN_LAYERS, c->num_layers);
        if (c->moe_router_num_groups > 0) {
            NEED(c->num_experts % c->moe_router_num_groups == 0,
                 "--moe-router-num-groups %d does not divide --num-experts %d",
                 c->moe_router_num_groups, c->num_experts);
            NEED(c->moe_router_group_topk >= 1 && c->moe_router_group_topk <= c->moe_router_num_groups,
                 "--moe-router-group-topk %d must be in [1, --moe-router-num-groups %d]",
                 c->moe_router_group_topk, c->moe_router_num_groups);
            NEED(c->moe_router_topk <= c->moe_router_group_topk * (c->num_experts / c->moe_router_num_groups),
                 "--moe-router-topk %d exceeds the experts of --moe-router-group-topk %d groups",
                 c->moe_router_topk, c->moe_router_group_topk);
        }
        NEED(!(c->router_pre_softmax && c->score_function_sigmoid),
             "--moe-router-pre-softmax applies to --moe-router-score-function softmax only");
        NEED(!c->moe_expert_bias || c->score_function_sigmoid,
             "--moe-router-enable-expert-bias needs --moe-router-score-function sigmoid (as Megatron)");
        NEED(!c->moe_expert_bias || c->num_layers <= DG_MODEL_MAX_TRACKED,
             "--moe-router-enable-expert-bias: at most %d layers, --num-layers is %d", DG_MODEL_MAX_TRACKED,
             c->num_layers);
        NEED(c->moe_input_jitter_eps >= 0 && c->moe_input_jitter_eps < 1,
             "--moe-input-jitter-eps: expected [0, 1), got %g", c->moe_input_jitter_eps);
        /* Megatron's SharedExpertMLP asserts add_bias_linear is off */
        NEED(!(c->moe_shared_expert_size > 0 && c->add_bias_linear),
             "--moe-shared-expert-intermediate-size %d: the shared expert takes no biases (as Megatron's "
             "SharedExpertMLP); pass --disable-bias-linear", c->moe_shared_expert_size);
    }
    NEED(!(c->quick_geglu && c->mlp_gelu), "--quick-geglu: a gated MLP, not GeLU (mlp_gelu must be 0)");
    NEED(c->glu_linear_offset == 0 || c->quick_geglu,
         "--glu-linear-offset %g: only with --quick-geglu (Megatron's fused GLUs take no offset otherwise)",
         c->glu_linear_offset);
    NEED(c->activation_clamp >= 0 && c->activation_clamp < 1e30,
         "--activation-func-clamp-value %g: expected a finite value > 0", c->activation_clamp);
    NEED(!(c->activation_clamp > 0 && !c->quick_geglu && !c->mlp_gelu && c->num_experts <= 0),
         "--activation-func-clamp-value %g: with --swiglu only in MoE models (as Megatron), got --num-experts 0",
         c->activation_clamp);
    int any_dense = 0;
    for (int l = 0; l < c->num_layers; l++) any_dense |= !dg_model_layer_is_moe(c, l);
    if (any_dense)
        NEED(c->ffn_hidden_size > 0, "--ffn-hidden-size: expected > 0 for dense layers, got %d",
             c->ffn_hidden_size);
#undef NEED
    return DG_OK;
}

/* Placement and init of each kind (dg_model.h). */
static dg_param_spec param_spec(dg_model_param_kind kind) {
    dg_param_spec s;
    memset(&s, 0, sizeof s);
    switch (kind) {
    case DG_MODEL_PARAM_NORM_WEIGHT: s.init = DG_INIT_ONES; break;
    case DG_MODEL_PARAM_NORM_BIAS: s.init = DG_INIT_ZEROS; break;
    case DG_MODEL_PARAM_COLUMN: s.place.split[0] = DG_AXIS_TP; break;
    case DG_MODEL_PARAM_COLUMN_GLU:
        s.place.split[0] = DG_AXIS_TP;
        s.place.stride[0] = 2;
        break;
    case DG_MODEL_PARAM_ROW:
        s.init = DG_INIT_SCALED_NORMAL;
        s.place.split[1] = DG_AXIS_TP;
        break;
    case DG_MODEL_PARAM_VOCAB: s.place.split[0] = DG_AXIS_TP; break;
    case DG_MODEL_PARAM_EXPERTS_GLU:
        s.place.split[0] = DG_AXIS_EP;
        s.place.split[1] = DG_AXIS_TP;
        s.place.stride[1] = 2;
        break;
    case DG_MODEL_PARAM_EXPERTS_ROW:
        s.init = DG_INIT_SCALED_NORMAL;
        s.place.split[0] = DG_AXIS_EP;
        s.place.split[2] = DG_AXIS_TP;
        break;
    case DG_MODEL_PARAM_COLUMN_BIAS:
        s.init = DG_INIT_ZEROS;
        s.place.split[0] = DG_AXIS_TP;
        break;
    case DG_MODEL_PARAM_COLUMN_GLU_BIAS:
        s.init = DG_INIT_ZEROS;
        s.place.split[0] = DG_AXIS_TP;
        s.place.stride[0] = 2;
        break;
    case DG_MODEL_PARAM_ROW_BIAS: s.init = DG_INIT_ZEROS; break;
    case DG_MODEL_PARAM_EXPERTS_COLUMN:
        s.place.split[0] = DG_AXIS_EP;
        s.place.split[1] = DG_AXIS_TP;
        break;
    case DG_MODEL_PARAM_EXPERTS_GLU_BIAS:
        s.init = DG_INIT_ZEROS;
        s.place.split[0] = DG_AXIS_EP;
        s.place.split[1] = DG_AXIS_TP;
        s.place.stride[1] = 2;
        break;
    case DG_MODEL_PARAM_EXPERTS_COLUMN_BIAS:
        s.init = DG_INIT_ZEROS;
        s.place.split[0] = DG_AXIS_EP;
        s.place.split[1] = DG_AXIS_TP;
        break;
    case DG_MODEL_PARAM_EXPERTS_ROW_BIAS:
        s.init = DG_INIT_ZEROS;
        s.place.split[0] = DG_AXIS_EP;
        break;
    case DG_MODEL_PARAM_POSITION: break; /* normal(init_method_std), replicated */
    case DG_MODEL_PARAM_HEADS: s.place.split[0] = DG_AXIS_TP; break; /* normal, as q's heads */
    case DG_MODEL_PARAM_REPLICATED: break;
    }
    return s;
}

int dg_model_param(dg_graph *g, const char *prefix, const char *name, dg_model_param_kind kind,
                   int ndim, const int64_t *shape) {
    char full[2 * DG_NAME_LEN];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    full[DG_NAME_LEN - 1] = 0; /* names are cut to the IR's limit */
    dg_param_spec spec = param_spec(kind);
    return dg_param(g, full, ndim, shape, &spec);
}

/* The model's norm (--normalization) over the last dim, of size H, of x:
 * "<prefix><name>.weight" (and ".bias" for LayerNorm). */
static int norm_of(dg_graph *g, const dg_model_config *c, const char *prefix, const char *name, int x, int64_t H) {
    char wname[2 * DG_NAME_LEN];
    snprintf(wname, sizeof wname, "%s.weight", name);
    int w = dg_model_param(g, prefix, wname, DG_MODEL_PARAM_NORM_WEIGHT, 1, DG_SHAPE(H));
    if (!c->normalization_layernorm) return dg_rmsnorm(g, x, w, c->norm_epsilon);
    snprintf(wname, sizeof wname, "%s.bias", name);
    int b = dg_model_param(g, prefix, wname, DG_MODEL_PARAM_NORM_BIAS, 1, DG_SHAPE(H));
    return dg_layernorm(g, x, w, b, c->norm_epsilon);
}

int dg_model_norm_of(dg_graph *g, const dg_model_config *c, const char *prefix, const char *name, int x,
                     int64_t n) {
    return norm_of(g, c, prefix, name, x, n);
}

int dg_model_norm(dg_graph *g, const dg_model_config *c, const char *prefix, const char *name, int x) {
    return norm_of(g, c, prefix, name, x, c->hidden_size);
}

/* The bias parameter "<pre><base>.bias" [out] of a linear of the given kind
 * when c has biases, else -1. */
static int linear_bias(dg_graph *g, const dg_model_config *c, const char *pre, const char *base,
                       dg_model_param_kind kind, int64_t out) {
    if (!c->add_bias_linear) return -1;
    char n[2 * DG_NAME_LEN];
    snprintf(n, sizeof n, "%s.bias", base);
    dg_model_param_kind bk = kind == DG_MODEL_PARAM_ROW          ? DG_MODEL_PARAM_ROW_BIAS
                             : kind == DG_MODEL_PARAM_COLUMN_GLU ? DG_MODEL_PARAM_COLUMN_GLU_BIAS
                                                                 : DG_MODEL_PARAM_COLUMN_BIAS;
    return dg_model_param(g, pre, n, bk, 1, DG_SHAPE(out));
}

/* Megatron's linear layer "<pre><base>": x W^T (+ b), W [out, in]. */
static int model_linear(dg_graph *g, const dg_model_config *c, const char *pre, const char *base,
                        dg_model_param_kind kind, int64_t out, int64_t in, int x) {
    char n[2 * DG_NAME_LEN];
    snprintf(n, sizeof n, "%s.weight", base);
    int w = dg_model_param(g, pre, n, kind, 2, DG_SHAPE(out, in));
    int b = linear_bias(g, c, pre, base, kind, out);
    int y = dg_linear(g, x, w);
    return b >= 0 ? dg_bias_add(g, y, b) : y;
}

void dg_model_attn_project(dg_graph *g, const dg_model_config *c, const char *pre, int x,
                           int64_t B, int64_t L, dg_model_qkv *o) {
    int64_t H = c->hidden_size, Hq = c->num_attention_heads, Hkv = c->num_query_groups, D = dg_model_head_dim(c);
    int q = model_linear(g, c, pre, "self_attention.linear_q", DG_MODEL_PARAM_COLUMN, Hq * D, H, x);
    int k = model_linear(g, c, pre, "self_attention.linear_k", DG_MODEL_PARAM_COLUMN, Hkv * D, H, x);
    int v = model_linear(g, c, pre, "self_attention.linear_v", DG_MODEL_PARAM_COLUMN, Hkv * D, H, x);
    o->wo = dg_model_param(g, pre, "self_attention.linear_proj.weight", DG_MODEL_PARAM_ROW, 2, DG_SHAPE(H, Hq * D));
    o->bo = linear_bias(g, c, pre, "self_attention.linear_proj", DG_MODEL_PARAM_ROW, H);
    o->q = dg_reshape(g, q, 4, DG_SHAPE(B, L, Hq, D));
    o->k = dg_reshape(g, k, 4, DG_SHAPE(B, L, Hkv, D));
    o->v = dg_reshape(g, v, 4, DG_SHAPE(B, L, Hkv, D));
    if (c->qk_layernorm) { /* over each head's D, one weight [D] shared by the heads (Megatron's q/k_layernorm) */
        o->q = norm_of(g, c, pre, "self_attention.q_layernorm", o->q, D);
        o->k = norm_of(g, c, pre, "self_attention.k_layernorm", o->k, D);
    }
}

int dg_model_attn_output(dg_graph *g, const dg_model_config *c, int a, int64_t B, int64_t L,
                         const dg_model_qkv *p) {
    int mod = g->cur_module; /* the output reshape belongs to core attention, the projection not */
    dg_graph_set_module(g, DG_MODULE_CORE_ATTN);
    int r = dg_reshape(g, a, 3, DG_SHAPE(B, L, c->num_attention_heads * dg_model_head_dim(c)));
    dg_graph_set_module(g, mod);
    int y = dg_linear(g, r, p->wo);
    return p->bo >= 0 ? dg_bias_add(g, y, p->bo) : y;
}

void dg_model_yarn_opts(const dg_model_config *c, dg_rope_yarn_opts *y) {
    memset(y, 0, sizeof *y);
    y->mscale = 1.0;
    if (!c->rope_yarn) return;
    y->factor = c->rotary_scaling_factor;
    y->beta_fast = c->yarn_beta_fast;
    y->beta_slow = c->yarn_beta_slow;
    y->mscale = dg_rope_yarn_mscale(c->rotary_scaling_factor, c->mscale, c->mscale_all_dim);
    y->original_max_position_embeddings = c->yarn_original_max_pos;
    y->unrounded = c->yarn_unrounded;
}

/* Causal GQA self-attention with RoPE on x [B, S, H] of layer l; returns
 * [B, S, H]. The fused op (with layer l's window and the softmax sink c
 * asks for), or (attention_unfused) the chain of Megatron's unfused
 * attention; either way the probabilities go through dropout `site` when
 * attention_dropout > 0 (key: the graph's rng_key; the fused op's draws
 * the unfused chain's mask: ops/dg_op_attention.h). */
static int attention_block(dg_graph *g, const dg_model_config *c, const char *pre, int l, int x, int key, int site) {
    if (c->multi_latent_attention) return dg_model_mla_attention(g, c, pre, x, key, site);
    int64_t B = dg_Tc(g, x)->shape[0], S = dg_Tc(g, x)->shape[1];
    int64_t D = dg_model_head_dim(c);
    dg_model_qkv p;
    dg_model_attn_project(g, c, pre, x, B, S, &p);
    int q = p.q, k = p.k;
    if (c->position_embedding == DG_MODEL_POS_ROPE) {
        dg_rope_yarn_opts y;
        dg_model_yarn_opts(c, &y);
        q = dg_rope_yarn(g, p.q, c->rope_base, dg_model_rotary_dim(c), &y);
        k = dg_rope_yarn(g, p.k, c->rope_base, dg_model_rotary_dim(c), &y);
    }
    dg_graph_set_module(g, DG_MODULE_CORE_ATTN);
    double scale = 1.0 / sqrt((double)D);
    int sink = -1;
    if (c->softmax_type == DG_ATTN_SOFTMAX_LEARNABLE)
        sink = dg_model_param(g, pre, "self_attention.core_attention.softmax_offset", DG_MODEL_PARAM_HEADS, 1,
                              DG_SHAPE(c->num_attention_heads));
    int a = c->attention_unfused
                ? dg_attention_unfused(g, q, k, p.v, 1, scale, c->attention_dropout, key, site)
                : dg_attention_opt(g, q, k, p.v,
                                   &(dg_attn_opts){.causal = 1, .scale = scale, .window = dg_model_layer_window(c, l),
                                                   .softmax = c->softmax_type, .sink = sink,
                                                   .dropout = c->attention_dropout,
                                                   .key = c->attention_dropout > 0 ? dg_attn_key(g, key, -1, 0) : -1,
                                                   .site = site},
                                   NULL);
    dg_graph_set_module(g, DG_MODULE_ATTN);
    return dg_model_attn_output(g, c, a, B, S, &p);
}

int dg_model_swiglu_mlp(dg_graph *g, const char *pre, const char *what, int x, int64_t H,
                        int64_t F) {
    char n1[2 * DG_NAME_LEN], n2[2 * DG_NAME_LEN];
    snprintf(n1, sizeof n1, "%s.linear_fc1.weight", what);
    snprintf(n2, sizeof n2, "%s.linear_fc2.weight", what);
    int w1 = dg_model_param(g, pre, n1, DG_MODEL_PARAM_COLUMN_GLU, 2, DG_SHAPE(2 * F, H));
    int w2 = dg_model_param(g, pre, n2, DG_MODEL_PARAM_ROW, 2, DG_SHAPE(H, F));
    return dg_linear(g, dg_swiglu(g, dg_linear(g, x, w1)), w2);
}

int dg_model_mlp_act(const dg_model_config *c) {
    return c->quick_geglu ? DG_MLP_QUICK_GEGLU : c->mlp_gelu ? DG_MLP_GELU : DG_MLP_SWIGLU;
}

int dg_model_mlp_biased(dg_graph *g, const dg_model_config *c, const char *pre, const char *what, int x,
                        int64_t F, int with_bias) {
    int64_t H = c->hidden_size;
    dg_mlp_act act = (dg_mlp_act)dg_model_mlp_act(c);
    if (act == DG_MLP_SWIGLU && !with_bias && !(c->activation_clamp > 0)) return dg_model_swiglu_mlp(g, pre, what, x, H, F);
    dg_model_config cb = *c; /* model_linear reads the biases from the config */
    cb.add_bias_linear = with_bias;
    char n1[2 * DG_NAME_LEN], n2[2 * DG_NAME_LEN];
    snprintf(n1, sizeof n1, "%s.linear_fc1", what);
    snprintf(n2, sizeof n2, "%s.linear_fc2", what);
    int u = act == DG_MLP_GELU ? model_linear(g, &cb, pre, n1, DG_MODEL_PARAM_COLUMN, F, H, x)
                               : model_linear(g, &cb, pre, n1, DG_MODEL_PARAM_COLUMN_GLU, 2 * F, H, x);
    u = dg_mlp_activation(g, u, act, c->glu_linear_offset, c->activation_clamp);
    return model_linear(g, &cb, pre, n2, DG_MODEL_PARAM_ROW, H, F, u);
}

int dg_model_mlp(dg_graph *g, const dg_model_config *c, const char *pre, const char *what, int x,
                 int64_t F) {
    return dg_model_mlp_biased(g, c, pre, what, x, F, c->add_bias_linear);
}

void dg_model_expert_params(dg_graph *g, const dg_model_config *c, const char *pre, dg_moe_expert_mlp *m, int *w1,
                            int *w2) {
    int64_t E = c->num_experts, F = c->moe_ffn_hidden_size, H = c->hidden_size;
    *m = dg_moe_expert_mlp_swiglu();
    m->act = (dg_mlp_act)dg_model_mlp_act(c);
    m->glu_offset = c->glu_linear_offset;
    m->clamp = c->activation_clamp;
    int64_t WF = dg_mlp_act_width(m->act) * F;
    int gated = dg_mlp_act_width(m->act) == 2;
    /* all E experts' weights: the EP pass makes them this rank's slice */
    *w1 = dg_model_param(g, pre, "mlp.experts.linear_fc1.weight",
                         gated ? DG_MODEL_PARAM_EXPERTS_GLU : DG_MODEL_PARAM_EXPERTS_COLUMN, 3, DG_SHAPE(E, WF, H));
    *w2 = dg_model_param(g, pre, "mlp.experts.linear_fc2.weight", DG_MODEL_PARAM_EXPERTS_ROW, 3, DG_SHAPE(E, H, F));
    if (!c->add_bias_linear) return;
    m->b1 = dg_model_param(g, pre, "mlp.experts.linear_fc1.bias",
                           gated ? DG_MODEL_PARAM_EXPERTS_GLU_BIAS : DG_MODEL_PARAM_EXPERTS_COLUMN_BIAS, 2,
                           DG_SHAPE(E, WF));
    m->b2 = dg_model_param(g, pre, "mlp.experts.linear_fc2.bias", DG_MODEL_PARAM_EXPERTS_ROW_BIAS, 2, DG_SHAPE(E, H));
}

int dg_model_add_positions(dg_graph *g, const dg_model_config *c, int x) {
    if (c->position_embedding != DG_MODEL_POS_LEARNED) return x;
    int64_t P = c->max_position_embeddings > 0 ? c->max_position_embeddings : c->seq_length;
    int t = dg_model_param(g, "", "embedding.position_embeddings.weight", DG_MODEL_PARAM_POSITION, 2,
                           DG_SHAPE(P, c->hidden_size));
    return dg_pos_embed_add(g, x, t);
}

/* The router's logits [T, E] of x [B, S, H] (T = B S), as Megatron's
 * TopKRouter.forward: the input jittered (--moe-input-jitter-eps; the
 * experts see x itself), the gating linear, and with
 * --moe-router-force-load-balancing normal draws in place of the logits.
 * Both draws are per (sample, element) of [B, S, .] (ops/dg_op_dropout.h):
 * every layout draws one rank's numbers. wr: the router's weight [E, H];
 * xt: x as [T, H]; key: the "rng_key" input; s the layer's sites. */
static int router_logits(dg_graph *g, const dg_model_config *c, int wr, int x, int xt, int key,
                         const dg_model_sites *s) {
    int64_t B = dg_Tc(g, x)->shape[0], S = dg_Tc(g, x)->shape[1], H = c->hidden_size, E = c->num_experts;
    if (c->moe_input_jitter_eps > 0) {
        x = dg_noise(g, x, key, DG_NOISE_JITTER, c->moe_input_jitter_eps, s->router_jitter);
        xt = dg_reshape(g, x, 2, DG_SHAPE(B * S, H));
    }
    int logits = dg_linear(g, xt, wr);
    if (!c->moe_force_load_balancing) return logits;
    int r = dg_noise(g, dg_reshape(g, logits, 3, DG_SHAPE(B, S, E)), key, DG_NOISE_NORMAL, 0.0, s->router_logits);
    return dg_reshape(g, r, 2, DG_SHAPE(B * S, E));
}

/* Routed experts on x [B, S, H]: router, permute, grouped expert MLPs,
 * weighted unpermute. Adds the layer's aux and z losses to *aux, *z; with
 * the expert bias, *bias is its input. */
static int moe_block(dg_graph *g, const dg_model_config *c, const char *pre, int x, int key,
                     const dg_model_sites *sites, int *aux, int *z, int *counts, int *bias) {
    int64_t B = dg_Tc(g, x)->shape[0], S = dg_Tc(g, x)->shape[1], H = c->hidden_size, T = B * S;
    int64_t E = c->num_experts;
    int wr = dg_model_param(g, pre, "mlp.router.weight", DG_MODEL_PARAM_REPLICATED, 2, DG_SHAPE(E, H));
    int w1, w2;
    dg_moe_expert_mlp em;
    dg_model_expert_params(g, c, pre, &em, &w1, &w2);
    dg_graph_set_module(g, DG_MODULE_LAYERNORM); /* the norm's output as tokens: what the MoE saves */
    int xt = dg_reshape(g, x, 2, DG_SHAPE(T, H));
    dg_graph_set_module(g, DG_MODULE_MOE);
    int logits = router_logits(g, c, wr, x, xt, key, sites);

    dg_router_opts ro;
    dg_model_router_opts(c, &ro);
    if (c->moe_expert_bias) {
        char name[DG_NAME_LEN];
        snprintf(name, sizeof name, "%smlp.router.expert_bias", pre);
        ro.expert_bias = *bias = dg_input_new(g, name, DG_F32, 1, DG_SHAPE(E));
        ro.count_kept = 1; /* the update counts the slots kept, as Megatron's routing_map */
    }
    dg_router_out r;
    if (dg_moe_router(g, logits, &ro, &r) < 0) return -1;
    *counts = r.tokens_per_expert;

    /* Megatron's aux loss counts the plain top-k of its scores; with
     * group-limited routing that differs from the router's choice, and
     * routing -1 makes the op compute it (moe/dg_moe_loss.h); so with the
     * expert bias, which the plain top-k does not add. */
    int a = c->moe_seq_aux_loss
                /* per sequence: the B sequences of S tokens, in [B, S] order */
                ? dg_moe_seq_aux_loss(g, logits, -1, c->moe_router_topk, ro.score, c->moe_aux_loss_coeff, B, 0)
                : dg_moe_aux_loss(g, logits, ro.num_groups > 0 || c->moe_expert_bias ? -1 : r.tokens_per_expert,
                                  c->moe_router_topk,
                                  ro.score, c->moe_aux_loss_coeff);
    int zl = dg_moe_z_loss(g, logits, c->moe_z_loss_coeff);
    *aux = *aux < 0 ? a : dg_add(g, *aux, a);
    *z = *z < 0 ? zl : dg_add(g, *z, zl);

    /* one logical node over all experts; the EP pass lowers it (permute,
     * [dispatch,] grouped expert MLPs, [combine,] unpermute) */
    int y = dg_moe_experts(g, xt, r.probs, r.indices, w1, w2, (int)E, c->moe_capacity_factor, &em);
    if (y < 0) return -1;
    if (c->moe_shared_expert_size > 0) {
        dg_graph_set_module(g, DG_MODULE_SHARED_EXPERTS);
        int s = dg_model_mlp_biased(g, c, pre, "mlp.shared_experts", xt, c->moe_shared_expert_size, 0);
        dg_graph_set_module(g, DG_MODULE_MOE);
        y = dg_add(g, y, s);
    }
    return dg_reshape(g, y, 3, DG_SHAPE(B, S, H));
}

int dg_model_layer(dg_graph *g, const dg_model_config *c, const char *pre, int l, int x, int key,
                   const dg_model_sites *s, dg_model_layer_io *o) {
    /* each node's module (dg_module.h): what activation recompute selects by */
    dg_graph_set_layer(g, l);
    dg_graph_set_module(g, DG_MODULE_LAYERNORM);
    int h = dg_model_norm(g, c, pre, "input_layernorm", x);
    dg_graph_set_module(g, DG_MODULE_ATTN);
    int att = attention_block(g, c, pre, l, h, key, s->attn_probs);
    dg_graph_set_module(g, DG_MODULE_NONE);
    if (c->hidden_dropout > 0) att = dg_dropout(g, att, key, c->hidden_dropout, s->attn_out);
    x = dg_add(g, x, att);
    dg_graph_set_module(g, DG_MODULE_LAYERNORM);
    int h2 = dg_model_norm(g, c, pre, "pre_mlp_layernorm", x);
    int moe = dg_model_layer_is_moe(c, l);
    o->counts = o->bias = -1;
    dg_graph_set_module(g, moe ? DG_MODULE_MOE : DG_MODULE_MLP);
    int y = moe ? moe_block(g, c, pre, h2, key, s, &o->aux, &o->z, &o->counts, &o->bias)
                : dg_model_mlp(g, c, pre, "mlp", h2, c->ffn_hidden_size);
    dg_graph_set_module(g, DG_MODULE_NONE);
    if (c->hidden_dropout > 0) y = dg_dropout(g, y, key, c->hidden_dropout, s->mlp_out);
    x = dg_add(g, x, y);
    dg_graph_set_layer(g, -1);
    return x;
}

int dg_model_build_forward(dg_graph *g, const dg_model_config *c, dg_model_io *io, dg_err *err) {
    DG_TRY(dg_model_config_check(c, err));
    int64_t B = c->micro_batch_size, S = c->seq_length, H = c->hidden_size, V = c->vocab_size;
    memset(io, -1, sizeof *io);
    dg_graph_set_phase(g, DG_PHASE_FORWARD);
    dg_graph_set_layer(g, -1);

    io->tokens = dg_input_new(g, "tokens", DG_I32, 2, DG_SHAPE(B, S));
    io->targets = dg_input_new(g, "targets", DG_I32, 2, DG_SHAPE(B, S));
    io->loss_mask = dg_input_new(g, "loss_mask", DG_F32, 2, DG_SHAPE(B, S));
    int emb = dg_model_param(g, "", "embedding.word_embeddings.weight", DG_MODEL_PARAM_VOCAB, 2, DG_SHAPE(V, H));
    int x = dg_model_add_positions(g, c, dg_embedding(g, emb, io->tokens));
    /* dropout sites: 0 the embedding, 1 + 2l attention, 2 + 2l the MLP,
     * 1 + 2L + l the attention probabilities (L layers); the router's
     * draws: 1 + 3L + l its input's jitter, 1 + 4L + l its random logits */
    int key = -1;
    if (c->hidden_dropout > 0 || c->attention_dropout > 0 || (c->num_experts > 0 && (c->moe_input_jitter_eps > 0 ||
                                                                                      c->moe_force_load_balancing)))
        key = io->rng_key = dg_input_new(g, "rng_key", DG_I32, 1, DG_SHAPE(4));
    if (c->hidden_dropout > 0) x = dg_dropout(g, x, key, c->hidden_dropout, 0);

    dg_model_layer_io lo = {-1, -1, -1, -1};
    int L = c->num_layers;
    for (int l = 0; l < L && g->status == DG_OK; l++) {
        char pre[64];
        dg_model_layer_prefix(c, l, pre, sizeof pre);
        dg_model_sites s = {1 + 2 * l, 2 + 2 * l, 1 + 2 * L + l, 1 + 3 * L + l, 1 + 4 * L + l};
        x = dg_model_layer(g, c, pre, l, x, key, &s, &lo);
        if (l < DG_MODEL_MAX_TRACKED) {
            io->tokens_per_expert[l] = lo.counts;
            io->expert_bias[l] = lo.bias;
        }
    }
    dg_graph_set_layer(g, -1);
    int h = dg_model_norm(g, c, "decoder.", "final_layernorm", x);
    int wout = c->untie_embeddings ? dg_model_param(g, "", "output_layer.weight", DG_MODEL_PARAM_VOCAB, 2, DG_SHAPE(V, H)) : emb;
    int logits = dg_linear(g, h, wout);
    io->lm_loss = dg_softmax_xent(g, logits, io->targets, io->loss_mask, NULL);
    int mtp = c->mtp_num_layers > 0 ? dg_model_mtp(g, c, h, emb, wout, key, io, &lo) : -1;
    int aux = lo.aux, z = lo.z; /* the MTP modules' MoE losses too */
    io->aux_loss = aux;
    io->z_loss = z;
    /* --calculate-per-token-loss, as Megatron: every micro-batch adds its
     * summed token losses and its MoE losses, and the sum over the global
     * batch is divided by its N tokens. The loss mask is all ones (no flag
     * masks tokens), so a micro-batch holds B S of the N: its token sum
     * over N is its mean over n_mb x dp, the default weight, and the MoE
     * losses' 1 / N is 1 / (B S) of their default 1 / (n_mb x dp). A mask
     * that counts fewer tokens would need the global count instead. */
    double w = c->per_token_loss ? 1.0 / ((double)B * (double)S) : 1.0;
    int total = io->lm_loss;
    if (aux >= 0) total = dg_add(g, total, w == 1.0 ? aux : dg_scale(g, aux, w));
    if (z >= 0) total = dg_add(g, total, w == 1.0 ? z : dg_scale(g, z, w));
    if (mtp >= 0) total = dg_add(g, total, mtp); /* its weight is the main loss's under either (dg_model_mtp.h) */
    io->loss = total;
    if (g->status != DG_OK) return dg_err_set(err, g->status, "model: %s", g->err.msg);
    return DG_OK;
}
