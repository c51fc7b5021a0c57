/* dg_hf_import.c — a Hugging Face safetensors directory as a dagatron
 * checkpoint (see dg_hf_convert.h). */
#include "dg_hf_convert.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "dg_checkpoint.h"
#include "dg_ckpt_fs.h"
#include "dg_ckpt_paths.h"
#include "dg_hf_config.h"
#include "dg_hf_map.h"
#include "dg_hf_params.h"
#include "dg_model_record.h"
#include "dg_safetensors.h"
#include "dg_tokenizer.h"
#include "dg_tok_ckpt.h"

#define PATH_LEN 4096
#define INDEX_NAME "model.safetensors.index.json"

static float from_bf16(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static float from_f16(uint16_t h) {
    uint32_t s = (uint32_t)(h >> 15) << 31, e = h >> 10 & 0x1f, m = h & 0x3ff, u;
    if (e == 0x1f) u = s | 0x7f800000u | m << 13;                   /* inf, NaN */
    else if (e) u = s | (e + 112) << 23 | m << 13;                  /* normal */
    else if (!m) u = s;                                             /* zero */
    else {                                                          /* subnormal: normalize */
        e = 113;
        while (!(m & 0x400)) m <<= 1, e--;
        u = s | e << 23 | (m & 0x3ff) << 13;
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

typedef struct importer {
    const char *dir;
    dg_model_config c;
    dg_hf_arch arch;
    dg_ckpt_tokenizer tok;
    dg_hf_ids ids;       /* config.json's, or generation_config.json's when it has them */
    const char *eos_from; /* the file that gave ids.eos */
    dg_hf_map map;
    dg_hf_params params;
    int n_files;
    dg_st_file *files;
    cJSON *weight_map; /* the index's, or NULL for one model.safetensors */
} importer;

static int open_file(importer *x, const char *name, dg_err *err) {
    char path[PATH_LEN];
    snprintf(path, sizeof path, "%s/%s", x->dir, name);
    for (int i = 0; i < x->n_files; i++)
        if (!strcmp(x->files[i].path, path)) return DG_OK;
    if (strchr(name, '/'))
        return dg_err_set(err, DG_EINPUT, "%s/%s: shard '%s' must be a file of the directory", x->dir, INDEX_NAME, name);
    x->files = dg_realloc(x->files, (size_t)(x->n_files + 1) * sizeof *x->files);
    DG_TRY(dg_st_open(path, &x->files[x->n_files], err));
    x->n_files++;
    return DG_OK;
}

/* The index's weight_map and every shard it names, or model.safetensors. */
static int open_files(importer *x, cJSON **index_root, dg_err *err) {
    char path[PATH_LEN];
    snprintf(path, sizeof path, "%s/%s", x->dir, INDEX_NAME);
    if (access(path, F_OK) != 0) return open_file(x, "model.safetensors", err);
    char *text;
    size_t n;
    DG_TRY(dg_ckpt_read_file(path, &text, &n, err));
    *index_root = cJSON_Parse(text);
    dg_free(text);
    x->weight_map = cJSON_GetObjectItemCaseSensitive(*index_root, "weight_map");
    if (!cJSON_IsObject(x->weight_map))
        return dg_err_set(err, DG_EINPUT, "%s: no \"weight_map\" object (not a safetensors index?)", path);
    for (const cJSON *j = x->weight_map->child; j; j = j->next) {
        if (!cJSON_IsString(j))
            return dg_err_set(err, DG_EINPUT, "%s: \"weight_map\".\"%s\" is not a file name", path, j->string);
        DG_TRY(open_file(x, j->valuestring, err));
    }
    return DG_OK;
}

/* The stored HF name n without GPT-2's "transformer." prefix, which
 * Transformers' own GPT-2 files omit. */
static const char *bare(const char *n) { return strncmp(n, "transformer.", 12) ? n : n + 12; }

/* The file and entry holding HF tensor t. */
static int locate(const importer *x, const dg_hf_tensor *t, const dg_st_file **f, const dg_st_entry **e, dg_err *err) {
    for (int i = 0; i < x->n_files; i++) {
        const dg_st_file *fi = &x->files[i];
        for (int k = 0; k < fi->n; k++) {
            if (strcmp(bare(fi->e[k].name), bare(t->name))) continue;
            if (*e)
                return dg_err_set(err, DG_EINPUT, "%s: tensor '%s' is stored twice (also in %s)", fi->path, t->name,
                                  (*f)->path);
            *f = fi;
            *e = &fi->e[k];
        }
    }
    if (*e) return DG_OK;
    return dg_err_set(err, DG_EINPUT, "%s: no file holds '%s', which config.json's %s needs", x->dir, t->name,
                      dg_hf_arch_class(x->arch));
}

/* A stored tensor the model does not have: refused, except GPT-2's
 * attention-mask buffers and a tied model's copy of lm_head. */
static int check_unknown(const importer *x, dg_err *err) {
    for (int i = 0; i < x->n_files; i++)
        for (int k = 0; k < x->files[i].n; k++) {
            const char *n = x->files[i].e[k].name;
            int known = 0;
            for (int j = 0; j < x->map.n && !known; j++) known = !strcmp(bare(n), bare(x->map.t[j].name));
            size_t len = strlen(n);
            if (known || (!x->c.untie_embeddings && !strcmp(n, "lm_head.weight")) ||
                (x->arch == DG_HF_GPT2 && ((len > 10 && !strcmp(n + len - 10, ".attn.bias")) ||
                                           (len > 17 && !strcmp(n + len - 17, ".attn.masked_bias")))))
                continue;
            return dg_err_set(err, DG_EINPUT, "%s: tensor '%s' is not a parameter of config.json's %s", x->files[i].path,
                              n, dg_hf_arch_class(x->arch));
        }
    return DG_OK;
}

/* "[a, b, c]" of shape's n dims into buf. */
static const char *shape_str(const int64_t *shape, int n, char *buf, size_t len) {
    size_t o = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < n && o < len; d++) o += (size_t)snprintf(buf + o, len - o, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (o < len) snprintf(buf + o, len - o, "]");
    return buf;
}

static int read_tensor(importer *x, const dg_hf_tensor *t, dg_err *err) {
    const dg_st_file *f = NULL;
    const dg_st_entry *e = NULL;
    DG_TRY(locate(x, t, &f, &e, err));
    int64_t shape[3], numel = dg_hf_tensor_numel(t);
    dg_hf_tensor_shape(t, shape);
    int same = e->ndim == t->ndim;
    for (int d = 0; d < t->ndim && same; d++) same = e->shape[d] == shape[d];
    if (!same) {
        char got[96], want[96];
        return dg_err_set(err, DG_EINPUT, "%s: tensor '%s' has shape %s, config.json's model needs %s", f->path,
                          e->name, shape_str(e->shape, e->ndim, got, sizeof got),
                          shape_str(shape, t->ndim, want, sizeof want));
    }
    void *raw = dg_malloc((size_t)e->nbytes);
    float *v = e->dtype == DG_F32 ? raw : dg_malloc((size_t)numel * sizeof *v);
    int st = dg_st_read(f, e, raw, err);
    for (int64_t i = 0; st == DG_OK && e->dtype != DG_F32 && i < numel; i++) {
        uint16_t h = ((const uint16_t *)raw)[i];
        v[i] = e->dtype == DG_BF16 ? from_bf16(h) : from_f16(h);
    }
    if (st == DG_OK && dg_hf_scatter(&x->params, t, v))
        st = dg_err_set(err, DG_EINPUT, "%s: tensor '%s' must be zeros: dagatron's model has no such tensor (%s)",
                        f->path, e->name, x->arch == DG_HF_DEEPSEEK_V3 ? "config.json's \"dagatron\" block has no "
                        "--moe-router-enable-expert-bias" : "its router has no bias");
    if (v != raw) dg_free(v);
    dg_free(raw);
    return st;
}

/* path made absolute into out (DG_CKPT_STR_LEN bytes): the checkpoint
 * outlives the working directory it was made in. */
static int absolute(const char *path, char out[DG_CKPT_STR_LEN], dg_err *err) {
    char abs[PATH_MAX];
    if (!realpath(path, abs)) return dg_err_set(err, DG_EINPUT, "%s: cannot resolve", path);
    if (strlen(abs) >= DG_CKPT_STR_LEN)
        return dg_err_set(err, DG_EINPUT, "%s: path longer than %d bytes", abs, DG_CKPT_STR_LEN - 1);
    memcpy(out, abs, strlen(abs) + 1);
    return DG_OK;
}

/* <dir>/<file> into out when it is readable: 1, else 0. */
static int has_file(const importer *x, const char *file, char *out, size_t len) {
    snprintf(out, len, "%s/%s", x->dir, file);
    return access(out, R_OK) == 0;
}

/* A NullTokenizer's record (io/dg_tok_ckpt.h): it ends documents at the eos
 * id the directory gives (generation_config.json or config.json), with the
 * ids up to it (Megatron's NullTokenizer of --vocab-size eos) unless the
 * "dagatron" block recorded its vocabulary; without an eos id, a recorded
 * vocabulary keeps the rule of the checkpoint it came from (no "eod"
 * recorded), else the model's last id ends a document. */
static int null_tokenizer(importer *x, dg_ckpt_tokenizer *t, dg_err *err) {
    int32_t eod = x->ids.eos;
    if (eod >= x->c.vocab_size)
        return dg_err_set(err, DG_EINPUT, "%s/%s: \"eos_token_id\": expected an id inside config.json's \"vocab_size\" "
                          "%d (no tokenizer files: it is the end of document), got %d", x->dir, x->eos_from,
                          x->c.vocab_size, eod);
    if (eod < 0 && t->vocab_size > 0) return DG_OK;
    if (eod < 0) eod = x->c.vocab_size - 1;
    if (t->vocab_size <= eod) t->vocab_size = (int64_t)eod + 1;
    t->eod = eod;
    t->eod_recorded = 1;
    return DG_OK;
}

/* The tokenizer the checkpoint will name: the "dagatron" block's type, else
 * the files in the directory (a GPT-2 BPE's vocab.json and merges.txt, a
 * SentencePiece tokenizer.model, a tokenizer.json, in that order), else
 * none (NullTokenizer, null_tokenizer above). The files are named by
 * absolute path, as --vocab-file, --merge-file, --tokenizer-model. */
static int tokenizer_of(importer *x, dg_ckpt_tokenizer *t, dg_err *err) {
    *t = x->tok;
    char vocab[PATH_LEN], merges[PATH_LEN], sp[PATH_LEN], json[PATH_LEN];
    int have_bpe = has_file(x, "vocab.json", vocab, sizeof vocab) & has_file(x, "merges.txt", merges, sizeof merges);
    int have_sp = has_file(x, "tokenizer.model", sp, sizeof sp), have_json = has_file(x, "tokenizer.json", json, sizeof json);
    if (!t->type[0])
        snprintf(t->type, sizeof t->type, "%s",
                 have_bpe ? DG_TOK_GPT2BPE_NAME : have_sp ? DG_TOK_SP_NAME : have_json ? DG_TOK_HF_NAME : DG_TOK_NULL_NAME);
    if (!strcmp(t->type, DG_TOK_NULL_NAME)) return null_tokenizer(x, t, err);
    const char *lacks = NULL;
    if (!strcmp(t->type, DG_TOK_GPT2BPE_NAME)) {
        if (have_bpe) DG_TRY(absolute(vocab, t->vocab_file, err));
        if (have_bpe) return absolute(merges, t->merge_file, err);
        lacks = "vocab.json or merges.txt";
    } else if (dg_hf_tokenizer_is_sp(t->type)) {
        if (have_sp) return absolute(sp, t->model_file, err);
        lacks = "tokenizer.model";
    } else if (dg_hf_tokenizer_is_hf(t->type)) {
        if (have_json) return absolute(json, t->model_file, err);
        lacks = "tokenizer.json";
    }
    if (lacks)
        return dg_err_set(err, DG_EINPUT, "%s: config.json names a %s, the directory lacks %s", x->dir, t->type, lacks);
    return DG_OK;
}

/* config.json, and generation_config.json's ids over its own when the
 * directory has one (Transformers' generate() reads that file). */
static int read_configs(importer *x, dg_err *err) {
    char path[PATH_LEN], *text;
    size_t n;
    snprintf(path, sizeof path, "%s/config.json", x->dir);
    DG_TRY(dg_ckpt_read_file(path, &text, &n, err));
    int st = dg_hf_config_read(text, path, &x->c, &x->arch, &x->tok, &x->ids, err);
    dg_free(text);
    x->eos_from = "config.json";
    if (st != DG_OK || !has_file(x, "generation_config.json", path, sizeof path)) return st;
    DG_TRY(dg_ckpt_read_file(path, &text, &n, err));
    int32_t eos = x->ids.eos;
    st = dg_hf_generation_config_read(text, path, &x->ids, err);
    dg_free(text);
    if (x->ids.eos != eos) x->eos_from = "generation_config.json";
    return st;
}

/* The --save directory must hold no checkpoint (a tracker or an iter_*
 * directory): the import is iteration 0, so its tracker would move back and
 * a run resumed there would save over its iterations. With
 * --add-to-existing it may, as long as iteration 0 is not one of them. */
static int check_target(const char *ckpt_dir, const dg_hf_import_opts *o, dg_err *err) {
    int64_t it = -1;
    if (dg_ckpt_has_tracker(ckpt_dir)) DG_TRY(dg_ckpt_latest(ckpt_dir, &it, err));
    else if (!dg_ckpt_newest_iter_dir(ckpt_dir, &it)) return DG_OK;
    char iter0[DG_CKPT_STR_LEN + 32];
    DG_TRY(dg_ckpt_iter_dir(iter0, sizeof iter0, ckpt_dir, 0, err));
    if (!o->add_to_existing)
        return dg_err_set(err, DG_EINPUT, "--save %s: already holds a checkpoint (iteration %lld); the import is iteration "
                          "0: give a new directory, or --add-to-existing to add it there (the tracker stays at %lld)",
                          ckpt_dir, (long long)it, (long long)it);
    if (access(iter0, F_OK) == 0)
        return dg_err_set(err, DG_EINPUT, "--save %s: already holds iteration 0 (%s), which the import would replace: "
                          "give a new directory", ckpt_dir, iter0);
    return DG_OK;
}

static int run(importer *x, const char *ckpt_dir, const dg_hf_import_opts *o, cJSON **index_root, dg_err *err) {
    char path[PATH_LEN];
    snprintf(path, sizeof path, "%s/config.json", x->dir);
    int st = check_target(ckpt_dir, o, err);
    if (st == DG_OK) st = read_configs(x, err);
    if (st == DG_OK) st = dg_hf_map_build(&x->c, &x->map, path, err);
    if (st == DG_OK) st = dg_hf_params_alloc(&x->c, &x->params, err);
    if (st == DG_OK) st = dg_hf_params_check(&x->params, &x->map, err);
    if (st == DG_OK) st = open_files(x, index_root, err);
    if (st == DG_OK) st = check_unknown(x, err);
    for (int i = 0; i < x->map.n && st == DG_OK; i++)
        if (!x->map.t[i].copy) st = read_tensor(x, &x->map.t[i], err); /* a copy: another entry fills it */
    dg_ckpt_meta m;
    dg_ckpt_meta_init(&m);
    if (st == DG_OK) st = tokenizer_of(x, &m.tokenizer, err);
    if (st == DG_OK) st = dg_model_to_record(&x->c, &m.config, err);
    dg_ckpt_save_opts so = {.tracker_forward_only = o->add_to_existing};
    if (st == DG_OK) st = dg_ckpt_save(ckpt_dir, &m, x->params.t, x->params.n, &so, err);
    return st;
}

int dg_hf_import(const char *hf_dir, const char *ckpt_dir, const dg_hf_import_opts *o, dg_err *err) {
    const dg_hf_import_opts none = {0};
    importer x;
    memset(&x, 0, sizeof x);
    x.dir = hf_dir;
    cJSON *index_root = NULL;
    int st = run(&x, ckpt_dir, o ? o : &none, &index_root, err);
    cJSON_Delete(index_root);
    for (int i = 0; i < x.n_files; i++) dg_st_close(&x.files[i]);
    dg_free(x.files);
    dg_hf_params_free(&x.params);
    dg_hf_map_free(&x.map);
    return st;
}
