/* dg_hf_map.c — dagatron's parameter names and layouts as Hugging Face's
 * (see dg_hf_map.h and docs/hf_interop.md). */
#include "dg_hf_map.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "dg_op_attention.h"
#include "dg_op_rope.h"

static const char *const k_class[] = {"MixtralForCausalLM", "LlamaForCausalLM", "GPT2LMHeadModel",
                                      "Qwen3MoeForCausalLM", "GptOssForCausalLM", "DeepseekV3ForCausalLM"};
static const char *const k_type[] = {"mixtral", "llama", "gpt2", "qwen3_moe", "gpt_oss", "deepseek_v3"};

const char *dg_hf_arch_class(dg_hf_arch a) { return k_class[a]; }
const char *dg_hf_arch_model_type(dg_hf_arch a) { return k_type[a]; }

/* Why a RoPE/RMSNorm/SwiGLU model (Llama, Mixtral, Qwen3-MoE) cannot be c,
 * or NULL; q/k norms and heads of their own size only as Qwen3-MoE. */
static const char *not_rope_swiglu(const dg_model_config *c, int qwen3) {
    if (c->position_embedding != DG_MODEL_POS_ROPE) return "it needs RoPE (--position-embedding-type rope)";
    if (c->rope_yarn) return "its RoPE is plain (--position-embedding-type yarn is not exported)";
    if (c->normalization_layernorm) return "it needs RMSNorm (--normalization RMSNorm)";
    if (c->mlp_gelu) return "it needs SwiGLU (--swiglu)";
    if (c->quick_geglu || c->glu_linear_offset != 0 || c->activation_clamp > 0)
        return "its MLP is plain SwiGLU (no --quick-geglu, --glu-linear-offset or --activation-func-clamp-value)";
    if (c->add_bias_linear) return "it has no linear biases (--disable-bias-linear)";
    if (c->rotary_percent > 0 && c->rotary_percent != 1.0) return "it rotates whole heads (--rotary-percent 1)";
    if (qwen3) return NULL;
    if (c->qk_layernorm) return "it has no q/k layernorm (--qk-layernorm: Qwen3-MoE, with --num-experts)";
    if (c->kv_channels > 0 && (int64_t)c->kv_channels * c->num_attention_heads != c->hidden_size)
        return "its heads are --hidden-size / --num-attention-heads (--kv-channels: Qwen3-MoE, with --qk-layernorm)";
    return NULL;
}

static const char *not_llama_like(const dg_model_config *c) { return not_rope_swiglu(c, 0); }

/* Mixtral, or with q/k norms Qwen3-MoE: MoE in every layer, the router HF's
 * classes compute. */
static const char *not_mixtral(const dg_model_config *c) {
    const char *why = not_rope_swiglu(c, c->qk_layernorm);
    if (why) return why;
    for (int l = 0; l < c->num_layers; l++)
        if (!dg_model_layer_is_moe(c, l)) return "every layer must be MoE (--moe-layer-freq 1)";
    if (c->score_function_sigmoid) return "its router is softmax (--moe-router-score-function softmax)";
    if (c->router_pre_softmax) return "its router takes the softmax of the top-k logits (no --moe-router-pre-softmax)";
    if (c->moe_router_num_groups > 0) return "its router is not group-limited (--moe-router-num-groups)";
    if (c->moe_router_topk_scaling_factor != 0 && c->moe_router_topk_scaling_factor != 1.0)
        return "its router does not scale (--moe-router-topk-scaling-factor)";
    if (c->moe_shared_expert_size > 0) return "it has no shared experts (--moe-shared-expert-intermediate-size)";
    return NULL;
}

/* gpt-oss (transformers' modeling_gpt_oss): its MLP and attention are
 * fixed, so each of dagatron's settings must be the one it computes. */
static const char *not_gpt_oss(const dg_model_config *c) {
    if (c->position_embedding != DG_MODEL_POS_ROPE) return "it needs RoPE (--position-embedding-type rope or yarn)";
    if (c->rotary_percent > 0 && c->rotary_percent != 1.0) return "it rotates whole heads (--rotary-percent 1)";
    if (c->normalization_layernorm) return "it needs RMSNorm (--normalization RMSNorm)";
    if (c->qk_layernorm) return "it has no q/k layernorm (--qk-layernorm)";
    if (!c->quick_geglu || c->glu_linear_offset != 1.0)
        return "its experts are quick GeGLU with the linear half + 1 (--quick-geglu --glu-linear-offset 1)";
    if (!(c->activation_clamp > 0)) return "it clamps the GLU's input (--activation-func-clamp-value: its swiglu_limit)";
    if (!c->add_bias_linear) return "its linear layers have biases (no --disable-bias-linear)";
    if (c->softmax_type != DG_ATTN_SOFTMAX_LEARNABLE) return "its attention has learnable sinks (--softmax-type learnable)";
    const char *why = NULL;
    for (int l = 0; l < c->num_layers && !why; l++)
        if (!dg_model_layer_is_moe(c, l)) why = "every layer must be MoE (--moe-layer-freq 1)";
    if (why) return why;
    if (c->score_function_sigmoid) return "its router is softmax (--moe-router-score-function softmax)";
    if (c->router_pre_softmax) return "its router takes the softmax of the top-k logits (no --moe-router-pre-softmax)";
    if (c->moe_router_num_groups > 0) return "its router is not group-limited (--moe-router-num-groups)";
    if (c->moe_router_topk_scaling_factor != 0 && c->moe_router_topk_scaling_factor != 1.0)
        return "its router does not scale (--moe-router-topk-scaling-factor)";
    if (c->moe_expert_bias) return "its router has no expert bias (--moe-router-enable-expert-bias)";
    if (c->moe_shared_expert_size > 0) return "it has no shared experts (--moe-shared-expert-intermediate-size)";
    return NULL;
}

int dg_hf_first_dense(const dg_model_config *c) {
    int k = 0;
    while (k < c->num_layers && !dg_model_layer_is_moe(c, k)) k++;
    for (int l = k; l < c->num_layers; l++)
        if (!dg_model_layer_is_moe(c, l)) return -1;
    return k < c->num_layers ? k : -1;
}

/* DeepSeek-V3 (transformers' modeling_deepseek_v3). */
static const char *not_deepseek_v3(const dg_model_config *c) {
    if (c->position_embedding != DG_MODEL_POS_ROPE) return "it needs RoPE (--position-embedding-type rope)";
    if (!c->rope_yarn && c->rotary_percent > 0 && c->rotary_percent != 1.0) return "it rotates whole heads (--rotary-percent 1)";
    if (!c->rope_yarn && dg_rope_yarn_get_mscale(c->rotary_scaling_factor, c->mscale_all_dim) != 1.0)
        return "its softmax scale takes --mscale-all-dim only with YaRN (--rope-type yarn)";
    if (c->normalization_layernorm) return "it needs RMSNorm (--normalization RMSNorm)";
    if (!c->qk_layernorm) return "it has the latent norms q_a_layernorm and kv_a_layernorm (--qk-layernorm)";
    if (c->mlp_gelu || c->quick_geglu || c->glu_linear_offset != 0 || c->activation_clamp > 0)
        return "its MLPs are plain SwiGLU (--swiglu)";
    if (c->add_bias_linear) return "it has no linear biases (--disable-bias-linear)";
    if (c->attn_window > 0 || c->softmax_type != 0) return "its attention has no window or sinks";
    if (c->num_experts <= 0 || dg_hf_first_dense(c) < 0)
        return "its first layers are dense and the rest MoE (--moe-layer-freq \"[0]*k+[1]*(L-k)\")";
    if (!c->score_function_sigmoid) return "its router is sigmoid (--moe-router-score-function sigmoid)";
    if (c->moe_router_num_groups > 0 &&
        (c->moe_router_group_topk <= 0 || c->moe_router_topk != 2 * c->moe_router_group_topk))
        return "its group-limited router sums each group's top 2 (--moe-router-topk = 2 x --moe-router-group-topk)";
    if (c->moe_shared_expert_size <= 0 || c->moe_shared_expert_size % c->moe_ffn_hidden_size)
        return "it has shared experts, a multiple of --moe-ffn-hidden-size (--moe-shared-expert-intermediate-size)";
    return NULL;
}

static const char *not_gpt2(const dg_model_config *c) {
    if (c->position_embedding != DG_MODEL_POS_LEARNED) return "it needs learned absolute positions";
    if (!c->normalization_layernorm) return "it needs LayerNorm";
    if (!c->mlp_gelu) return "it needs a GeLU MLP";
    if (!c->add_bias_linear) return "it needs linear biases";
    if (c->num_query_groups != c->num_attention_heads) return "it has no grouped-query attention";
    if (c->kv_channels > 0 && (int64_t)c->kv_channels * c->num_attention_heads != c->hidden_size)
        return "its heads are --hidden-size / --num-attention-heads (no --kv-channels)";
    if (c->qk_layernorm) return "it has no q/k layernorm (--qk-layernorm)";
    return NULL;
}

int dg_hf_arch_of(const dg_model_config *c, dg_hf_arch *arch, const char *where, dg_err *err) {
    const char *why;
    if (c->multi_latent_attention) {
        *arch = DG_HF_DEEPSEEK_V3;
        why = not_deepseek_v3(c);
    } else if (c->num_experts > 0 && (c->quick_geglu || c->softmax_type == DG_ATTN_SOFTMAX_LEARNABLE)) {
        *arch = DG_HF_GPT_OSS; /* gpt-oss's MLP or sinks: its window too (layer_types) */
        why = not_gpt_oss(c);
    } else if (c->num_experts > 0) {
        *arch = c->qk_layernorm ? DG_HF_QWEN3_MOE : DG_HF_MIXTRAL;
        why = not_mixtral(c);
    } else if (c->position_embedding == DG_MODEL_POS_ROPE) {
        *arch = DG_HF_LLAMA;
        why = not_llama_like(c);
    } else {
        *arch = DG_HF_GPT2;
        why = not_gpt2(c);
    }
    if (!why && *arch != DG_HF_DEEPSEEK_V3 && c->mtp_num_layers > 0)
        why = "it has no multi-token prediction (--mtp-num-layers; DeepSeek-V3's files hold it)";
    /* the attention variants (issue 29) are none of these classes' */
    if (!why && *arch != DG_HF_GPT_OSS && c->attn_window > 0) why = "it has no sliding window (--window-size)";
    if (!why && *arch != DG_HF_GPT_OSS && c->softmax_type != 0) why = "it has no softmax sinks (--softmax-type)";
    if (why)
        return dg_err_set(err, DG_EINPUT, "%s: the model has no Hugging Face equivalent: as %s, %s", where,
                          k_class[*arch], why);
    return DG_OK;
}

/* ---- building the table ------------------------------------------------------ */

static dg_hf_tensor *add(dg_hf_map *m, int ndim, int64_t cols, int transpose, const char *fmt, ...) {
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 64;
        m->t = dg_realloc(m->t, (size_t)m->cap * sizeof *m->t);
    }
    dg_hf_tensor *t = &m->t[m->n++];
    memset(t, 0, sizeof *t);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
    t->ndim = ndim;
    t->cols = ndim == 1 ? 1 : cols;
    t->transpose = transpose;
    t->blocks = 1;
    return t;
}

/* Append rows [row0, row0 + rows) of dagatron's `pre``name` (expert e). */
static void piece(dg_hf_tensor *t, const char *pre, const char *name, int64_t e, int64_t row0, int64_t rows) {
    dg_hf_piece *p = &t->piece[t->n_pieces++];
    snprintf(p->dg, sizeof p->dg, "%s%s", pre, name);
    p->expert = e;
    p->row0 = row0;
    p->rows = rows;
    t->rows += rows;
}

/* An HF tensor that is a whole dagatron tensor of `rows` rows. */
static void same(dg_hf_map *m, int ndim, int64_t rows, int64_t cols, const char *dg, const char *hf) {
    piece(add(m, ndim, cols, 0, "%s", hf), "", dg, -1, 0, rows);
}

static void llama_layer(dg_hf_map *m, const dg_model_config *c, int l) {
    int64_t H = c->hidden_size, D = dg_model_head_dim(c), Q = c->num_attention_heads * D,
            KV = c->num_query_groups * D;
    char pre[64], hf[64];
    snprintf(pre, sizeof pre, "decoder.layers.%d.", l);
    snprintf(hf, sizeof hf, "model.layers.%d.", l);
    piece(add(m, 1, 0, 0, "%sinput_layernorm.weight", hf), pre, "input_layernorm.weight", -1, 0, H);
    piece(add(m, 2, H, 0, "%sself_attn.q_proj.weight", hf), pre, "self_attention.linear_q.weight", -1, 0, Q);
    piece(add(m, 2, H, 0, "%sself_attn.k_proj.weight", hf), pre, "self_attention.linear_k.weight", -1, 0, KV);
    piece(add(m, 2, H, 0, "%sself_attn.v_proj.weight", hf), pre, "self_attention.linear_v.weight", -1, 0, KV);
    piece(add(m, 2, Q, 0, "%sself_attn.o_proj.weight", hf), pre, "self_attention.linear_proj.weight", -1, 0, H);
    if (c->qk_layernorm) {
        piece(add(m, 1, 0, 0, "%sself_attn.q_norm.weight", hf), pre, "self_attention.q_layernorm.weight", -1, 0, D);
        piece(add(m, 1, 0, 0, "%sself_attn.k_norm.weight", hf), pre, "self_attention.k_layernorm.weight", -1, 0, D);
    }
    piece(add(m, 1, 0, 0, "%spost_attention_layernorm.weight", hf), pre, "pre_mlp_layernorm.weight", -1, 0, H);
    if (m->arch == DG_HF_LLAMA) {
        int64_t F = c->ffn_hidden_size;
        piece(add(m, 2, H, 0, "%smlp.gate_proj.weight", hf), pre, "mlp.linear_fc1.weight", -1, 0, F);
        piece(add(m, 2, H, 0, "%smlp.up_proj.weight", hf), pre, "mlp.linear_fc1.weight", -1, F, F);
        piece(add(m, 2, F, 0, "%smlp.down_proj.weight", hf), pre, "mlp.linear_fc2.weight", -1, 0, H);
        return;
    }
    int64_t F = c->moe_ffn_hidden_size, E = c->num_experts;
    if (m->arch == DG_HF_QWEN3_MOE) {
        piece(add(m, 2, H, 0, "%smlp.gate.weight", hf), pre, "mlp.router.weight", -1, 0, E);
        for (int64_t e = 0; e < E; e++) {
            const char *ex = "mlp.experts";
            long long ee = (long long)e;
            piece(add(m, 2, H, 0, "%s%s.%lld.gate_proj.weight", hf, ex, ee), pre, "mlp.experts.linear_fc1.weight", e, 0, F);
            piece(add(m, 2, H, 0, "%s%s.%lld.up_proj.weight", hf, ex, ee), pre, "mlp.experts.linear_fc1.weight", e, F, F);
            piece(add(m, 2, F, 0, "%s%s.%lld.down_proj.weight", hf, ex, ee), pre, "mlp.experts.linear_fc2.weight", e, 0, H);
        }
        return;
    }
    piece(add(m, 2, H, 0, "%sblock_sparse_moe.gate.weight", hf), pre, "mlp.router.weight", -1, 0, E);
    for (int64_t e = 0; e < E; e++) {
        const char *ex = "block_sparse_moe.experts";
        piece(add(m, 2, H, 0, "%s%s.%lld.w1.weight", hf, ex, (long long)e), pre, "mlp.experts.linear_fc1.weight", e, 0, F);
        piece(add(m, 2, F, 0, "%s%s.%lld.w2.weight", hf, ex, (long long)e), pre, "mlp.experts.linear_fc2.weight", e, 0, H);
        piece(add(m, 2, H, 0, "%s%s.%lld.w3.weight", hf, ex, (long long)e), pre, "mlp.experts.linear_fc1.weight", e, F, F);
    }
}

/* gpt-oss's layer: Llama's attention with biases and sinks, the MoE of
 * stacked experts (dg_hf_map.h). */
static void gpt_oss_layer(dg_hf_map *m, const dg_model_config *c, int l) {
    int64_t H = c->hidden_size, D = dg_model_head_dim(c), Q = c->num_attention_heads * D,
            KV = c->num_query_groups * D, F = c->moe_ffn_hidden_size, E = c->num_experts;
    char pre[64], hf[64];
    snprintf(pre, sizeof pre, "decoder.layers.%d.", l);
    snprintf(hf, sizeof hf, "model.layers.%d.", l);
    static const char *const qkvo[] = {"q", "k", "v", "o"}, *const dg_qkvo[] = {"q", "k", "v", "proj"};
    piece(add(m, 1, 0, 0, "%sinput_layernorm.weight", hf), pre, "input_layernorm.weight", -1, 0, H);
    for (int i = 0; i < 4; i++) {
        char w[64], b[64];
        snprintf(w, sizeof w, "self_attention.linear_%s.weight", dg_qkvo[i]);
        snprintf(b, sizeof b, "self_attention.linear_%s.bias", dg_qkvo[i]);
        int64_t out = i == 0 ? Q : i == 3 ? H : KV, in = i == 3 ? Q : H;
        piece(add(m, 2, in, 0, "%sself_attn.%s_proj.weight", hf, qkvo[i]), pre, w, -1, 0, out);
        piece(add(m, 1, 0, 0, "%sself_attn.%s_proj.bias", hf, qkvo[i]), pre, b, -1, 0, out);
    }
    piece(add(m, 1, 0, 0, "%sself_attn.sinks", hf), pre, "self_attention.core_attention.softmax_offset", -1, 0,
          c->num_attention_heads);
    piece(add(m, 1, 0, 0, "%spost_attention_layernorm.weight", hf), pre, "pre_mlp_layernorm.weight", -1, 0, H);
    piece(add(m, 2, H, 0, "%smlp.router.weight", hf), pre, "mlp.router.weight", -1, 0, E);
    piece(add(m, 1, 0, 0, "%smlp.router.bias", hf), "", "", -1, 0, E);
    const char *fc1 = "mlp.experts.linear_fc1.", *fc2 = "mlp.experts.linear_fc2.";
    char n[64];
    dg_hf_tensor *t = add(m, 3, H, 1, "%smlp.experts.gate_up_proj", hf);
    snprintf(n, sizeof n, "%sweight", fc1);
    piece(t, pre, n, DG_HF_EACH_EXPERT, 0, F);
    piece(t, pre, n, DG_HF_EACH_EXPERT, F, F);
    t->blocks = E;
    t->interleave = 1;
    t = add(m, 2, 1, 0, "%smlp.experts.gate_up_proj_bias", hf);
    snprintf(n, sizeof n, "%sbias", fc1);
    piece(t, pre, n, DG_HF_EACH_EXPERT, 0, F);
    piece(t, pre, n, DG_HF_EACH_EXPERT, F, F);
    t->blocks = E;
    t->interleave = 1;
    t = add(m, 3, F, 1, "%smlp.experts.down_proj", hf);
    snprintf(n, sizeof n, "%sweight", fc2);
    piece(t, pre, n, DG_HF_EACH_EXPERT, 0, H);
    t->blocks = E;
    t = add(m, 2, 1, 0, "%smlp.experts.down_proj_bias", hf);
    snprintf(n, sizeof n, "%sbias", fc2);
    piece(t, pre, n, DG_HF_EACH_EXPERT, 0, H);
    t->blocks = E;
}

/* An HF SwiGLU MLP "<hf>gate_proj/up_proj/down_proj.weight" of dagatron's
 * "<pre><mlp>.linear_fc1/fc2.weight" (expert e, or -1) of size F. */
static void swiglu(dg_hf_map *m, const char *hf, const char *pre, const char *mlp, int64_t e, int64_t H, int64_t F) {
    char fc1[60], fc2[60];
    snprintf(fc1, sizeof fc1, "%s.linear_fc1.weight", mlp);
    snprintf(fc2, sizeof fc2, "%s.linear_fc2.weight", mlp);
    piece(add(m, 2, H, 0, "%sgate_proj.weight", hf), pre, fc1, e, 0, F);
    piece(add(m, 2, H, 0, "%sup_proj.weight", hf), pre, fc1, e, F, F);
    piece(add(m, 2, F, 0, "%sdown_proj.weight", hf), pre, fc2, e, 0, H);
}

/* One DeepSeek-V3 layer: dagatron's `pre` (a decoder layer, or an MTP
 * module's transformer_layer) as HF's `hf`; MoE as layer l's kind. */
static void deepseek_v3_block(dg_hf_map *m, const dg_model_config *c, const char *pre, const char *hf, int l) {
    int64_t H = c->hidden_size, N = c->num_attention_heads, Q = c->qk_head_dim + c->qk_pos_emb_head_dim,
            KV = c->kv_lora_rank, E = c->num_experts;
    char sub[60];
    const char *a = "self_attention.";
    piece(add(m, 1, 0, 0, "%sinput_layernorm.weight", hf), pre, "input_layernorm.weight", -1, 0, H);
#define ATT(hfn, dgn, ndim, cols, rows) \
    snprintf(sub, sizeof sub, "%s%s", a, dgn), piece(add(m, ndim, cols, 0, "%sself_attn.%s", hf, hfn), pre, sub, -1, 0, rows)
    if (c->q_lora_rank > 0) {
        ATT("q_a_proj.weight", "linear_q_down_proj.weight", 2, H, c->q_lora_rank);
        ATT("q_a_layernorm.weight", "q_layernorm.weight", 1, 0, c->q_lora_rank);
        ATT("q_b_proj.weight", "linear_q_up_proj.weight", 2, c->q_lora_rank, N * Q);
    } else {
        ATT("q_proj.weight", "linear_q_proj.weight", 2, H, N * Q);
    }
    ATT("kv_a_proj_with_mqa.weight", "linear_kv_down_proj.weight", 2, H, KV + c->qk_pos_emb_head_dim);
    ATT("kv_a_layernorm.weight", "kv_layernorm.weight", 1, 0, KV);
    ATT("kv_b_proj.weight", "linear_kv_up_proj.weight", 2, KV, N * (c->qk_head_dim + c->v_head_dim));
    ATT("o_proj.weight", "linear_proj.weight", 2, N * c->v_head_dim, H);
#undef ATT
    piece(add(m, 1, 0, 0, "%spost_attention_layernorm.weight", hf), pre, "pre_mlp_layernorm.weight", -1, 0, H);
    char hm[96];
    snprintf(hm, sizeof hm, "%smlp.", hf);
    if (!dg_model_layer_is_moe(c, l)) {
        swiglu(m, hm, pre, "mlp", -1, H, c->ffn_hidden_size);
        return;
    }
    piece(add(m, 2, H, 0, "%smlp.gate.weight", hf), pre, "mlp.router.weight", -1, 0, E);
    piece(add(m, 1, 0, 0, "%smlp.gate.e_score_correction_bias", hf), c->moe_expert_bias ? pre : "",
          c->moe_expert_bias ? "mlp.router.expert_bias" : "", -1, 0, E);
    for (int64_t e = 0; e < E; e++) {
        snprintf(hm, sizeof hm, "%smlp.experts.%lld.", hf, (long long)e);
        swiglu(m, hm, pre, "mlp.experts", e, H, c->moe_ffn_hidden_size);
    }
    snprintf(hm, sizeof hm, "%smlp.shared_experts.", hf);
    swiglu(m, hm, pre, "mlp.shared_experts", -1, H, c->moe_shared_expert_size);
}

static void deepseek_v3_layer(dg_hf_map *m, const dg_model_config *c, int l) {
    char pre[64], hf[64];
    snprintf(pre, sizeof pre, "decoder.layers.%d.", l);
    snprintf(hf, sizeof hf, "model.layers.%d.", l);
    deepseek_v3_block(m, c, pre, hf, l);
}

/* MTP module d as DeepSeek-V3's checkpoints hold it: layer num_layers + d
 * (num_nextn_predict_layers of them, which Transformers does not load),
 * with enorm, hnorm, eh_proj [H, 2H] (embedding half first),
 * shared_head.norm (its final norm), the layer's own names, and copies of
 * the shared embedding and output head (embed_tokens, shared_head.head). */
static void deepseek_v3_mtp(dg_hf_map *m, const dg_model_config *c, int d) {
    int64_t H = c->hidden_size, V = c->vocab_size;
    int l = c->num_layers + d;
    char pre[64], tl[96], hf[64];
    snprintf(pre, sizeof pre, "mtp.layers.%d.", d);
    dg_model_layer_prefix(c, l, tl, sizeof tl);
    snprintf(hf, sizeof hf, "model.layers.%d.", l);
    dg_hf_tensor *emb = add(m, 2, H, 0, "%sembed_tokens.weight", hf);
    emb->copy = 1;
    piece(emb, "", "embedding.word_embeddings.weight", -1, 0, V);
    piece(add(m, 1, 0, 0, "%senorm.weight", hf), pre, "enorm.weight", -1, 0, H);
    piece(add(m, 1, 0, 0, "%shnorm.weight", hf), pre, "hnorm.weight", -1, 0, H);
    piece(add(m, 2, 2 * H, 0, "%seh_proj.weight", hf), pre, "eh_proj.weight", -1, 0, H);
    deepseek_v3_block(m, c, tl, hf, l);
    piece(add(m, 1, 0, 0, "%sshared_head.norm.weight", hf), pre, "final_layernorm.weight", -1, 0, H);
    dg_hf_tensor *head = add(m, 2, H, 0, "%sshared_head.head.weight", hf);
    head->copy = 1;
    piece(head, "", c->untie_embeddings ? "output_layer.weight" : "embedding.word_embeddings.weight", -1, 0, V);
}

/* GPT-2's Conv1D stores [in, out]: dagatron's [out, in] transposed; c_attn
 * is Q, K and V stacked (out = 3H) before the transposition. */
static void gpt2_layer(dg_hf_map *m, const dg_model_config *c, int l) {
    int64_t H = c->hidden_size, F = c->ffn_hidden_size;
    char pre[64], hf[64];
    snprintf(pre, sizeof pre, "decoder.layers.%d.", l);
    snprintf(hf, sizeof hf, "transformer.h.%d.", l);
    piece(add(m, 1, 0, 0, "%sln_1.weight", hf), pre, "input_layernorm.weight", -1, 0, H);
    piece(add(m, 1, 0, 0, "%sln_1.bias", hf), pre, "input_layernorm.bias", -1, 0, H);
    static const char *const qkv[] = {"q", "k", "v"};
    dg_hf_tensor *w = add(m, 2, H, 1, "%sattn.c_attn.weight", hf);
    dg_hf_tensor *b = add(m, 1, 0, 0, "%sattn.c_attn.bias", hf);
    for (int i = 0; i < 3; i++) {
        char n[64];
        snprintf(n, sizeof n, "self_attention.linear_%s.weight", qkv[i]);
        piece(w, pre, n, -1, 0, H);
        snprintf(n, sizeof n, "self_attention.linear_%s.bias", qkv[i]);
        piece(b, pre, n, -1, 0, H);
    }
    piece(add(m, 2, H, 1, "%sattn.c_proj.weight", hf), pre, "self_attention.linear_proj.weight", -1, 0, H);
    piece(add(m, 1, 0, 0, "%sattn.c_proj.bias", hf), pre, "self_attention.linear_proj.bias", -1, 0, H);
    piece(add(m, 1, 0, 0, "%sln_2.weight", hf), pre, "pre_mlp_layernorm.weight", -1, 0, H);
    piece(add(m, 1, 0, 0, "%sln_2.bias", hf), pre, "pre_mlp_layernorm.bias", -1, 0, H);
    piece(add(m, 2, H, 1, "%smlp.c_fc.weight", hf), pre, "mlp.linear_fc1.weight", -1, 0, F);
    piece(add(m, 1, 0, 0, "%smlp.c_fc.bias", hf), pre, "mlp.linear_fc1.bias", -1, 0, F);
    piece(add(m, 2, F, 1, "%smlp.c_proj.weight", hf), pre, "mlp.linear_fc2.weight", -1, 0, H);
    piece(add(m, 1, 0, 0, "%smlp.c_proj.bias", hf), pre, "mlp.linear_fc2.bias", -1, 0, H);
}

int dg_hf_map_build(const dg_model_config *c, dg_hf_map *m, const char *where, dg_err *err) {
    memset(m, 0, sizeof *m);
    DG_TRY(dg_hf_arch_of(c, &m->arch, where, err));
    int64_t V = c->vocab_size, H = c->hidden_size;
    const int gpt2 = m->arch == DG_HF_GPT2;
    same(m, 2, V, H, "embedding.word_embeddings.weight", gpt2 ? "transformer.wte.weight" : "model.embed_tokens.weight");
    if (gpt2) {
        int64_t P = c->max_position_embeddings > 0 ? c->max_position_embeddings : c->seq_length;
        same(m, 2, P, H, "embedding.position_embeddings.weight", "transformer.wpe.weight");
    }
    for (int l = 0; l < c->num_layers; l++) {
        if (gpt2) gpt2_layer(m, c, l);
        else if (m->arch == DG_HF_GPT_OSS) gpt_oss_layer(m, c, l);
        else if (m->arch == DG_HF_DEEPSEEK_V3) deepseek_v3_layer(m, c, l);
        else llama_layer(m, c, l);
    }
    for (int d = 0; m->arch == DG_HF_DEEPSEEK_V3 && d < c->mtp_num_layers; d++) deepseek_v3_mtp(m, c, d);
    same(m, 1, H, 1, "decoder.final_layernorm.weight", gpt2 ? "transformer.ln_f.weight" : "model.norm.weight");
    if (gpt2) same(m, 1, H, 1, "decoder.final_layernorm.bias", "transformer.ln_f.bias");
    if (c->untie_embeddings) same(m, 2, V, H, "output_layer.weight", "lm_head.weight");
    return DG_OK;
}

void dg_hf_map_free(dg_hf_map *m) {
    dg_free(m->t);
    memset(m, 0, sizeof *m);
}

int64_t dg_hf_tensor_numel(const dg_hf_tensor *t) { return t->blocks * t->rows * t->cols; }

void dg_hf_tensor_shape(const dg_hf_tensor *t, int64_t shape[3]) {
    int64_t a = t->transpose ? t->cols : t->rows, b = t->transpose ? t->rows : t->cols;
    shape[2] = 0;
    if (t->ndim == 1) {
        shape[0] = dg_hf_tensor_numel(t);
        shape[1] = 0;
    } else if (t->ndim == 2 && t->blocks > 1) { /* a vector per block */
        shape[0] = t->blocks;
        shape[1] = t->rows * t->cols;
    } else if (t->ndim == 3) {
        shape[0] = t->blocks;
        shape[1] = a;
        shape[2] = b;
    } else {
        shape[0] = a;
        shape[1] = b;
    }
}
