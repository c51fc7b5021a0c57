/* dg_hf_config.c — config.json written and read (see dg_hf_config.h). */
#include "dg_hf_config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#define PATH_MAX_LEN 4096

#include "dg_model_record.h"
#include "dg_op_attention.h"
#include "dg_op_rope.h"

static void num(cJSON *o, const char *k, double v) { cJSON_AddNumberToObject(o, k, v); }

/* v as a JSON float, as Python's repr writes it (json.load reads it back as
 * a float): the shortest digits that read back as v, positional between
 * 1e-4 and 1e16 with at least one decimal ("0.0", "10000.0", "0.01"),
 * else with an exponent ("1e-05"). cJSON would print 0.0 as 0, and
 * Transformers' strict config classes refuse an int for a float field. */
static void flt(cJSON *o, const char *k, double v) {
    if (!isfinite(v)) {
        cJSON_AddNullToObject(o, k);
        return;
    }
    char buf[48];
    int fixed = v == 0 || (fabs(v) >= 1e-4 && fabs(v) < 1e16);
    for (int p = fixed ? 0 : 1; p <= (fixed ? 20 : 17); p++) {
        snprintf(buf, sizeof buf, fixed ? "%.*f" : "%.*g", p, v);
        if (strtod(buf, NULL) == v) break;
    }
    if (!strpbrk(buf, ".eE")) strcat(buf, ".0");
    cJSON_AddRawToObject(o, k, buf);
}

/* An id, or null when there is none. */
static void id(cJSON *o, const char *k, int32_t v) {
    if (v >= 0) num(o, k, v);
    else cJSON_AddNullToObject(o, k);
}

static void llama_keys(cJSON *o, const dg_model_config *c, dg_hf_arch a) {
    num(o, "hidden_size", c->hidden_size);
    num(o, "intermediate_size", a == DG_HF_MIXTRAL ? c->moe_ffn_hidden_size : c->ffn_hidden_size);
    if (a == DG_HF_QWEN3_MOE) num(o, "moe_intermediate_size", c->moe_ffn_hidden_size);
    num(o, "num_hidden_layers", c->num_layers);
    num(o, "num_attention_heads", c->num_attention_heads);
    num(o, "num_key_value_heads", c->num_query_groups);
    num(o, "head_dim", (int)dg_model_head_dim(c));
    cJSON_AddStringToObject(o, "hidden_act", "silu");
    num(o, "max_position_embeddings", c->seq_length);
    flt(o, "rms_norm_eps", c->norm_epsilon);
    flt(o, "rope_theta", c->rope_base);
    cJSON_AddNullToObject(o, "rope_scaling");
    flt(o, "attention_dropout", c->attention_dropout);
    if (a == DG_HF_LLAMA) {
        cJSON_AddFalseToObject(o, "attention_bias");
        cJSON_AddFalseToObject(o, "mlp_bias");
        return;
    }
    if (a == DG_HF_QWEN3_MOE) {
        cJSON_AddFalseToObject(o, "attention_bias");
        num(o, "num_experts", c->num_experts);
        num(o, "num_experts_per_tok", c->moe_router_topk);
        cJSON_AddTrueToObject(o, "norm_topk_prob"); /* Megatron's router: softmax over the top-k logits */
        num(o, "decoder_sparse_step", 1);
        cJSON_AddArrayToObject(o, "mlp_only_layers");
        flt(o, "router_aux_loss_coef", c->moe_aux_loss_coeff);
        cJSON_AddFalseToObject(o, "output_router_logits");
        cJSON_AddFalseToObject(o, "use_sliding_window");
        cJSON_AddNullToObject(o, "sliding_window");
        return;
    }
    num(o, "num_local_experts", c->num_experts);
    num(o, "num_experts_per_tok", c->moe_router_topk);
    flt(o, "router_aux_loss_coef", c->moe_aux_loss_coeff);
    flt(o, "router_jitter_noise", 0);
    cJSON_AddFalseToObject(o, "output_router_logits");
    cJSON_AddNullToObject(o, "sliding_window");
}

/* gpt-oss's rope_scaling: null (plain RoPE), or YaRN with its attention
 * factor written out (Transformers' default for it differs from Megatron's
 * concentration factor when --mscale-all-dim is 0 and --mscale is not 1). */
static void gpt_oss_rope(cJSON *o, const dg_model_config *c) {
    if (!c->rope_yarn) {
        cJSON_AddNullToObject(o, "rope_scaling");
        return;
    }
    cJSON *y = cJSON_AddObjectToObject(o, "rope_scaling");
    cJSON_AddStringToObject(y, "rope_type", "yarn");
    flt(y, "factor", c->rotary_scaling_factor);
    num(y, "original_max_position_embeddings", c->yarn_original_max_pos);
    flt(y, "beta_fast", c->yarn_beta_fast);
    flt(y, "beta_slow", c->yarn_beta_slow);
    cJSON_AddBoolToObject(y, "truncate", !c->yarn_unrounded);
    flt(y, "mscale", c->mscale);
    flt(y, "mscale_all_dim", c->mscale_all_dim);
    flt(y, "attention_factor", dg_rope_yarn_mscale(c->rotary_scaling_factor, c->mscale, c->mscale_all_dim));
}

static void gpt_oss_keys(cJSON *o, const dg_model_config *c) {
    num(o, "hidden_size", c->hidden_size);
    num(o, "intermediate_size", c->moe_ffn_hidden_size);
    num(o, "num_hidden_layers", c->num_layers);
    num(o, "num_attention_heads", c->num_attention_heads);
    num(o, "num_key_value_heads", c->num_query_groups);
    num(o, "head_dim", (int)dg_model_head_dim(c));
    num(o, "num_local_experts", c->num_experts);
    num(o, "num_experts_per_tok", c->moe_router_topk);
    cJSON_AddStringToObject(o, "hidden_act", "silu");
    num(o, "max_position_embeddings", c->seq_length);
    flt(o, "rms_norm_eps", c->norm_epsilon);
    flt(o, "rope_theta", c->rope_base);
    gpt_oss_rope(o, c);
    flt(o, "attention_dropout", c->attention_dropout);
    cJSON_AddTrueToObject(o, "attention_bias");
    flt(o, "swiglu_limit", c->activation_clamp);
    if (c->attn_window > 0) num(o, "sliding_window", c->attn_window);
    else cJSON_AddNullToObject(o, "sliding_window");
    cJSON *types = cJSON_AddArrayToObject(o, "layer_types");
    for (int l = 0; l < c->num_layers; l++)
        cJSON_AddItemToArray(types, cJSON_CreateString(dg_model_layer_window(c, l) ? "sliding_attention"
                                                                                    : "full_attention"));
    flt(o, "router_aux_loss_coef", c->moe_aux_loss_coeff);
    cJSON_AddFalseToObject(o, "output_router_logits");
}

static void gpt2_keys(cJSON *o, const dg_model_config *c) {
    num(o, "n_embd", c->hidden_size);
    num(o, "n_layer", c->num_layers);
    num(o, "n_head", c->num_attention_heads);
    num(o, "n_inner", c->ffn_hidden_size);
    num(o, "n_positions", c->max_position_embeddings > 0 ? c->max_position_embeddings : c->seq_length);
    num(o, "n_ctx", c->seq_length);
    cJSON_AddStringToObject(o, "activation_function", "gelu_new");
    flt(o, "layer_norm_epsilon", c->norm_epsilon);
    flt(o, "resid_pdrop", c->hidden_dropout);
    flt(o, "embd_pdrop", c->hidden_dropout);
    flt(o, "attn_pdrop", c->attention_dropout);
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
    num(o, "vocab_size", c->vocab_size);
    if (a == DG_HF_GPT2) gpt2_keys(o, c);
    else if (a == DG_HF_GPT_OSS) gpt_oss_keys(o, c);
    else llama_keys(o, c, a);
    id(o, "bos_token_id", ids->bos);
    id(o, "eos_token_id", ids->eos);
    cJSON_AddBoolToObject(o, "tie_word_embeddings", !c->untie_embeddings);
    cJSON_AddStringToObject(o, "torch_dtype", dtype == DG_BF16 ? "bfloat16" : "float32");
    cJSON *dg = cJSON_AddObjectToObject(o, "dagatron");
    cJSON *model = cJSON_AddObjectToObject(dg, "model");
    for (int i = 0; i < rec.n; i++) num(model, rec.key[i], rec.value[i]);
    if (tok) {
        cJSON *t = cJSON_AddObjectToObject(dg, "tokenizer");
        cJSON_AddStringToObject(t, "type", tok->type);
        num(t, "vocab_size", (double)tok->vocab_size);
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

/* Every refusal is one line: `PATH: "key": expected WHAT, got VALUE`. */
typedef struct reader {
    const cJSON *o;
    const char *path;
    dg_err *err;
    int st;
    int block; /* config.json has the "dagatron" block */
} reader;

/* j as a short JSON text for messages. */
static const char *shown(const cJSON *j, char *buf, size_t len) {
    if (!j) return "nothing (the key is missing)";
    char *s = cJSON_PrintUnformatted(j);
    snprintf(buf, len, "%.60s%s", s ? s : "?", s && strlen(s) > 60 ? "..." : "");
    cJSON_free(s);
    return buf;
}

static void expected(reader *r, const char *k, const cJSON *j, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void expected(reader *r, const char *k, const cJSON *j, const char *fmt, ...) {
    char what[256], got[80];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    r->st = dg_err_set(r->err, DG_EINPUT, "%s: \"%s\": expected %s, got %s", r->path, k, what,
                       shown(j, got, sizeof got));
}

static int is_int(const cJSON *j) {
    return cJSON_IsNumber(j) && floor(j->valuedouble) == j->valuedouble && fabs(j->valuedouble) <= 2147483647.0;
}

/* Key k as an integer >= min into *out (kept when absent or null and !need). */
static void get_int(reader *r, const char *k, int need, int min, int *out) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(r->o, k);
    if (r->st != DG_OK || ((!j || cJSON_IsNull(j)) && !need)) return;
    if (!is_int(j) || j->valuedouble < min) {
        if (min == 1) expected(r, k, j, "a positive integer");
        else expected(r, k, j, "an integer >= %d", min);
        return;
    }
    *out = (int)j->valuedouble;
}

/* Key k as a positive number into *out, when present (epsilons, RoPE's base). */
static void get_positive(reader *r, const char *k, double *out) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(r->o, k);
    if (r->st != DG_OK || !j || cJSON_IsNull(j)) return;
    if (!cJSON_IsNumber(j) || !(j->valuedouble > 0)) expected(r, k, j, "a positive number");
    else *out = j->valuedouble;
}

/* Refuse key k unless it is absent, null, false or equal to ok_str; `what`
 * says what dagatron builds. */
static void refuse(reader *r, const char *k, const char *ok_str, const char *what) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(r->o, k);
    if (r->st != DG_OK || !j || cJSON_IsNull(j) || cJSON_IsFalse(j)) return;
    if (ok_str && cJSON_IsString(j) && !strcmp(j->valuestring, ok_str)) return;
    expected(r, k, j, "%s", what);
}

/* `part` must divide `whole` (both read already): heads and hidden size ... */
static void divides(reader *r, const char *k, int part, const char *whole_key, int whole) {
    if (r->st == DG_OK && part > 0 && whole % part != 0)
        expected(r, k, cJSON_GetObjectItemCaseSensitive(r->o, k), "a divisor of %s %d", whole_key, whole);
}

static void read_llama(reader *r, dg_model_config *c, dg_hf_arch a) {
    get_int(r, "hidden_size", 1, 1, &c->hidden_size);
    get_int(r, "num_hidden_layers", 1, 1, &c->num_layers);
    get_int(r, "num_attention_heads", 1, 1, &c->num_attention_heads);
    if (a == DG_HF_QWEN3_MOE) { /* heads of their own size, and q/k norms */
        int hd = c->hidden_size / c->num_attention_heads;
        get_int(r, "head_dim", 0, 2, &hd);
        c->kv_channels = (int64_t)hd * c->num_attention_heads == c->hidden_size ? 0 : hd;
        if (r->st == DG_OK && hd % 2)
            expected(r, "head_dim", cJSON_GetObjectItemCaseSensitive(r->o, "head_dim"),
                     "an even head size (RoPE rotates pairs)");
        c->qk_layernorm = 1;
    } else {
        c->kv_channels = 0;
        c->qk_layernorm = 0;
    }
    if (a != DG_HF_QWEN3_MOE || !c->kv_channels)
        divides(r, "num_attention_heads", c->num_attention_heads, "hidden_size", c->hidden_size);
    if (r->st == DG_OK && !c->kv_channels && (c->hidden_size / c->num_attention_heads) % 2)
        expected(r, "num_attention_heads", cJSON_GetObjectItemCaseSensitive(r->o, "num_attention_heads"),
                 "a divisor of hidden_size %d leaving an even head size (RoPE rotates pairs)", c->hidden_size);
    c->num_query_groups = c->num_attention_heads;
    get_int(r, "num_key_value_heads", 0, 1, &c->num_query_groups);
    divides(r, "num_key_value_heads", c->num_query_groups, "num_attention_heads", c->num_attention_heads);
    get_int(r, "intermediate_size", a != DG_HF_QWEN3_MOE, 1,
            a == DG_HF_MIXTRAL ? &c->moe_ffn_hidden_size : &c->ffn_hidden_size);
    if (a == DG_HF_QWEN3_MOE) get_int(r, "moe_intermediate_size", 1, 1, &c->moe_ffn_hidden_size);
    get_positive(r, "rms_norm_eps", &c->norm_epsilon);
    get_positive(r, "rope_theta", &c->rope_base);
    int head_dim = 0; /* Qwen3-MoE's was read above: heads of their own size */
    if (a != DG_HF_QWEN3_MOE) get_int(r, "head_dim", 0, 1, &head_dim);
    if (r->st == DG_OK && head_dim && (int64_t)head_dim * c->num_attention_heads != c->hidden_size)
        expected(r, "head_dim", cJSON_GetObjectItemCaseSensitive(r->o, "head_dim"),
                 "hidden_size / num_attention_heads = %d", c->hidden_size / c->num_attention_heads);
    refuse(r, "hidden_act", "silu", "\"silu\" (dagatron's SwiGLU)");
    refuse(r, "rope_scaling", NULL, "null (dagatron's RoPE is unscaled)");
    refuse(r, "attention_bias", NULL, "false (dagatron's Llama has no biases)");
    refuse(r, "mlp_bias", NULL, "false (dagatron's Llama has no biases)");
    if (a != DG_HF_QWEN3_MOE) /* Qwen3 names a window its use_sliding_window turns off */
        refuse(r, "sliding_window", NULL, "null (dagatron's attention is full causal)");
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
            expected(r, "norm_topk_prob", norm, "true (dagatron's router renormalises the top-k, Megatron's default)");
        int step = 1;
        get_int(r, "decoder_sparse_step", 0, 1, &step);
        if (r->st == DG_OK && step != 1)
            expected(r, "decoder_sparse_step", cJSON_GetObjectItemCaseSensitive(r->o, "decoder_sparse_step"),
                     "1 (every layer MoE)");
        const cJSON *dense = cJSON_GetObjectItemCaseSensitive(r->o, "mlp_only_layers");
        if (r->st == DG_OK && dense && !(cJSON_IsArray(dense) && cJSON_GetArraySize(dense) == 0))
            expected(r, "mlp_only_layers", dense, "[] (every layer MoE)");
        refuse(r, "use_sliding_window", NULL, "false (dagatron's attention is full causal)");
    }
    get_int(r, a == DG_HF_QWEN3_MOE ? "num_experts" : "num_local_experts", 1, 1, &c->num_experts);
    get_int(r, "num_experts_per_tok", 1, 1, &c->moe_router_topk);
    if (r->st == DG_OK && c->moe_router_topk > c->num_experts)
        expected(r, "num_experts_per_tok", cJSON_GetObjectItemCaseSensitive(r->o, "num_experts_per_tok"),
                 "at most %s %d", a == DG_HF_QWEN3_MOE ? "num_experts" : "num_local_experts", c->num_experts);
    c->moe_layer_freq = 1;
    c->score_function_sigmoid = 0;
    c->router_pre_softmax = 0;
    c->moe_router_num_groups = 0;
    if (c->moe_router_topk_scaling_factor != 1.0) c->moe_router_topk_scaling_factor = 0;
    c->moe_shared_expert_size = 0;
}

/* Key k of r as a number >= 0 into *out, when present and not null. */
static void get_nonneg(reader *r, const char *k, double *out) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(r->o, k);
    if (r->st != DG_OK || !j || cJSON_IsNull(j)) return;
    if (!cJSON_IsNumber(j) || !(j->valuedouble >= 0)) expected(r, k, j, "a number >= 0");
    else *out = j->valuedouble;
}

/* gpt-oss's rope_scaling: null, or YaRN as Transformers computes it
 * (factor; original_max_position_embeddings, else max_position_embeddings;
 * betas 32 / 1; truncate true: the correction range rounded; the attention
 * factor: attention_factor, else mscale / mscale_all_dim when both are
 * nonzero, else that of mscale 1), which must be one dagatron's --mscale
 * and --mscale-all-dim give. */
static void read_gpt_oss_rope(reader *r, dg_model_config *c, int max_pos) {
    const cJSON *y = cJSON_GetObjectItemCaseSensitive(r->o, "rope_scaling");
    c->rope_yarn = c->yarn_original_max_pos = c->yarn_unrounded = 0;
    c->yarn_beta_fast = c->yarn_beta_slow = c->rotary_scaling_factor = c->mscale = c->mscale_all_dim = 0;
    if (r->st != DG_OK || !y || cJSON_IsNull(y)) return;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(y, "rope_type");
    if (!cJSON_IsObject(y) || !cJSON_IsString(type) || strcmp(type->valuestring, "yarn")) {
        expected(r, "rope_scaling", y, "null or {\"rope_type\": \"yarn\", ...} (dagatron's RoPE or YaRN)");
        return;
    }
    char path[PATH_MAX_LEN];
    snprintf(path, sizeof path, "%s: \"rope_scaling\"", r->path);
    reader s = {y, path, r->err, DG_OK, r->block};
    double f = 0, af = 0, ms = -1, msa = -1;
    int orig = max_pos;
    c->yarn_beta_fast = 32.0;
    c->yarn_beta_slow = 1.0;
    get_positive(&s, "factor", &f);
    if (s.st == DG_OK && !(f > 0)) expected(&s, "factor", cJSON_GetObjectItemCaseSensitive(y, "factor"), "a positive number");
    get_int(&s, "original_max_position_embeddings", 0, 1, &orig);
    get_positive(&s, "beta_fast", &c->yarn_beta_fast);
    get_positive(&s, "beta_slow", &c->yarn_beta_slow);
    get_positive(&s, "attention_factor", &af);
    get_nonneg(&s, "mscale", &ms);
    get_nonneg(&s, "mscale_all_dim", &msa);
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(y, "truncate");
    if (s.st == DG_OK && tr && !cJSON_IsBool(tr)) expected(&s, "truncate", tr, "true or false");
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
            expected(&s, "attention_factor", cJSON_GetObjectItemCaseSensitive(y, "attention_factor"),
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
static void read_gpt_oss_window(reader *r, dg_model_config *c) {
    int win = 128, L = c->num_layers, want[DG_MODEL_MAX_PATTERN_LAYERS], any = 0;
    get_int(r, "sliding_window", 0, 1, &win);
    const cJSON *types = cJSON_GetObjectItemCaseSensitive(r->o, "layer_types");
    if (r->st != DG_OK) return;
    if (L > DG_MODEL_MAX_PATTERN_LAYERS || (types && !(cJSON_IsArray(types) && cJSON_GetArraySize(types) == L))) {
        expected(r, "layer_types", types, "a list of num_hidden_layers %d (at most %d) layer types", L,
                 DG_MODEL_MAX_PATTERN_LAYERS);
        return;
    }
    for (int l = 0; l < L; l++) {
        const cJSON *t = types ? cJSON_GetArrayItem(types, l) : NULL;
        int full = t ? cJSON_IsString(t) && !strcmp(t->valuestring, "full_attention") : l % 2 == 1;
        if (t && !full && !(cJSON_IsString(t) && !strcmp(t->valuestring, "sliding_attention"))) {
            expected(r, "layer_types", types, "\"sliding_attention\" or \"full_attention\" for each layer");
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

static void read_gpt_oss(reader *r, dg_model_config *c) {
    get_int(r, "hidden_size", 1, 1, &c->hidden_size);
    get_int(r, "num_hidden_layers", 1, 1, &c->num_layers);
    get_int(r, "num_attention_heads", 1, 1, &c->num_attention_heads);
    int hd = r->st == DG_OK ? c->hidden_size / c->num_attention_heads : 0;
    get_int(r, "head_dim", 0, 2, &hd);
    c->kv_channels = (int64_t)hd * c->num_attention_heads == c->hidden_size ? 0 : hd;
    if (r->st == DG_OK && hd % 2)
        expected(r, "head_dim", cJSON_GetObjectItemCaseSensitive(r->o, "head_dim"), "an even head size (RoPE rotates pairs)");
    c->num_query_groups = c->num_attention_heads;
    get_int(r, "num_key_value_heads", 0, 1, &c->num_query_groups);
    divides(r, "num_key_value_heads", c->num_query_groups, "num_attention_heads", c->num_attention_heads);
    get_int(r, "intermediate_size", 1, 1, &c->moe_ffn_hidden_size);
    get_int(r, "num_local_experts", 1, 1, &c->num_experts);
    get_int(r, "num_experts_per_tok", 1, 1, &c->moe_router_topk);
    if (r->st == DG_OK && c->moe_router_topk > c->num_experts)
        expected(r, "num_experts_per_tok", cJSON_GetObjectItemCaseSensitive(r->o, "num_experts_per_tok"),
                 "at most num_local_experts %d", c->num_experts);
    get_positive(r, "rms_norm_eps", &c->norm_epsilon);
    get_positive(r, "rope_theta", &c->rope_base);
    c->activation_clamp = 7.0; /* Transformers' default swiglu_limit */
    get_positive(r, "swiglu_limit", &c->activation_clamp);
    refuse(r, "hidden_act", "silu", "\"silu\" (gpt-oss's quick GeGLU)");
    const cJSON *bias = cJSON_GetObjectItemCaseSensitive(r->o, "attention_bias");
    if (r->st == DG_OK && bias && !cJSON_IsTrue(bias))
        expected(r, "attention_bias", bias, "true (dagatron's gpt-oss has every linear bias)");
    int max_pos = 131072;
    get_int(r, "max_position_embeddings", 0, 1, &max_pos);
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

static void read_gpt2(reader *r, dg_model_config *c) {
    get_int(r, "n_embd", 1, 1, &c->hidden_size);
    get_int(r, "n_layer", 1, 1, &c->num_layers);
    get_int(r, "n_head", 1, 1, &c->num_attention_heads);
    divides(r, "n_head", c->num_attention_heads, "n_embd", c->hidden_size);
    c->num_query_groups = c->num_attention_heads;
    c->ffn_hidden_size = 4 * c->hidden_size;
    get_int(r, "n_inner", 0, 1, &c->ffn_hidden_size);
    get_int(r, "n_positions", 1, 1, &c->max_position_embeddings);
    get_positive(r, "layer_norm_epsilon", &c->norm_epsilon);
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(r->o, "activation_function");
    if (r->st == DG_OK && act && !(cJSON_IsString(act) && (!strcmp(act->valuestring, "gelu_new") ||
                                                           !strcmp(act->valuestring, "gelu_pytorch_tanh"))))
        expected(r, "activation_function", act, "\"gelu_new\" (dagatron's GeLU is tanh)");
    c->position_embedding = DG_MODEL_POS_LEARNED;
    c->normalization_layernorm = 1;
    c->mlp_gelu = 1;
    c->add_bias_linear = 1;
    c->num_experts = 0;
    if (c->seq_length <= 0 || c->seq_length > c->max_position_embeddings) c->seq_length = c->max_position_embeddings;
}

static int is_id(const cJSON *j) { return is_int(j) && j->valuedouble >= 0; }

/* A token id key into *out: an id, null (-1), or when list_ok a list of ids
 * (eos_token_id may be several; one alone is taken, several are -1). */
static void get_id(reader *r, const char *k, int list_ok, int32_t *out) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(r->o, k);
    if (r->st != DG_OK || !j) return;
    const char *what = list_ok ? "an id, a list of ids or null" : "an id or null";
    if (cJSON_IsNull(j)) {
        *out = -1;
    } else if (list_ok && cJSON_IsArray(j)) {
        for (const cJSON *e = j->child; e; e = e->next)
            if (!is_id(e)) {
                expected(r, k, j, "%s", what);
                return;
            }
        *out = cJSON_GetArraySize(j) == 1 ? (int32_t)j->child->valuedouble : -1;
    } else if (!is_id(j)) {
        expected(r, k, j, "%s", what);
    } else {
        *out = (int32_t)j->valuedouble;
    }
}

static void get_ids(reader *r, dg_hf_ids *ids) {
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
                                  j->string, shown(j, got, sizeof got));
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
static void read_model_type(reader *r, dg_hf_arch *a) {
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(r->o, "model_type");
    for (int i = 0; i < DG_HF_ARCH_COUNT && cJSON_IsString(mt); i++)
        if (!strcmp(mt->valuestring, dg_hf_arch_model_type((dg_hf_arch)i))) {
            *a = (dg_hf_arch)i;
            return;
        }
    /* Mistral is Llama's layout; its sliding window is refused like Llama's */
    if (cJSON_IsString(mt) && !strcmp(mt->valuestring, "mistral")) *a = DG_HF_LLAMA;
    else expected(r, "model_type", mt, "one dagatron imports: \"mixtral\", \"qwen3_moe\", \"gpt_oss\", \"llama\", "
                                       "\"mistral\" or \"gpt2\"");
}

int dg_hf_config_read(const char *text, const char *path, dg_model_config *c, dg_hf_arch *a, dg_ckpt_tokenizer *tok,
                      dg_hf_ids *ids, dg_err *err) {
    memset(tok, 0, sizeof *tok);
    ids->bos = ids->eos = -1;
    cJSON *root = parse_object(text, path, err);
    if (!root) return DG_EINPUT;
    reader r = {root, path, err, DG_OK, 0};
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
    get_int(&r, "vocab_size", 1, 2, &c->vocab_size);
    if (r.st == DG_OK && *a == DG_HF_GPT2) read_gpt2(&r, c);
    else if (r.st == DG_OK && *a == DG_HF_GPT_OSS) read_gpt_oss(&r, c);
    else if (r.st == DG_OK) read_llama(&r, c, *a);
    get_ids(&r, ids);
    const cJSON *tie = cJSON_GetObjectItemCaseSensitive(root, "tie_word_embeddings");
    if (r.st == DG_OK && cJSON_IsBool(tie)) c->untie_embeddings = !cJSON_IsTrue(tie);
    if (r.st == DG_OK && c->seq_length <= 0) {
        int maxpos = 4096;
        get_int(&r, "max_position_embeddings", 0, 1, &maxpos);
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
    reader r = {root, path, err, DG_OK, 0};
    get_ids(&r, ids);
    cJSON_Delete(root);
    return r.st;
}
