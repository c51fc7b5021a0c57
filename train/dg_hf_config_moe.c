/* dg_hf_config_moe.c — config.json of gpt-oss (GptOssForCausalLM) and
 * DeepSeek-V3 (DeepseekV3ForCausalLM), written and read (see
 * dg_hf_config.h and dg_hf_config_util.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dg_hf_config_util.h"
#include "dg_op_attention.h"
#include "dg_op_rope.h"

#define PATH_MAX_LEN 4096

/* YaRN's rope_scaling (the keys of Transformers' _compute_yarn_parameters). */
static void yarn_keys(cJSON *o, double factor, int orig, double beta_fast, double beta_slow, int truncate,
                      double mscale, double mscale_all_dim) {
    cJSON *y = cJSON_AddObjectToObject(o, "rope_scaling");
    cJSON_AddStringToObject(y, "rope_type", "yarn");
    dg_hf_flt(y, "factor", factor);
    dg_hf_num(y, "original_max_position_embeddings", orig);
    dg_hf_flt(y, "beta_fast", beta_fast);
    dg_hf_flt(y, "beta_slow", beta_slow);
    cJSON_AddBoolToObject(y, "truncate", truncate);
    dg_hf_flt(y, "mscale", mscale);
    dg_hf_flt(y, "mscale_all_dim", mscale_all_dim);
    dg_hf_flt(y, "attention_factor", dg_rope_yarn_mscale(factor, mscale, mscale_all_dim));
}

/* gpt-oss's rope_scaling: null (plain RoPE), or YaRN with its attention
 * factor written out (Transformers' default for it differs from Megatron's
 * concentration factor when --mscale-all-dim is 0 and --mscale is not 1). */
static void gpt_oss_rope(cJSON *o, const dg_model_config *c) {
    if (!c->rope_yarn) {
        cJSON_AddNullToObject(o, "rope_scaling");
        return;
    }
    yarn_keys(o, c->rotary_scaling_factor, c->yarn_original_max_pos, c->yarn_beta_fast, c->yarn_beta_slow,
              !c->yarn_unrounded, c->mscale, c->mscale_all_dim);
}

void dg_hf_gpt_oss_keys(cJSON *o, const dg_model_config *c) {
    dg_hf_num(o, "hidden_size", c->hidden_size);
    dg_hf_num(o, "intermediate_size", c->moe_ffn_hidden_size);
    dg_hf_num(o, "num_hidden_layers", c->num_layers);
    dg_hf_num(o, "num_attention_heads", c->num_attention_heads);
    dg_hf_num(o, "num_key_value_heads", c->num_query_groups);
    dg_hf_num(o, "head_dim", (int)dg_model_head_dim(c));
    dg_hf_num(o, "num_local_experts", c->num_experts);
    dg_hf_num(o, "num_experts_per_tok", c->moe_router_topk);
    cJSON_AddStringToObject(o, "hidden_act", "silu");
    dg_hf_num(o, "max_position_embeddings", c->seq_length);
    dg_hf_flt(o, "rms_norm_eps", c->norm_epsilon);
    dg_hf_flt(o, "rope_theta", c->rope_base);
    gpt_oss_rope(o, c);
    dg_hf_flt(o, "attention_dropout", c->attention_dropout);
    cJSON_AddTrueToObject(o, "attention_bias");
    dg_hf_flt(o, "swiglu_limit", c->activation_clamp);
    if (c->attn_window > 0) dg_hf_num(o, "sliding_window", c->attn_window);
    else cJSON_AddNullToObject(o, "sliding_window");
    cJSON *types = cJSON_AddArrayToObject(o, "layer_types");
    for (int l = 0; l < c->num_layers; l++)
        cJSON_AddItemToArray(types, cJSON_CreateString(dg_model_layer_window(c, l) ? "sliding_attention"
                                                                                    : "full_attention"));
    dg_hf_flt(o, "router_aux_loss_coef", c->moe_aux_loss_coeff);
    cJSON_AddFalseToObject(o, "output_router_logits");
}

/* DeepSeek-V3's keys (transformers' DeepseekV3Config): MLA's sizes, the
 * layer mix, the sigmoid router and MLA's YaRN (MLATransformerConfig's
 * fixed original positions and betas, the range rounded). */
void dg_hf_deepseek_v3_keys(cJSON *o, const dg_model_config *c) {
    dg_hf_num(o, "hidden_size", c->hidden_size);
    dg_hf_num(o, "intermediate_size", c->ffn_hidden_size);
    dg_hf_num(o, "moe_intermediate_size", c->moe_ffn_hidden_size);
    dg_hf_num(o, "num_hidden_layers", c->num_layers);
    dg_hf_num(o, "num_attention_heads", c->num_attention_heads);
    dg_hf_num(o, "num_key_value_heads", c->num_attention_heads);
    dg_hf_num(o, "n_shared_experts", c->moe_shared_expert_size / c->moe_ffn_hidden_size);
    dg_hf_num(o, "n_routed_experts", c->num_experts);
    dg_hf_flt(o, "routed_scaling_factor", c->moe_router_topk_scaling_factor > 0 ? c->moe_router_topk_scaling_factor : 1.0);
    dg_hf_num(o, "kv_lora_rank", c->kv_lora_rank);
    if (c->q_lora_rank > 0) dg_hf_num(o, "q_lora_rank", c->q_lora_rank);
    else cJSON_AddNullToObject(o, "q_lora_rank");
    dg_hf_num(o, "qk_rope_head_dim", c->qk_pos_emb_head_dim);
    dg_hf_num(o, "v_head_dim", c->v_head_dim);
    dg_hf_num(o, "qk_nope_head_dim", c->qk_head_dim);
    dg_hf_num(o, "head_dim", c->qk_pos_emb_head_dim); /* Transformers' rope dims */
    dg_hf_num(o, "n_group", c->moe_router_num_groups > 0 ? c->moe_router_num_groups : 1);
    dg_hf_num(o, "topk_group", c->moe_router_num_groups > 0 ? c->moe_router_group_topk : 1);
    dg_hf_num(o, "num_experts_per_tok", c->moe_router_topk);
    dg_hf_num(o, "first_k_dense_replace", dg_hf_first_dense(c));
    dg_hf_num(o, "num_nextn_predict_layers", c->mtp_num_layers); /* MTP modules: layers num_hidden_layers + d */
    cJSON_AddBoolToObject(o, "norm_topk_prob", c->moe_router_topk > 1); /* Megatron renormalises above top-1 */
    cJSON_AddStringToObject(o, "scoring_func", "sigmoid");
    cJSON_AddStringToObject(o, "topk_method", "noaux_tc");
    cJSON_AddStringToObject(o, "hidden_act", "silu");
    dg_hf_num(o, "max_position_embeddings", c->seq_length);
    dg_hf_flt(o, "rms_norm_eps", c->norm_epsilon);
    dg_hf_flt(o, "rope_theta", c->rope_base);
    if (c->rope_yarn)
        yarn_keys(o, c->rotary_scaling_factor, DG_MODEL_YARN_ORIGINAL_MAX_POS, DG_MODEL_YARN_BETA_FAST,
                  DG_MODEL_YARN_BETA_SLOW, 1, c->mscale, c->mscale_all_dim);
    else cJSON_AddNullToObject(o, "rope_scaling");
    cJSON_AddTrueToObject(o, "rope_interleave"); /* Megatron's MLA pairs (2i, 2i+1) */
    cJSON_AddFalseToObject(o, "attention_bias");
    dg_hf_flt(o, "attention_dropout", c->attention_dropout);
    dg_hf_flt(o, "aux_loss_alpha", c->moe_aux_loss_coeff);
}

/* gpt-oss's rope_scaling: null, or YaRN as Transformers computes it
 * (factor; original_max_position_embeddings, else max_position_embeddings;
 * betas 32 / 1; truncate true: the correction range rounded; the attention
 * factor: attention_factor, else mscale / mscale_all_dim when both are
 * nonzero, else that of mscale 1), which must be one dagatron's --mscale
 * and --mscale-all-dim give. */
static void read_gpt_oss_rope(dg_hf_reader *r, dg_model_config *c, int max_pos) {
    const cJSON *y = cJSON_GetObjectItemCaseSensitive(r->o, "rope_scaling");
    c->rope_yarn = c->yarn_original_max_pos = c->yarn_unrounded = 0;
    c->yarn_beta_fast = c->yarn_beta_slow = c->rotary_scaling_factor = c->mscale = c->mscale_all_dim = 0;
    if (r->st != DG_OK || !y || cJSON_IsNull(y)) return;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(y, "rope_type");
    if (!type) type = cJSON_GetObjectItemCaseSensitive(y, "type"); /* the older key DeepSeek's own files use */
    if (!cJSON_IsObject(y) || !cJSON_IsString(type) || strcmp(type->valuestring, "yarn")) {
        dg_hf_expected(r, "rope_scaling", y, "null or {\"rope_type\": \"yarn\", ...} (dagatron's RoPE or YaRN)");
        return;
    }
    char path[PATH_MAX_LEN];
    snprintf(path, sizeof path, "%s: \"rope_scaling\"", r->path);
    dg_hf_reader s = {y, path, r->err, DG_OK, r->block};
    double f = 0, af = 0, ms = -1, msa = -1;
    int orig = max_pos;
    c->yarn_beta_fast = 32.0;
    c->yarn_beta_slow = 1.0;
    dg_hf_get_positive(&s, "factor", &f);
    if (s.st == DG_OK && !(f > 0)) dg_hf_expected(&s, "factor", cJSON_GetObjectItemCaseSensitive(y, "factor"), "a positive number");
    dg_hf_get_int(&s, "original_max_position_embeddings", 0, 1, &orig);
    dg_hf_get_positive(&s, "beta_fast", &c->yarn_beta_fast);
    dg_hf_get_positive(&s, "beta_slow", &c->yarn_beta_slow);
    dg_hf_get_positive(&s, "attention_factor", &af);
    dg_hf_get_nonneg(&s, "mscale", &ms);
    dg_hf_get_nonneg(&s, "mscale_all_dim", &msa);
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(y, "truncate");
    if (s.st == DG_OK && tr && !cJSON_IsBool(tr)) dg_hf_expected(&s, "truncate", tr, "true or false");
    if (s.st == DG_OK) {
        int both = ms > 0 && msa > 0; /* Transformers' "if mscale and mscale_all_dim" */
        c->mscale = both || (ms >= 0 && msa >= 0) ? ms : 1.0;
        c->mscale_all_dim = both || (ms >= 0 && msa >= 0) ? msa : 0.0;
        double hf = af > 0 ? af : both ? dg_rope_yarn_mscale(f, ms, msa) : dg_rope_yarn_get_mscale(f, 1.0);
        if (af > 0 && !(ms >= 0 && msa >= 0) && f > 1) { /* attention_factor alone: --mscale of it */
            c->mscale = (af - 1.0) / (0.1 * log(f));
            c->mscale_all_dim = 0.0;
        }
        double dg = dg_rope_yarn_mscale(f, c->mscale, c->mscale_all_dim);
        if (fabs(dg - hf) > 1e-12 * hf)
            dg_hf_expected(&s, "attention_factor", cJSON_GetObjectItemCaseSensitive(y, "attention_factor"),
                     "the factor of mscale %g / mscale_all_dim %g (%.17g: Megatron's concentration factor)", c->mscale,
                     c->mscale_all_dim, dg);
    }
    r->st = s.st;
    c->rope_yarn = 1;
    c->rotary_scaling_factor = f;
    c->yarn_original_max_pos = orig;
    c->yarn_unrounded = tr && cJSON_IsFalse(tr);
}

/* gpt-oss's windows: layer_types (Transformers' default: sliding on the
 * even layers) with sliding_window, in the form of the "dagatron" block's
 * record when that gives the same layers, else --window-attn-skip-freq N
 * when one does, else the list. */
static void read_gpt_oss_window(dg_hf_reader *r, dg_model_config *c) {
    int win = 128, L = c->num_layers, want[DG_MODEL_MAX_PATTERN_LAYERS], any = 0;
    dg_hf_get_int(r, "sliding_window", 0, 1, &win);
    const cJSON *types = cJSON_GetObjectItemCaseSensitive(r->o, "layer_types");
    if (r->st != DG_OK) return;
    if (L > DG_MODEL_MAX_PATTERN_LAYERS || (types && !(cJSON_IsArray(types) && cJSON_GetArraySize(types) == L))) {
        dg_hf_expected(r, "layer_types", types, "a list of num_hidden_layers %d (at most %d) layer types", L,
                 DG_MODEL_MAX_PATTERN_LAYERS);
        return;
    }
    for (int l = 0; l < L; l++) {
        const cJSON *t = types ? cJSON_GetArrayItem(types, l) : NULL;
        int full = t ? cJSON_IsString(t) && !strcmp(t->valuestring, "full_attention") : l % 2 == 1;
        if (t && !full && !(cJSON_IsString(t) && !strcmp(t->valuestring, "sliding_attention"))) {
            dg_hf_expected(r, "layer_types", types, "\"sliding_attention\" or \"full_attention\" for each layer");
            return;
        }
        want[l] = !full;
        any |= want[l];
    }
    if (!any) {
        c->attn_window = c->window_attn_skip_freq = 0;
        memset(c->window_attn_mask, 0, sizeof c->window_attn_mask);
        return;
    }
    dg_model_config k = *c;
    k.attn_window = win;
    for (int n = -2; n <= L; n++) { /* -2: the record's own form; then all windowed (0), every n-th full */
        if (n == -1) continue;
        if (n >= 0) k.window_attn_skip_freq = n;
        int same = 1;
        for (int l = 0; l < L && same; l++) same = (dg_model_layer_window(&k, l) > 0) == want[l];
        if (same) {
            *c = k;
            return;
        }
    }
    k.window_attn_skip_freq = -1;
    memset(k.window_attn_mask, 0, sizeof k.window_attn_mask);
    for (int l = 0; l < L; l++)
        if (want[l]) k.window_attn_mask[l / 32] |= (int)(1u << (l % 32));
    *c = k;
}

void dg_hf_read_gpt_oss(dg_hf_reader *r, dg_model_config *c) {
    dg_hf_get_int(r, "hidden_size", 1, 1, &c->hidden_size);
    dg_hf_get_int(r, "num_hidden_layers", 1, 1, &c->num_layers);
    dg_hf_get_int(r, "num_attention_heads", 1, 1, &c->num_attention_heads);
    int hd = r->st == DG_OK ? c->hidden_size / c->num_attention_heads : 0;
    dg_hf_get_int(r, "head_dim", 0, 2, &hd);
    c->kv_channels = (int64_t)hd * c->num_attention_heads == c->hidden_size ? 0 : hd;
    if (r->st == DG_OK && hd % 2)
        dg_hf_expected(r, "head_dim", cJSON_GetObjectItemCaseSensitive(r->o, "head_dim"), "an even head size (RoPE rotates pairs)");
    c->num_query_groups = c->num_attention_heads;
    dg_hf_get_int(r, "num_key_value_heads", 0, 1, &c->num_query_groups);
    dg_hf_divides(r, "num_key_value_heads", c->num_query_groups, "num_attention_heads", c->num_attention_heads);
    dg_hf_get_int(r, "intermediate_size", 1, 1, &c->moe_ffn_hidden_size);
    dg_hf_get_int(r, "num_local_experts", 1, 1, &c->num_experts);
    dg_hf_get_int(r, "num_experts_per_tok", 1, 1, &c->moe_router_topk);
    if (r->st == DG_OK && c->moe_router_topk > c->num_experts)
        dg_hf_expected(r, "num_experts_per_tok", cJSON_GetObjectItemCaseSensitive(r->o, "num_experts_per_tok"),
                 "at most num_local_experts %d", c->num_experts);
    dg_hf_get_positive(r, "rms_norm_eps", &c->norm_epsilon);
    dg_hf_get_positive(r, "rope_theta", &c->rope_base);
    c->activation_clamp = 7.0; /* Transformers' default swiglu_limit */
    dg_hf_get_positive(r, "swiglu_limit", &c->activation_clamp);
    dg_hf_refuse(r, "hidden_act", "silu", "\"silu\" (gpt-oss's quick GeGLU)");
    const cJSON *bias = cJSON_GetObjectItemCaseSensitive(r->o, "attention_bias");
    if (r->st == DG_OK && bias && !cJSON_IsTrue(bias))
        dg_hf_expected(r, "attention_bias", bias, "true (dagatron's gpt-oss has every linear bias)");
    int max_pos = 131072;
    dg_hf_get_int(r, "max_position_embeddings", 0, 1, &max_pos);
    read_gpt_oss_rope(r, c, max_pos);
    read_gpt_oss_window(r, c);
    c->position_embedding = DG_MODEL_POS_ROPE;
    if (c->rotary_percent != 0 && c->rotary_percent != 1.0) c->rotary_percent = 1.0;
    /* the dense MLP's size no layer reads: Megatron's default without --swiglu */
    if (!r->block) c->ffn_hidden_size = 4 * c->hidden_size;
    c->normalization_layernorm = c->qk_layernorm = c->multi_latent_attention = 0;
    c->mlp_gelu = 0;
    c->quick_geglu = 1;
    c->glu_linear_offset = 1.0;
    c->add_bias_linear = 1;
    c->softmax_type = DG_ATTN_SOFTMAX_LEARNABLE;
    c->moe_layer_freq = 1;
    c->score_function_sigmoid = c->router_pre_softmax = c->moe_router_num_groups = 0;
    if (c->moe_router_topk_scaling_factor != 1.0) c->moe_router_topk_scaling_factor = 0;
    c->moe_shared_expert_size = c->moe_expert_bias = 0;
}

/* DeepSeek-V3's rope_scaling: null (RoPE: MLA's softmax scale then plain),
 * or YaRN with MLATransformerConfig's fixed original positions and betas
 * and the range rounded, its attention factor one --mscale and
 * --mscale-all-dim give. */
static void read_deepseek_rope(dg_hf_reader *r, dg_model_config *c) {
    const cJSON *y = cJSON_GetObjectItemCaseSensitive(r->o, "rope_scaling");
    if (r->st != DG_OK) return;
    if (!y || cJSON_IsNull(y)) {
        c->rope_yarn = 0;
        if (!r->block || dg_rope_yarn_get_mscale(c->rotary_scaling_factor, c->mscale_all_dim) != 1.0) { /* Megatron's */
            c->rotary_scaling_factor = c->mscale = 1.0;
            c->mscale_all_dim = 0.0;
        }
        return;
    }
    dg_model_config k = *c;
    read_gpt_oss_rope(r, &k, DG_MODEL_YARN_ORIGINAL_MAX_POS);
    if (r->st != DG_OK) return;
    if (k.yarn_original_max_pos != DG_MODEL_YARN_ORIGINAL_MAX_POS || k.yarn_beta_fast != DG_MODEL_YARN_BETA_FAST ||
        k.yarn_beta_slow != DG_MODEL_YARN_BETA_SLOW || k.yarn_unrounded) {
        dg_hf_expected(r, "rope_scaling", y, "MLA's YaRN: original_max_position_embeddings %d, beta_fast %g, beta_slow %g, "
                 "truncate true (MLATransformerConfig's)", DG_MODEL_YARN_ORIGINAL_MAX_POS, DG_MODEL_YARN_BETA_FAST,
                 DG_MODEL_YARN_BETA_SLOW);
        return;
    }
    c->rope_yarn = 1;
    c->rotary_scaling_factor = k.rotary_scaling_factor;
    c->mscale = k.mscale;
    c->mscale_all_dim = k.mscale_all_dim;
    c->yarn_original_max_pos = c->yarn_unrounded = 0; /* ordinary attention's: unread under MLA */
    c->yarn_beta_fast = c->yarn_beta_slow = 0;
}

/* DeepSeek-V3's layer mix: first_k_dense_replace dense layers, then MoE, in
 * the record's own form when it gives the same layers. */
static void read_deepseek_layers(dg_hf_reader *r, dg_model_config *c) {
    int k = 0;
    dg_hf_get_int(r, "first_k_dense_replace", 0, 0, &k);
    if (r->st != DG_OK) return;
    if (k >= c->num_layers || c->num_layers > DG_MODEL_MAX_PATTERN_LAYERS) {
        dg_hf_expected(r, "first_k_dense_replace", cJSON_GetObjectItemCaseSensitive(r->o, "first_k_dense_replace"),
                 "fewer than num_hidden_layers %d (at most %d layers)", c->num_layers, DG_MODEL_MAX_PATTERN_LAYERS);
        return;
    }
    if (dg_hf_first_dense(c) == k) return;
    memset(c->moe_layer_mask, 0, sizeof c->moe_layer_mask);
    c->moe_layer_freq = k == 0 ? 1 : 0;
    for (int l = k; l < c->num_layers; l++) c->moe_layer_mask[l / 32] |= (int)(1u << (l % 32));
}

void dg_hf_read_deepseek_v3(dg_hf_reader *r, dg_model_config *c) {
    dg_hf_get_int(r, "hidden_size", 1, 1, &c->hidden_size);
    dg_hf_get_int(r, "num_hidden_layers", 1, 1, &c->num_layers);
    dg_hf_get_int(r, "num_attention_heads", 1, 1, &c->num_attention_heads);
    int kvh = c->num_attention_heads;
    dg_hf_get_int(r, "num_key_value_heads", 0, 1, &kvh);
    if (r->st == DG_OK && kvh != c->num_attention_heads)
        dg_hf_expected(r, "num_key_value_heads", cJSON_GetObjectItemCaseSensitive(r->o, "num_key_value_heads"),
                 "num_attention_heads %d (MLA has no grouped-query attention)", c->num_attention_heads);
    dg_hf_get_int(r, "intermediate_size", 1, 1, &c->ffn_hidden_size);
    dg_hf_get_int(r, "moe_intermediate_size", 1, 1, &c->moe_ffn_hidden_size);
    dg_hf_get_int(r, "n_routed_experts", 1, 1, &c->num_experts);
    dg_hf_get_int(r, "num_experts_per_tok", 1, 1, &c->moe_router_topk);
    int shared = 0, ng = 1, tg = 1;
    dg_hf_get_int(r, "n_shared_experts", 1, 1, &shared);
    c->moe_shared_expert_size = shared * c->moe_ffn_hidden_size;
    dg_hf_get_int(r, "kv_lora_rank", 1, 1, &c->kv_lora_rank);
    c->q_lora_rank = 0;
    dg_hf_get_int(r, "q_lora_rank", 0, 1, &c->q_lora_rank);
    dg_hf_get_int(r, "qk_rope_head_dim", 1, 2, &c->qk_pos_emb_head_dim);
    dg_hf_get_int(r, "v_head_dim", 1, 1, &c->v_head_dim);
    dg_hf_get_int(r, "qk_nope_head_dim", 1, 1, &c->qk_head_dim);
    dg_hf_get_int(r, "n_group", 0, 1, &ng);
    dg_hf_get_int(r, "topk_group", 0, 1, &tg);
    if (r->st == DG_OK && c->moe_router_topk > c->num_experts)
        dg_hf_expected(r, "num_experts_per_tok", cJSON_GetObjectItemCaseSensitive(r->o, "num_experts_per_tok"),
                 "at most n_routed_experts %d", c->num_experts);
    if (r->st == DG_OK && ng > 1 && (c->num_experts % ng || tg > ng || c->moe_router_topk != 2 * tg))
        dg_hf_expected(r, "topk_group", cJSON_GetObjectItemCaseSensitive(r->o, "topk_group"),
                 "half of num_experts_per_tok %d, n_group %d dividing n_routed_experts (Megatron's group-limited "
                 "router sums each group's top num_experts_per_tok / topk_group)", c->moe_router_topk, ng);
    c->moe_router_num_groups = ng > 1 ? ng : 0;
    if (ng > 1) c->moe_router_group_topk = tg;
    else if (!r->block) c->moe_router_group_topk = 0;
    double rsf = 1.0;
    dg_hf_get_positive(r, "routed_scaling_factor", &rsf);
    if (rsf != 1.0 || c->moe_router_topk_scaling_factor != 0) c->moe_router_topk_scaling_factor = rsf;
    const cJSON *norm = cJSON_GetObjectItemCaseSensitive(r->o, "norm_topk_prob");
    if (r->st == DG_OK && norm && cJSON_IsBool(norm) && cJSON_IsTrue(norm) != (c->moe_router_topk > 1))
        dg_hf_expected(r, "norm_topk_prob", norm, "%s (Megatron's sigmoid router renormalises above top-1)",
                 c->moe_router_topk > 1 ? "true" : "false");
    dg_hf_refuse(r, "scoring_func", "sigmoid", "\"sigmoid\" (DeepSeek-V3's router)");
    dg_hf_refuse(r, "hidden_act", "silu", "\"silu\" (dagatron's SwiGLU)");
    dg_hf_refuse(r, "attention_bias", NULL, "false (DeepSeek-V3 has no biases)");
    const cJSON *il = cJSON_GetObjectItemCaseSensitive(r->o, "rope_interleave");
    if (r->st == DG_OK && il && !cJSON_IsTrue(il))
        dg_hf_expected(r, "rope_interleave", il, "true (Megatron's MLA rotates the pairs (2i, 2i+1))");
    dg_hf_get_positive(r, "rms_norm_eps", &c->norm_epsilon);
    dg_hf_get_positive(r, "rope_theta", &c->rope_base);
    read_deepseek_rope(r, c);
    read_deepseek_layers(r, c);
    int mtp = c->mtp_num_layers;
    dg_hf_get_int(r, "num_nextn_predict_layers", 0, 0, &mtp);
    if (r->st == DG_OK && mtp > DG_MODEL_MAX_MTP)
        dg_hf_expected(r, "num_nextn_predict_layers", cJSON_GetObjectItemCaseSensitive(r->o, "num_nextn_predict_layers"),
                       "at most %d MTP modules", DG_MODEL_MAX_MTP);
    c->mtp_num_layers = mtp;
    if (mtp > 0 && !(c->mtp_loss_scaling_factor > 0)) c->mtp_loss_scaling_factor = 0.1; /* Megatron's default */
    c->multi_latent_attention = c->qk_layernorm = 1;
    c->num_query_groups = c->num_attention_heads;
    c->kv_channels = 0;
    c->position_embedding = DG_MODEL_POS_ROPE;
    if (c->rotary_percent != 0 && c->rotary_percent != 1.0) c->rotary_percent = 1.0;
    c->normalization_layernorm = c->mlp_gelu = c->quick_geglu = c->add_bias_linear = 0;
    c->glu_linear_offset = c->activation_clamp = 0;
    c->softmax_type = c->attn_window = c->window_attn_skip_freq = 0;
    c->score_function_sigmoid = 1;
    c->router_pre_softmax = 0;
    if (!r->block) c->moe_expert_bias = 1; /* e_score_correction_bias: DeepSeek-V3's aux-loss-free balancing */
}
