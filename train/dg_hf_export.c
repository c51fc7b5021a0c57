/* dg_hf_export.c — a checkpoint's parameters as Hugging Face safetensors
 * shards, index, config.json and tokenizer files (see dg_hf_convert.h). */
#include "dg_hf_convert.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "dg_checkpoint.h"
#include "dg_ckpt_fs.h"
#include "dg_file_out.h"
#include "dg_hf_config.h"
#include "dg_hf_map.h"
#include "dg_hf_params.h"
#include "dg_model_record.h"
#include "dg_safetensors.h"
#include "dg_tokenizer.h"
#include "dg_tok_ckpt.h"

#define PATH_LEN 4096

/* fp32 -> bf16, round to nearest even (NaN stays NaN). */
static uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(u >> 16 | 0x40);
    return (uint16_t)((u + 0x7fffu + (u >> 16 & 1)) >> 16);
}

typedef struct exporter {
    const dg_hf_export_opts *o;
    const char *dir;
    dg_hf_map map;
    dg_hf_params params;
    int *shard;  /* map index -> shard number (0-based) */
    int n_shards;
} exporter;

static int64_t stored_bytes(const exporter *x, const dg_hf_tensor *t) {
    return dg_hf_tensor_numel(t) * (int64_t)dg_dtype_size(x->o->dtype);
}

static void shard_name(char *buf, size_t len, int i, int n) {
    snprintf(buf, len, "model-%05d-of-%05d.safetensors", i + 1, n);
}

/* Shards of at most max bytes (a bigger tensor alone), in map order. */
static void plan_shards(exporter *x) {
    int64_t max = x->o->max_shard_bytes > 0 ? x->o->max_shard_bytes : 5000000000LL, used = 0;
    x->shard = dg_calloc((size_t)DG_MAX(x->map.n, 1), sizeof *x->shard);
    x->n_shards = 1;
    for (int i = 0; i < x->map.n; i++) {
        int64_t b = stored_bytes(x, &x->map.t[i]);
        if (used > 0 && used + b > max) x->n_shards++, used = 0;
        x->shard[i] = x->n_shards - 1;
        used += b;
    }
}

static int write_shard(exporter *x, int s, dg_err *err) {
    int n = 0;
    for (int i = 0; i < x->map.n; i++) n += x->shard[i] == s;
    dg_st_tensor *t = dg_calloc((size_t)n, sizeof *t);
    int k = 0;
    for (int i = 0; i < x->map.n; i++) {
        if (x->shard[i] != s) continue;
        const dg_hf_tensor *h = &x->map.t[i];
        int64_t numel = dg_hf_tensor_numel(h), shape[3];
        float *f = dg_malloc((size_t)numel * sizeof *f);
        dg_hf_gather(&x->params, h, f);
        if (x->o->dtype == DG_BF16) {
            uint16_t *b = dg_malloc((size_t)numel * sizeof *b);
            for (int64_t e = 0; e < numel; e++) b[e] = to_bf16(f[e]);
            dg_free(f);
            f = (float *)b;
        }
        dg_hf_tensor_shape(h, shape);
        t[k] = (dg_st_tensor){h->name, x->o->dtype, h->ndim, {shape[0], shape[1], shape[2]}, f};
        k++;
    }
    char name[64], path[PATH_LEN];
    shard_name(name, sizeof name, s, x->n_shards);
    snprintf(path, sizeof path, "%s/%s", x->dir, name);
    int st = dg_st_write(path, t, n, err);
    for (int i = 0; i < n; i++) dg_free((void *)t[i].data);
    dg_free(t);
    return st;
}

static int write_text(const char *dir, const char *file, const char *text, dg_err *err) {
    char path[PATH_LEN];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    return dg_file_out_replace(path, text, strlen(text), NULL, err);
}

static int write_index(exporter *x, dg_err *err) {
    cJSON *o = cJSON_CreateObject();
    int64_t total = 0;
    for (int i = 0; i < x->map.n; i++) total += stored_bytes(x, &x->map.t[i]);
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(o, "metadata"), "total_size", (double)total);
    cJSON *wm = cJSON_AddObjectToObject(o, "weight_map");
    char name[64];
    for (int i = 0; i < x->map.n; i++) {
        shard_name(name, sizeof name, x->shard[i], x->n_shards);
        cJSON_AddStringToObject(wm, x->map.t[i].name, name);
    }
    char *s = cJSON_Print(o);
    cJSON_Delete(o);
    int st = write_text(x->dir, "model.safetensors.index.json", s, err);
    cJSON_free(s);
    return st;
}

/* Copy the file `from` (named by the checkpoint) to <dir>/<to>. */
static int copy_file(const char *from, const char *dir, const char *to, const char *where, dg_err *err) {
    char *buf;
    size_t n;
    dg_err e = {{0}};
    if (dg_ckpt_read_file(from, &buf, &n, &e) != DG_OK)
        return dg_err_set(err, DG_EINPUT, "%s: cannot copy the tokenizer's file: %s", where, e.msg);
    char path[PATH_LEN];
    snprintf(path, sizeof path, "%s/%s", dir, to);
    int st = dg_file_out_replace(path, buf, n, NULL, err);
    dg_free(buf);
    return st;
}

static int is_dir(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* A HuggingFaceTokenizer's --tokenizer-model is a tokenizer.json or a
 * directory holding one: copy it, and the tokenizer_config.json beside it
 * when there is one (its special tokens and chat template). */
static int copy_hf_tokenizer(const char *model, const char *dir, const char *where, dg_err *err) {
    char json[PATH_LEN + 32], cfg[PATH_LEN + 32], base[PATH_LEN];
    snprintf(base, sizeof base, "%s", model);
    if (is_dir(model)) {
        snprintf(json, sizeof json, "%s/tokenizer.json", model);
    } else {
        snprintf(json, sizeof json, "%s", model);
        char *slash = strrchr(base, '/');
        if (slash) *slash = 0;
        else snprintf(base, sizeof base, ".");
    }
    DG_TRY(copy_file(json, dir, "tokenizer.json", where, err));
    snprintf(cfg, sizeof cfg, "%s/tokenizer_config.json", base);
    return access(cfg, R_OK) == 0 ? copy_file(cfg, dir, "tokenizer_config.json", where, err) : DG_OK;
}

/* The tokenizer's files in Hugging Face's names, by --tokenizer-type
 * (dg_tokenizer.h); info->tokenizer_files says which ("" for the types
 * that have none: ByteLevelTokenizer and NullTokenizer need no files). */
static int write_tokenizer(const exporter *x, const dg_ckpt_manifest *man, dg_hf_export_info *info, dg_err *err) {
    const dg_ckpt_tokenizer *t = &man->meta.tokenizer;
    snprintf(info->tokenizer_type, sizeof info->tokenizer_type, "%s", t->type[0] ? t->type : DG_TOK_BYTE_NAME);
    const char *files = "";
    int st = DG_OK;
    if (!strcmp(t->type, DG_TOK_GPT2BPE_NAME) && t->vocab_file[0] && t->merge_file[0]) {
        st = copy_file(t->vocab_file, x->dir, "vocab.json", man->path, err);
        if (st == DG_OK) st = copy_file(t->merge_file, x->dir, "merges.txt", man->path, err);
        files = "vocab.json, merges.txt";
    } else if (dg_hf_tokenizer_is_hf(t->type) && t->model_file[0]) {
        st = copy_hf_tokenizer(t->model_file, x->dir, man->path, err);
        files = "tokenizer.json";
    } else if (dg_hf_tokenizer_is_sp(t->type) && t->model_file[0]) {
        st = copy_file(t->model_file, x->dir, "tokenizer.model", man->path, err);
        files = "tokenizer.model";
    }
    snprintf(info->tokenizer_files, sizeof info->tokenizer_files, "%s", files);
    return st;
}

int dg_hf_tokenizer_is_hf(const char *type) {
    return !strcmp(type, DG_TOK_HF_NAME) || !strcmp(type, "HFTokenizer");
}

int dg_hf_tokenizer_is_sp(const char *type) {
    return !strcmp(type, DG_TOK_SP_NAME) || !strcmp(type, "Llama2Tokenizer") || !strcmp(type, "GPTSentencePieceTokenizer");
}

/* The generation ids of the tokenizer the checkpoint was trained with,
 * reopened from its record (dg_hf_config.h says which ids); they must lie
 * inside the model's vocabulary. */
static int generation_ids(const dg_ckpt_manifest *man, const dg_model_config *c, dg_hf_ids *ids, dg_err *err) {
    dg_tokenizer t;
    DG_TRY(dg_tokenizer_open_ckpt(&t, &man->meta, man->path, err));
    ids->eos = t.eod;
    ids->bos = t.bos >= 0 ? t.bos : t.eod;
    dg_tokenizer_close(&t);
    int bad = ids->eos >= c->vocab_size ? ids->eos : ids->bos >= c->vocab_size ? ids->bos : -1;
    if (bad >= 0)
        return dg_err_set(err, DG_EINPUT, "%s: the tokenizer's %s id %d lies outside the model's vocabulary [0, %d)",
                          man->path, bad == ids->eos ? "end-of-document" : "beginning-of-sequence", bad, c->vocab_size);
    return DG_OK;
}

static int run(exporter *x, const char *ckpt_dir, dg_hf_export_info *info, dg_err *err) {
    dg_ckpt_manifest man;
    DG_TRY(dg_ckpt_read_manifest(ckpt_dir, x->o->iteration, &man, err));
    dg_model_config c;
    dg_hf_ids ids;
    int st = dg_model_from_record(&man.meta.config, &c, man.path, err);
    if (st == DG_OK) st = generation_ids(&man, &c, &ids, err);
    if (st == DG_OK) st = dg_hf_map_build(&c, &x->map, man.path, err);
    if (st == DG_OK) st = dg_hf_params_alloc(&c, &x->params, err);
    if (st == DG_OK) st = dg_hf_params_check(&x->params, &x->map, err);
    dg_ckpt_expect same = dg_model_expect(&c);
    if (st == DG_OK)
        st = dg_ckpt_load(ckpt_dir, man.meta.iteration, &same, NULL, x->params.t, x->params.n, err);
    if (st == DG_OK) st = dg_ckpt_mkdirs(x->dir, err);
    if (st == DG_OK) plan_shards(x);
    for (int s = 0; st == DG_OK && s < x->n_shards; s++) st = write_shard(x, s, err);
    if (st == DG_OK) st = write_index(x, err);
    char *cfg = st == DG_OK ? dg_hf_config_write(&c, x->map.arch, x->o->dtype, &man.meta.tokenizer, &ids, err) : NULL;
    if (st == DG_OK && !cfg) st = DG_EINTERNAL;
    if (cfg) st = write_text(x->dir, "config.json", cfg, err);
    dg_free(cfg);
    cfg = st == DG_OK ? dg_hf_generation_config_write(&ids) : NULL;
    if (cfg) st = write_text(x->dir, "generation_config.json", cfg, err);
    dg_free(cfg);
    if (st == DG_OK) st = write_tokenizer(x, &man, info, err);
    dg_ckpt_manifest_free(&man);
    return st;
}

int dg_hf_export(const char *ckpt_dir, const dg_hf_export_opts *o, const char *hf_dir, dg_hf_export_info *info,
                 dg_err *err) {
    dg_hf_export_info ignored;
    if (!info) info = &ignored;
    memset(info, 0, sizeof *info);
    if (o->dtype != DG_F32 && o->dtype != DG_BF16)
        return dg_err_set(err, DG_EINTERNAL, "hf export: dtype %s (expected f32 or bf16)", dg_dtype_name(o->dtype));
    exporter x;
    memset(&x, 0, sizeof x);
    x.o = o;
    x.dir = hf_dir;
    int st = run(&x, ckpt_dir, info, err);
    dg_free(x.shard);
    dg_hf_params_free(&x.params);
    dg_hf_map_free(&x.map);
    return st;
}
