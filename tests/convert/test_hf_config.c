/* test_hf_config.c — config.json's refusals (train/dg_hf_config.h; issue
 * 25, item 14; gpt-oss and DeepSeek-V3: issue 29): each bad value of a
 * field of Mixtral's, Llama's, GPT-2's, gpt-oss's or DeepSeek-V3's
 * config.json is one line `PATH: "field": expected WHAT, got VALUE`, naming
 * the file once, the field, what was expected and the value (the issue's
 * `num_attention_heads: 0` printed the path twice and an empty reason); and
 * the generation ids are read back from config.json and
 * generation_config.json. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "dg_hf_config.h"

#define PATH "/data/hf/model/config.json"

static void mixtral(dg_model_config *c) {
    dg_model_config_tiny(c); /* MoE on every layer, SwiGLU, RMSNorm, RoPE, no biases */
    c->num_query_groups = 2;
}

static void llama(dg_model_config *c) {
    mixtral(c);
    c->num_experts = 0;
}

static void gpt2(dg_model_config *c) {
    dg_model_config_tiny(c);
    c->num_experts = 0;
    c->num_query_groups = c->num_attention_heads;
    c->mlp_gelu = c->add_bias_linear = c->normalization_layernorm = 1;
    c->position_embedding = DG_MODEL_POS_LEARNED;
    c->max_position_embeddings = c->seq_length;
}

static void gpt_oss(dg_model_config *c) {
    mixtral(c);
    c->quick_geglu = c->add_bias_linear = 1;
    c->glu_linear_offset = 1.0;
    c->activation_clamp = 7.0;
    c->softmax_type = 2; /* learnable */
    c->attn_window = 5;
    c->window_attn_skip_freq = 2;
}

static void deepseek_v3(dg_model_config *c) {
    dg_model_config_tiny(c);
    c->num_query_groups = c->num_attention_heads;
    c->multi_latent_attention = c->qk_layernorm = 1;
    c->q_lora_rank = 24;
    c->kv_lora_rank = 16;
    c->qk_head_dim = c->qk_pos_emb_head_dim = 8;
    c->v_head_dim = 12;
    c->score_function_sigmoid = c->moe_expert_bias = 1;
    c->moe_shared_expert_size = 2 * c->moe_ffn_hidden_size;
}

/* config.json as export writes it for the model `make` builds. */
static cJSON *written(void (*make)(dg_model_config *), dg_hf_arch arch) {
    dg_model_config c;
    make(&c);
    dg_err err = {{0}};
    dg_hf_ids ids = {3, 5};
    char *text = dg_hf_config_write(&c, arch, DG_F32, NULL, &ids, &err);
    assert_non_null(text);
    cJSON *o = cJSON_Parse(text);
    dg_free(text);
    assert_non_null(o);
    return o;
}

static int count(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

/* config.json with `key` set to the JSON `value` (NULL: removed) is refused
 * in one line naming the file once, "key", what was expected, and `got`. */
static void refused(void (*make)(dg_model_config *), dg_hf_arch arch, const char *key, const char *value,
                    const char *got) {
    cJSON *o = written(make, arch);
    cJSON_DeleteItemFromObjectCaseSensitive(o, key);
    if (value) cJSON_AddItemToObject(o, key, cJSON_Parse(value));
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    dg_model_config c;
    dg_hf_arch a;
    dg_ckpt_tokenizer tok;
    dg_hf_ids ids;
    dg_err err = {{0}};
    int st = dg_hf_config_read(text, PATH, &c, &a, &tok, &ids, &err);
    free(text);
    char want_key[96], want_got[128];
    snprintf(want_key, sizeof want_key, PATH ": \"%s\": expected ", key);
    snprintf(want_got, sizeof want_got, ", got %s", got);
    printf("%s = %s -> %s\n", key, value ? value : "(removed)", err.msg);
    assert_int_equal(st, DG_EINPUT);
    assert_null(strchr(err.msg, '\n'));
    assert_int_equal(count(err.msg, PATH), 1);
    assert_ptr_equal(strstr(err.msg, want_key), err.msg); /* the file, the field, then what was expected */
    assert_true(strlen(err.msg) > strlen(want_key) + strlen(want_got)); /* a reason between them */
    assert_non_null(strstr(err.msg, want_got));
}

static void test_mixtral(void **state) {
    (void)state;
    refused(mixtral, DG_HF_MIXTRAL, "num_attention_heads", "0", "0"); /* the case */
    refused(mixtral, DG_HF_MIXTRAL, "num_attention_heads", "-4", "-4");
    refused(mixtral, DG_HF_MIXTRAL, "num_attention_heads", "\"4\"", "\"4\"");
    refused(mixtral, DG_HF_MIXTRAL, "num_attention_heads", "3", "3"); /* does not divide hidden_size */
    refused(mixtral, DG_HF_MIXTRAL, "hidden_size", NULL, "nothing");
    refused(mixtral, DG_HF_MIXTRAL, "hidden_size", "null", "null");
    refused(mixtral, DG_HF_MIXTRAL, "num_hidden_layers", "1.5", "1.5");
    refused(mixtral, DG_HF_MIXTRAL, "num_hidden_layers", "true", "true");
    refused(mixtral, DG_HF_MIXTRAL, "intermediate_size", "0", "0");
    refused(mixtral, DG_HF_MIXTRAL, "num_key_value_heads", "3", "3");
    refused(mixtral, DG_HF_MIXTRAL, "num_key_value_heads", "0", "0");
    refused(mixtral, DG_HF_MIXTRAL, "head_dim", "7", "7");
    refused(mixtral, DG_HF_MIXTRAL, "rms_norm_eps", "\"x\"", "\"x\"");
    refused(mixtral, DG_HF_MIXTRAL, "rms_norm_eps", "-1e-5", "-1e-05");
    refused(mixtral, DG_HF_MIXTRAL, "rope_theta", "0", "0");
    refused(mixtral, DG_HF_MIXTRAL, "hidden_act", "\"gelu\"", "\"gelu\"");
    refused(mixtral, DG_HF_MIXTRAL, "rope_scaling", "{\"type\":\"linear\",\"factor\":2}", "{\"type\":\"linear\"");
    refused(mixtral, DG_HF_MIXTRAL, "sliding_window", "4096", "4096");
    refused(mixtral, DG_HF_MIXTRAL, "num_local_experts", "0", "0");
    refused(mixtral, DG_HF_MIXTRAL, "num_experts_per_tok", "9", "9");
    refused(mixtral, DG_HF_MIXTRAL, "vocab_size", "1", "1");
    refused(mixtral, DG_HF_MIXTRAL, "model_type", "\"bert\"", "\"bert\"");
    refused(mixtral, DG_HF_MIXTRAL, "model_type", NULL, "nothing");
    refused(mixtral, DG_HF_MIXTRAL, "eos_token_id", "\"2\"", "\"2\"");
    refused(mixtral, DG_HF_MIXTRAL, "eos_token_id", "[2,-1]", "[2,-1]");
    refused(mixtral, DG_HF_MIXTRAL, "bos_token_id", "1.5", "1.5");
}

static void test_llama(void **state) {
    (void)state;
    refused(llama, DG_HF_LLAMA, "num_attention_heads", "0", "0");
    refused(llama, DG_HF_LLAMA, "num_attention_heads", "64", "64"); /* head size 1: RoPE rotates pairs */
    refused(llama, DG_HF_LLAMA, "attention_bias", "true", "true");
    refused(llama, DG_HF_LLAMA, "mlp_bias", "true", "true");
    refused(llama, DG_HF_LLAMA, "intermediate_size", "-1", "-1");
}

static void test_gpt2(void **state) {
    (void)state;
    refused(gpt2, DG_HF_GPT2, "n_head", "0", "0");
    refused(gpt2, DG_HF_GPT2, "n_head", "3", "3");
    refused(gpt2, DG_HF_GPT2, "n_embd", "\"64\"", "\"64\"");
    refused(gpt2, DG_HF_GPT2, "n_layer", NULL, "nothing");
    refused(gpt2, DG_HF_GPT2, "n_inner", "0", "0");
    refused(gpt2, DG_HF_GPT2, "n_positions", "-1", "-1");
    refused(gpt2, DG_HF_GPT2, "layer_norm_epsilon", "0", "0");
    refused(gpt2, DG_HF_GPT2, "activation_function", "\"relu\"", "\"relu\"");
}

static void test_gpt_oss(void **state) {
    (void)state;
    refused(gpt_oss, DG_HF_GPT_OSS, "layer_types", "[\"sliding_attention\"]", "[\"sliding_attention\"]");
    refused(gpt_oss, DG_HF_GPT_OSS, "layer_types", "[\"sliding_attention\",\"chunked\"]",
            "[\"sliding_attention\",\"chunked\"]");
    refused(gpt_oss, DG_HF_GPT_OSS, "attention_bias", "false", "false");
    refused(gpt_oss, DG_HF_GPT_OSS, "rope_scaling", "{\"rope_type\":\"linear\",\"factor\":2}", "{\"rope_type\":\"linear\"");
    refused(gpt_oss, DG_HF_GPT_OSS, "swiglu_limit", "0", "0");
    refused(gpt_oss, DG_HF_GPT_OSS, "num_local_experts", "0", "0");
    refused(gpt_oss, DG_HF_GPT_OSS, "head_dim", "7", "7");
}

static void test_deepseek_v3(void **state) {
    (void)state;
    refused(deepseek_v3, DG_HF_DEEPSEEK_V3, "rope_interleave", "false", "false");
    refused(deepseek_v3, DG_HF_DEEPSEEK_V3, "num_key_value_heads", "2", "2");
    refused(deepseek_v3, DG_HF_DEEPSEEK_V3, "scoring_func", "\"softmax\"", "\"softmax\"");
    refused(deepseek_v3, DG_HF_DEEPSEEK_V3, "first_k_dense_replace", "5", "5");
    refused(deepseek_v3, DG_HF_DEEPSEEK_V3, "norm_topk_prob", "false", "false");
    refused(deepseek_v3, DG_HF_DEEPSEEK_V3, "n_shared_experts", "0", "0");
    refused(deepseek_v3, DG_HF_DEEPSEEK_V3, "kv_lora_rank", NULL, "nothing");
}

/* The ids written are read back; generation_config.json's replace them;
 * null and a list of several are "none" (-1), a list of one is its id. */
static void test_ids(void **state) {
    (void)state;
    cJSON *o = written(mixtral, DG_HF_MIXTRAL);
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    dg_model_config c;
    dg_hf_arch a;
    dg_ckpt_tokenizer tok;
    dg_hf_ids ids;
    dg_err err = {{0}};
    assert_int_equal(dg_hf_config_read(text, PATH, &c, &a, &tok, &ids, &err), DG_OK);
    free(text);
    assert_int_equal(ids.bos, 3);
    assert_int_equal(ids.eos, 5);
    assert_int_equal(dg_hf_generation_config_read("{\"eos_token_id\": [7]}", "g.json", &ids, &err), DG_OK);
    assert_int_equal(ids.bos, 3);
    assert_int_equal(ids.eos, 7);
    assert_int_equal(dg_hf_generation_config_read("{\"bos_token_id\": null, \"eos_token_id\": [7, 8]}", "g.json",
                                                  &ids, &err), DG_OK);
    assert_int_equal(ids.bos, -1);
    assert_int_equal(ids.eos, -1);
    assert_int_equal(dg_hf_generation_config_read("[]", "g.json", &ids, &err), DG_EINPUT);
    assert_non_null(strstr(err.msg, "g.json"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mixtral),
        cmocka_unit_test(test_llama),
        cmocka_unit_test(test_gpt2),
        cmocka_unit_test(test_gpt_oss),
        cmocka_unit_test(test_deepseek_v3),
        cmocka_unit_test(test_ids),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
