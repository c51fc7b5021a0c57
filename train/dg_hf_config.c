/* dg_hf_config.c — config.json written and read (see dg_hf_config.h). */
#include "dg_hf_config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "dg_hf_config_util.h"
#include "dg_model_record.h"


/* An id, or null when there is none. */
static void id(cJSON *o, const char *k, int32_t v) {
    if (v >= 0) dg_hf_num(o, k, v);
    else cJSON_AddNullToObject(o, k);
}

static void llama_keys(cJSON *o, const dg_model_config *c, dg_hf_arch a) {
    dg_hf_num(o, "hidden_size", c->hidden_size);
    dg_hf_num(o, "intermediate_size", a == DG_HF_MIXTRAL ? c->moe_ffn_hidden_size : c->ffn_hidden_size);
    if (a == DG_HF_QWEN3_MOE) dg_hf_num(o, "moe_intermediate_size", c->moe_ffn_hidden_size);
    dg_hf_num(o, "num_hidden_layers", c->num_layers);
    dg_hf_num(o, "num_attention_heads", c->num_attention_heads);
    dg_hf_num(o, "num_key_value_heads", c->num_query_groups);
    dg_hf_num(o, "head_dim", (int)dg_model_head_dim(c));
    cJSON_AddStringToObject(o, "hidden_act", "silu");
    dg_hf_num(o, "max_position_embeddings", c->seq_length);
    dg_hf_flt(o, "rms_norm_eps", c->norm_epsilon);
    dg_hf_flt(o, "rope_theta", c->rope_base);
    cJSON_AddNullToObject(o, "rope_scaling");
    dg_hf_flt(o, "attention_dropout", c->attention_dropout);
    if (a == DG_HF_LLAMA) {
        cJSON_AddFalseToObject(o, "attention_bias");
        cJSON_AddFalseToObject(o, "mlp_bias");
        return;
    }
    if (a == DG_HF_QWEN3_MOE) {
        cJSON_AddFalseToObject(o, "attention_bias");
        dg_hf_num(o, "num_experts", c->num_experts);
        dg_hf_num(o, "num_experts_per_tok", c->moe_router_topk);
        cJSON_AddTrueToObject(o, "norm_topk_prob"); /* Megatron's router: softmax over the top-k logits */
        dg_hf_num(o, "decoder_sparse_step", 1);
        cJSON_AddArrayToObject(o, "mlp_only_layers");
        dg_hf_flt(o, "router_aux_loss_coef", c->moe_aux_loss_coeff);
        cJSON_AddFalseToObject(o, "output_router_logits");
        cJSON_AddFalseToObject(o, "use_sliding_window");
        cJSON_AddNullToObject(o, "sliding_window");
        return;
    }
    dg_hf_num(o, "num_local_experts", c->num_experts);
    dg_hf_num(o, "num_experts_per_tok", c->moe_router_topk);
    dg_hf_flt(o, "router_aux_loss_coef", c->moe_aux_loss_coeff);
    dg_hf_flt(o, "router_jitter_noise", 0);
    cJSON_AddFalseToObject(o, "output_router_logits");
    cJSON_AddNullToObject(o, "sliding_window");
}

static void gpt2_keys(cJSON *o, const dg_model_config *c) {
    dg_hf_num(o, "n_embd", c->hidden_size);
    dg_hf_num(o, "n_layer", c->num_layers);
    dg_hf_num(o, "n_head", c->num_attention_heads);
    dg_hf_num(o, "n_inner", c->ffn_hidden_size);
    dg_hf_num(o, "n_positions", c->max_position_embeddings > 0 ? c->max_position_embeddings : c->seq_length);
    dg_hf_num(o, "n_ctx", c->seq_length);
    cJSON_AddStringToObject(o, "activation_function", "gelu_new");
    dg_hf_flt(o, "layer_norm_epsilon", c->norm_epsilon);
    dg_hf_flt(o, "resid_pdrop", c->hidden_dropout);
    dg_hf_flt(o, "embd_pdrop", c->hidden_dropout);
    dg_hf_flt(o, "attn_pdrop", c->attention_dropout);
    cJSON_AddTrueToObject(o, "scale_attn_weights");
}

static char *print(cJSON *o) {
    char *s = cJSON_Print(o);
    cJSON_Delete(o);
    char *out = dg_strdup(s);
    cJSON_free(s);
    return out;
}

char *dg_hf_config_write(const dg_model_config *c, dg_hf_arch a, dg_dtype dtype, const dg_ckpt_tokenizer *tok,
                         const dg_hf_ids *ids, dg_err *err) {
    dg_ckpt_config rec;
    memset(&rec, 0, sizeof rec);
    if (dg_model_to_record(c, &rec, err) != DG_OK) return NULL;
    cJSON *o = cJSON_CreateObject();
    cJSON *arch = cJSON_AddArrayToObject(o, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString(dg_hf_arch_class(a)));
    cJSON_AddStringToObject(o, "model_type", dg_hf_arch_model_type(a));
    dg_hf_num(o, "vocab_size", c->vocab_size);
    if (a == DG_HF_GPT2) gpt2_keys(o, c);
    else if (a == DG_HF_GPT_OSS) dg_hf_gpt_oss_keys(o, c);
    else if (a == DG_HF_DEEPSEEK_V3) dg_hf_deepseek_v3_keys(o, c);
    else llama_keys(o, c, a);
    id(o, "bos_token_id", ids->bos);
    id(o, "eos_token_id", ids->eos);
    cJSON_AddBoolToObject(o, "tie_word_embeddings", !c->untie_embeddings);
    cJSON_AddStringToObject(o, "torch_dtype", dtype == DG_BF16 ? "bfloat16" : "float32");
    cJSON *dg = cJSON_AddObjectToObject(o, "dagatron");
    cJSON *model = cJSON_AddObjectToObject(dg, "model");
    for (int i = 0; i < rec.n; i++) dg_hf_num(model, rec.key[i], rec.value[i]);
    if (tok) {
        cJSON *t = cJSON_AddObjectToObject(dg, "tokenizer");
        cJSON_AddStringToObject(t, "type", tok->type);
        dg_hf_num(t, "vocab_size", (double)tok->vocab_size);
    }
    return print(o);
}

char *dg_hf_generation_config_write(const dg_hf_ids *ids) {
    cJSON *o = cJSON_CreateObject();
    id(o, "bos_token_id", ids->bos);
    id(o, "eos_token_id", ids->eos);
    return print(o);
}

/* ---- reading ------------------------------------------------------------------- */

/* The helpers of a config.json's reading and writing: dg_hf_config_util.c. */

static void read_llama(dg_hf_reader *r, dg_model_config *c, dg_hf_arch a) {
    dg_hf_get_int(r, "hidden_size", 1, 1, &c->hidden_size);
    dg_hf_get_int(r, "num_hidden_layers", 1, 1, &c->num_layers);
    dg_hf_get_int(r, "num_attention_heads", 1, 1, &c->num_attention_heads);
    if (a == DG_HF_QWEN3_MOE) { /* heads of their own size, and q/k norms */
        int hd = c->hidden_size / c->num_attention_heads;
        dg_hf_get_int(r, "head_dim", 0, 2, &hd);
        c->kv_channels = (int64_t)hd * c->num_attention_heads == c->hidden_size ? 0 : hd;
        if (r->st == DG_OK && hd % 2)
            dg_hf_expected(r, "head_dim", cJSON_GetObjectItemCaseSensitive(r->o, "head_dim"),
                     "an even head size (RoPE rotates pairs)");
        c->qk_layernorm = 1;
    } else {
        c->kv_channels = 0;
        c->qk_layernorm = 0;
    }
    if (a != DG_HF_QWEN3_MOE || !c->kv_channels)
        dg_hf_divides(r, "num_attention_heads", c->num_attention_heads, "hidden_size", c->hidden_size);
    if (r->st == DG_OK && !c->kv_channels && (c->hidden_size / c->num_attention_heads) % 2)
        dg_hf_expected(r, "num_attention_heads", cJSON_GetObjectItemCaseSensitive(r->o, "num_attention_heads"),
                 "a divisor of hidden_size %d leaving an even head size (RoPE rotates pairs)", c->hidden_size);
    c->num_query_groups = c->num_attention_heads;
    dg_hf_get_int(r, "num_key_value_heads", 0, 1, &c->num_query_groups);
    dg_hf_divides(r, "num_key_value_heads", c->num_query_groups, "num_attention_heads", c->num_attention_heads);
    dg_hf_get_int(r, "intermediate_size", a != DG_HF_QWEN3_MOE, 1,
            a == DG_HF_MIXTRAL ? &c->moe_ffn_hidden_size : &c->ffn_hidden_size);
    if (a == DG_HF_QWEN3_MOE) dg_hf_get_int(r, "moe_intermediate_size", 1, 1, &c->moe_ffn_hidden_size);
    dg_hf_get_positive(r, "rms_norm_eps", &c->norm_epsilon);
    dg_hf_get_positive(r, "rope_theta", &c->rope_base);
    int head_dim = 0; /* Qwen3-MoE's was read above: heads of their own size */
    if (a != DG_HF_QWEN3_MOE) dg_hf_get_int(r, "head_dim", 0, 1, &head_dim);
    if (r->st == DG_OK && head_dim && (int64_t)head_dim * c->num_attention_heads != c->hidden_size)
        dg_hf_expected(r, "head_dim", cJSON_GetObjectItemCaseSensitive(r->o, "head_dim"),
                 "hidden_size / num_attention_heads = %d", c->hidden_size / c->num_attention_heads);
    dg_hf_refuse(r, "hidden_act", "silu", "\"silu\" (dagatron's SwiGLU)");
    dg_hf_refuse(r, "rope_scaling", NULL, "null (dagatron's RoPE is unscaled)");
    dg_hf_refuse(r, "attention_bias", NULL, "false (dagatron's Llama has no biases)");
    dg_hf_refuse(r, "mlp_bias", NULL, "false (dagatron's Llama has no biases)");
    if (a != DG_HF_QWEN3_MOE) /* Qwen3 names a window its use_sliding_window turns off */
        dg_hf_refuse(r, "sliding_window", NULL, "null (dagatron's attention is full causal)");
    c->position_embedding = DG_MODEL_POS_ROPE;
    c->normalization_layernorm = 0;
    c->mlp_gelu = 0;
    c->add_bias_linear = 0;
    if (c->rotary_percent != 0 && c->rotary_percent != 1.0) c->rotary_percent = 1.0;
    if (a == DG_HF_LLAMA) {
        c->num_experts = 0;
        return;
    }
    if (a == DG_HF_QWEN3_MOE) {
        const cJSON *norm = cJSON_GetObjectItemCaseSensitive(r->o, "norm_topk_prob");
        if (r->st == DG_OK && !cJSON_IsTrue(norm))
            dg_hf_expected(r, "norm_topk_prob", norm, "true (dagatron's router renormalises the top-k, Megatron's default)");
        int step = 1;
        dg_hf_get_int(r, "decoder_sparse_step", 0, 1, &step);
        if (r->st == DG_OK && step != 1)
            dg_hf_expected(r, "decoder_sparse_step", cJSON_GetObjectItemCaseSensitive(r->o, "decoder_sparse_step"),
                     "1 (every layer MoE)");
        const cJSON *dense = cJSON_GetObjectItemCaseSensitive(r->o, "mlp_only_layers");
        if (r->st == DG_OK && dense && !(cJSON_IsArray(dense) && cJSON_GetArraySize(dense) == 0))
            dg_hf_expected(r, "mlp_only_layers", dense, "[] (every layer MoE)");
        dg_hf_refuse(r, "use_sliding_window", NULL, "false (dagatron's attention is full causal)");
    }
    dg_hf_get_int(r, a == DG_HF_QWEN3_MOE ? "num_experts" : "num_local_experts", 1, 1, &c->num_experts);
    dg_hf_get_int(r, "num_experts_per_tok", 1, 1, &c->moe_router_topk);
    if (r->st == DG_OK && c->moe_router_topk > c->num_experts)
        dg_hf_expected(r, "num_experts_per_tok", cJSON_GetObjectItemCaseSensitive(r->o, "num_experts_per_tok"),
                 "at most %s %d", a == DG_HF_QWEN3_MOE ? "num_experts" : "num_local_experts", c->num_experts);
    c->moe_layer_freq = 1;
    c->score_function_sigmoid = 0;
    c->router_pre_softmax = 0;
    c->moe_router_num_groups = 0;
    if (c->moe_router_topk_scaling_factor != 1.0) c->moe_router_topk_scaling_factor = 0;
    c->moe_shared_expert_size = 0;
}

static void read_gpt2(dg_hf_reader *r, dg_model_config *c) {
    dg_hf_get_int(r, "n_embd", 1, 1, &c->hidden_size);
    dg_hf_get_int(r, "n_layer", 1, 1, &c->num_layers);
    dg_hf_get_int(r, "n_head", 1, 1, &c->num_attention_heads);
    dg_hf_divides(r, "n_head", c->num_attention_heads, "n_embd", c->hidden_size);
    c->num_query_groups = c->num_attention_heads;
    c->ffn_hidden_size = 4 * c->hidden_size;
    dg_hf_get_int(r, "n_inner", 0, 1, &c->ffn_hidden_size);
    dg_hf_get_int(r, "n_positions", 1, 1, &c->max_position_embeddings);
    dg_hf_get_positive(r, "layer_norm_epsilon", &c->norm_epsilon);
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(r->o, "activation_function");
    if (r->st == DG_OK && act && !(cJSON_IsString(act) && (!strcmp(act->valuestring, "gelu_new") ||
                                                           !strcmp(act->valuestring, "gelu_pytorch_tanh"))))
        dg_hf_expected(r, "activation_function", act, "\"gelu_new\" (dagatron's GeLU is tanh)");
    c->position_embedding = DG_MODEL_POS_LEARNED;
    c->normalization_layernorm = 1;
    c->mlp_gelu = 1;
    c->add_bias_linear = 1;
    c->num_experts = 0;
    if (c->seq_length <= 0 || c->seq_length > c->max_position_embeddings) c->seq_length = c->max_position_embeddings;
}

static int is_id(const cJSON *j) { return dg_hf_is_int(j) && j->valuedouble >= 0; }

/* A token id key into *out: an id, null (-1), or when list_ok a list of ids
 * (eos_token_id may be several; one alone is taken, several are -1). */
static void get_id(dg_hf_reader *r, const char *k, int list_ok, int32_t *out) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(r->o, k);
    if (r->st != DG_OK || !j) return;
    const char *what = list_ok ? "an id, a list of ids or null" : "an id or null";
    if (cJSON_IsNull(j)) {
        *out = -1;
    } else if (list_ok && cJSON_IsArray(j)) {
        for (const cJSON *e = j->child; e; e = e->next)
            if (!is_id(e)) {
                dg_hf_expected(r, k, j, "%s", what);
                return;
            }
        *out = cJSON_GetArraySize(j) == 1 ? (int32_t)j->child->valuedouble : -1;
    } else if (!is_id(j)) {
        dg_hf_expected(r, k, j, "%s", what);
    } else {
        *out = (int32_t)j->valuedouble;
    }
}

static void get_ids(dg_hf_reader *r, dg_hf_ids *ids) {
    get_id(r, "bos_token_id", 0, &ids->bos);
    get_id(r, "eos_token_id", 1, &ids->eos);
}

/* The "dagatron" block: the config record and the tokenizer, when present. */
static int read_block(const cJSON *root, const char *path, dg_model_config *c, dg_ckpt_tokenizer *tok, dg_err *err) {
    const cJSON *dg = cJSON_GetObjectItemCaseSensitive(root, "dagatron");
    if (!cJSON_IsObject(dg)) return DG_OK;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(dg, "model");
    if (cJSON_IsObject(model)) {
        dg_ckpt_config rec;
        memset(&rec, 0, sizeof rec);
        char got[80];
        for (const cJSON *j = model->child; j; j = j->next)
            if (!cJSON_IsNumber(j) || dg_ckpt_config_set(&rec, j->string, j->valuedouble, NULL) != DG_OK)
                return dg_err_set(err, DG_EINPUT, "%s: \"dagatron\".\"model\".\"%s\": expected a number, got %s", path,
                                  j->string, dg_hf_shown(j, got, sizeof got));
        DG_TRY(dg_model_from_record(&rec, c, path, err));
    }
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(dg, "tokenizer");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type");
    const cJSON *vs = cJSON_GetObjectItemCaseSensitive(t, "vocab_size");
    if (cJSON_IsString(type)) snprintf(tok->type, sizeof tok->type, "%s", type->valuestring);
    if (cJSON_IsNumber(vs)) tok->vocab_size = (int64_t)vs->valuedouble;
    return DG_OK;
}

static cJSON *parse_object(const char *text, const char *path, dg_err *err) {
    cJSON *root = cJSON_Parse(text);
    if (cJSON_IsObject(root)) return root;
    cJSON_Delete(root);
    dg_err_set(err, DG_EINPUT, "%s: not a JSON object", path);
    return NULL;
}

/* config.json's "model_type" into *a. */
static void read_model_type(dg_hf_reader *r, dg_hf_arch *a) {
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(r->o, "model_type");
    for (int i = 0; i < DG_HF_ARCH_COUNT && cJSON_IsString(mt); i++)
        if (!strcmp(mt->valuestring, dg_hf_arch_model_type((dg_hf_arch)i))) {
            *a = (dg_hf_arch)i;
            return;
        }
    /* Mistral is Llama's layout; its sliding window is refused like Llama's */
    if (cJSON_IsString(mt) && !strcmp(mt->valuestring, "mistral")) *a = DG_HF_LLAMA;
    else dg_hf_expected(r, "model_type", mt, "one dagatron imports: \"mixtral\", \"qwen3_moe\", \"gpt_oss\", \"deepseek_v3\", \"llama\", "
                                       "\"mistral\" or \"gpt2\"");
}

int dg_hf_config_read(const char *text, const char *path, dg_model_config *c, dg_hf_arch *a, dg_ckpt_tokenizer *tok,
                      dg_hf_ids *ids, dg_err *err) {
    memset(tok, 0, sizeof *tok);
    ids->bos = ids->eos = -1;
    cJSON *root = parse_object(text, path, err);
    if (!root) return DG_EINPUT;
    dg_hf_reader r = {root, path, err, DG_OK, 0};
    read_model_type(&r, a);
    if (r.st == DG_OK) {
        /* defaults for what neither side says: Megatron's */
        dg_model_config_tiny(c);
        c->micro_batch_size = 1;
        c->moe_aux_loss_coeff = c->moe_z_loss_coeff = 0;
        c->seq_length = 0;
        c->norm_epsilon = *a == DG_HF_GPT2 ? 1e-5 : 1e-6;
        c->untie_embeddings = *a != DG_HF_GPT2;
        r.st = read_block(root, path, c, tok, err);
        r.block = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(root, "dagatron"));
    }
    dg_hf_get_int(&r, "vocab_size", 1, 2, &c->vocab_size);
    if (r.st == DG_OK && *a == DG_HF_GPT2) read_gpt2(&r, c);
    else if (r.st == DG_OK && *a == DG_HF_GPT_OSS) dg_hf_read_gpt_oss(&r, c);
    else if (r.st == DG_OK && *a == DG_HF_DEEPSEEK_V3) dg_hf_read_deepseek_v3(&r, c);
    else if (r.st == DG_OK) read_llama(&r, c, *a);
    get_ids(&r, ids);
    const cJSON *tie = cJSON_GetObjectItemCaseSensitive(root, "tie_word_embeddings");
    if (r.st == DG_OK && cJSON_IsBool(tie)) c->untie_embeddings = !cJSON_IsTrue(tie);
    if (r.st == DG_OK && c->seq_length <= 0) {
        int maxpos = 4096;
        dg_hf_get_int(&r, "max_position_embeddings", 0, 1, &maxpos);
        c->seq_length = DG_MIN(maxpos, 4096);
    }
    cJSON_Delete(root);
    dg_err e = {{0}};
    if (r.st == DG_OK && dg_model_config_check(c, &e) != DG_OK)
        return dg_err_set(err, DG_EINPUT, "%s: its model is not one dagatron builds: %s", path, e.msg);
    return r.st;
}

int dg_hf_generation_config_read(const char *text, const char *path, dg_hf_ids *ids, dg_err *err) {
    cJSON *root = parse_object(text, path, err);
    if (!root) return DG_EINPUT;
    dg_hf_reader r = {root, path, err, DG_OK, 0};
    get_ids(&r, ids);
    cJSON_Delete(root);
    return r.st;
}
