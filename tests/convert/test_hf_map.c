/* test_hf_map.c — the Hugging Face name table and safetensors files
 * (train/dg_hf_map.h, train/dg_hf_params.h, io/dg_safetensors.h):
 * for each kind of model the HF tensors cover every parameter element once
 * and gather/scatter restores the parameters bitwise; the models HF has no
 * class for are refused; the GPT-2 layout is the transposed Conv1D; a
 * safetensors file round-trips, and each malformed header is refused naming
 * the file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dg_hf_map.h"
#include "dg_hf_params.h"
#include "dg_safetensors.h"

static void fill(dg_hf_params *p) {
    uint32_t s = 1;
    for (int i = 0; i < p->n; i++) {
        size_t n = dg_ckpt_tensor_bytes(&p->t[i]) / 4;
        for (size_t k = 0; k < n; k++) ((float *)p->t[i].data)[k] = (float)((s = s * 1664525u + 1013904223u) >> 8);
    }
}

/* Export then import through the map: every parameter bitwise. */
static void roundtrip(const dg_model_config *c, dg_hf_arch want) {
    dg_hf_map m;
    dg_err err = {{0}};
    assert_int_equal(dg_hf_map_build(c, &m, "test", &err), DG_OK);
    assert_int_equal(m.arch, want);
    dg_hf_params a, b;
    assert_int_equal(dg_hf_params_alloc(c, &a, &err), DG_OK);
    assert_int_equal(dg_hf_params_alloc(c, &b, &err), DG_OK);
    assert_int_equal(dg_hf_params_check(&a, &m, &err), DG_OK);
    fill(&a);
    for (int i = 0; i < m.n; i++) {
        float *v = malloc((size_t)dg_hf_tensor_numel(&m.t[i]) * sizeof *v);
        dg_hf_gather(&a, &m.t[i], v);
        dg_hf_scatter(&b, &m.t[i], v);
        free(v);
    }
    for (int i = 0; i < a.n; i++)
        assert_memory_equal(a.t[i].data, b.t[i].data, dg_ckpt_tensor_bytes(&a.t[i]));
    dg_hf_params_free(&a);
    dg_hf_params_free(&b);
    dg_hf_map_free(&m);
}

static void gpt2_config(dg_model_config *c) {
    dg_model_config_tiny(c);
    c->num_experts = 0;
    c->num_query_groups = c->num_attention_heads;
    c->mlp_gelu = c->add_bias_linear = c->normalization_layernorm = 1;
    c->position_embedding = DG_MODEL_POS_LEARNED;
    c->max_position_embeddings = c->seq_length + 8;
    c->untie_embeddings = 0;
}

static void test_coverage(void **state) {
    (void)state;
    dg_model_config c;
    dg_model_config_tiny(&c); /* MoE, GQA, untied */
    roundtrip(&c, DG_HF_MIXTRAL);
    c.untie_embeddings = 0;
    c.num_query_groups = 1;
    roundtrip(&c, DG_HF_MIXTRAL);
    c.num_experts = 0; /* dense SwiGLU RoPE */
    roundtrip(&c, DG_HF_LLAMA);
    gpt2_config(&c);
    roundtrip(&c, DG_HF_GPT2);
    c.untie_embeddings = 1;
    roundtrip(&c, DG_HF_GPT2);
}

static void refused(void (*edit)(dg_model_config *), const char *needle) {
    dg_model_config c;
    dg_model_config_tiny(&c);
    edit(&c);
    dg_hf_map m;
    dg_err err = {{0}};
    assert_int_equal(dg_hf_map_build(&c, &m, "ck", &err), DG_EINPUT);
    if (!strstr(err.msg, needle)) fail_msg("'%s' lacks '%s'", err.msg, needle);
}
static void e_sigmoid(dg_model_config *c) { c->score_function_sigmoid = 1; }
static void e_pre(dg_model_config *c) { c->router_pre_softmax = 1; }
static void e_freq(dg_model_config *c) { c->moe_layer_freq = 2; }
static void e_shared(dg_model_config *c) { c->moe_shared_expert_size = 32; }
static void e_rot(dg_model_config *c) { c->rotary_percent = 0.5; }
static void e_ln_rope(dg_model_config *c) { c->num_experts = 0, c->normalization_layernorm = 1; }
static void e_gpt2_gqa(dg_model_config *c) { gpt2_config(c), c->num_query_groups = 2; }

static void test_refusals(void **state) {
    (void)state;
    refused(e_sigmoid, "--moe-router-score-function");
    refused(e_pre, "--moe-router-pre-softmax");
    refused(e_freq, "--moe-layer-freq");
    refused(e_shared, "--moe-shared-expert-intermediate-size");
    refused(e_rot, "--rotary-percent");
    refused(e_ln_rope, "RMSNorm");
    refused(e_gpt2_gqa, "grouped-query");
}

/* GPT-2's c_attn is [q; k; v] transposed: element (i, j) of c_attn is row
 * j of the stack, column i. */
static void test_gpt2_layout(void **state) {
    (void)state;
    dg_model_config c;
    gpt2_config(&c);
    dg_hf_map m;
    dg_hf_params p;
    dg_err err = {{0}};
    assert_int_equal(dg_hf_map_build(&c, &m, "t", &err), DG_OK);
    assert_int_equal(dg_hf_params_alloc(&c, &p, &err), DG_OK);
    fill(&p);
    const dg_hf_tensor *t = NULL;
    for (int i = 0; i < m.n; i++)
        if (!strcmp(m.t[i].name, "transformer.h.1.attn.c_attn.weight")) t = &m.t[i];
    assert_non_null(t);
    int64_t H = c.hidden_size, shape[3];
    dg_hf_tensor_shape(t, shape);
    assert_int_equal(shape[0], H);
    assert_int_equal(shape[1], 3 * H);
    float *v = malloc((size_t)(3 * H * H) * sizeof *v);
    dg_hf_gather(&p, t, v);
    const float *k = NULL;
    for (int i = 0; i < p.n; i++)
        if (!strcmp(p.t[i].name, "decoder.layers.1.self_attention.linear_k.weight")) k = p.t[i].data;
    assert_non_null(k);
    for (int64_t r = 0; r < H; r++) /* k's row r, column c is c_attn[c][H + r] */
        for (int64_t col = 0; col < H; col++) assert_true(v[col * 3 * H + H + r] == k[r * H + col]);
    free(v);
    dg_hf_params_free(&p);
    dg_hf_map_free(&m);
}

/* ---- safetensors -------------------------------------------------------------- */

static void write_raw(const char *path, const char *header, size_t data_bytes) {
    FILE *f = fopen(path, "wb");
    uint64_t n = strlen(header);
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)(n >> (8 * i));
    fwrite(len8, 1, 8, f);
    fwrite(header, 1, n, f);
    for (size_t i = 0; i < data_bytes; i++) fputc(0, f);
    fclose(f);
}

static void bad(const char *path, const char *header, size_t data_bytes, const char *needle) {
    write_raw(path, header, data_bytes);
    dg_st_file f;
    dg_err err = {{0}};
    assert_int_equal(dg_st_open(path, &f, &err), DG_EINPUT);
    if (!strstr(err.msg, path) || !strstr(err.msg, needle)) fail_msg("'%s' lacks the path or '%s'", err.msg, needle);
}

static void test_safetensors(void **state) {
    (void)state;
    char path[] = "/tmp/test_hf_map_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    float a[6] = {1, -2, 3.5f, 0, 1e-30f, 7};
    uint16_t h[3] = {0x3f80, 0xc000, 0x7f80};
    dg_st_tensor t[2] = {{"a.weight", DG_F32, 2, {2, 3}, a}, {"b", DG_BF16, 1, {3}, h}};
    dg_err err = {{0}};
    assert_int_equal(dg_st_write(path, t, 2, &err), DG_OK);
    dg_st_file f;
    assert_int_equal(dg_st_open(path, &f, &err), DG_OK);
    assert_int_equal(f.n, 2);
    const dg_st_entry *e = dg_st_find(&f, "a.weight");
    assert_non_null(e);
    assert_int_equal(e->dtype, DG_F32);
    assert_int_equal(e->shape[1], 3);
    assert_int_equal(e->offset % 8, 0); /* the header is padded to 8 bytes */
    float back[6];
    assert_int_equal(dg_st_read(&f, e, back, &err), DG_OK);
    assert_memory_equal(back, a, sizeof a);
    uint16_t hb[3];
    assert_int_equal(dg_st_read(&f, dg_st_find(&f, "b"), hb, &err), DG_OK);
    assert_memory_equal(hb, h, sizeof h);
    dg_st_close(&f);

    bad(path, "[1, 2]", 0, "not a JSON object");
    bad(path, "{\"x\": {\"dtype\": \"I64\", \"shape\": [1], \"data_offsets\": [0, 8]}}", 8, "dtype I64");
    bad(path, "{\"x\": {\"dtype\": \"F32\", \"shape\": [3], \"data_offsets\": [0, 8]}}", 8, "its shape needs 12");
    bad(path, "{\"x\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 4, "truncated");
    bad(path, "{\"x\": {\"dtype\": \"F32\", \"shape\": [-2], \"data_offsets\": [0, 8]}}", 8, "shape");
    bad(path, "{\"x\": {\"dtype\": \"F32\", \"shape\": [2]}}", 8, "data_offsets");
    bad(path, "{\"x\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}, "
              "\"x\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}", 8, "twice");
    FILE *s = fopen(path, "wb"); /* shorter than the length word */
    fputs("abc", s);
    fclose(s);
    assert_int_equal(dg_st_open(path, &f, &err), DG_EINPUT);
    assert_non_null(strstr(err.msg, "truncated"));
    unlink(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_coverage),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_gpt2_layout),
        cmocka_unit_test(test_safetensors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
