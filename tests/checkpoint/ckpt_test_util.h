/* ckpt_test_util.h — fixtures shared by the checkpoint tests: a set of
 * named tensors filled from a seed (so two sets differ in every byte that
 * matters), a filled-in meta, scratch directories and file helpers. */
#ifndef CKPT_TEST_UTIL_H
#define CKPT_TEST_UTIL_H

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dg_checkpoint.h"

/* A model-like table: parameters and their two AdamW moments, plus tensors
 * of the other dtypes and ranks (scalar, empty) to cover the format. */
typedef struct ckpt_set {
    int n;
    dg_ckpt_tensor t[16];
} ckpt_set;

static inline void ckpt_add(ckpt_set *s, const char *name, dg_dtype dt, int ndim, const int64_t *shape,
                            uint64_t *seed) {
    dg_ckpt_tensor *t = &s->t[s->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dtype = dt;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++) t->shape[d] = shape[d];
    size_t bytes = dg_ckpt_tensor_bytes(t);
    uint8_t *p = malloc(bytes ? bytes : 1);
    for (size_t i = 0; i < bytes; i++) p[i] = (uint8_t)dg_splitmix64(seed);
    t->data = p;
}

/* `scale` multiplies the big tensors' element count (1: ~100 KB in all). */
static inline void ckpt_set_make(ckpt_set *s, uint64_t seed, int scale) {
    memset(s, 0, sizeof *s);
    const char *params[] = {"embedding.word_embeddings.weight", "decoder.layers.0.mlp.router.weight",
                            "decoder.layers.0.mlp.experts.linear_fc1.weight", "decoder.final_layernorm.weight"};
    int64_t shapes[4][3] = {{100 * scale, 64}, {4, 64}, {4, 32 * scale, 64}, {64}};
    int ndims[4] = {2, 2, 3, 1};
    const char *prefix[3] = {"", "optimizer.exp_avg.", "optimizer.exp_avg_sq."};
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 4; i++) {
            char name[DG_CKPT_NAME_LEN];
            snprintf(name, sizeof name, "%s%s", prefix[k], params[i]);
            ckpt_add(s, name, DG_F32, ndims[i], shapes[i], &seed);
        }
    ckpt_add(s, "test.scalar_i64", DG_I64, 0, NULL, &seed);
    ckpt_add(s, "test.bytes_u8", DG_U8, 1, (const int64_t[]){13}, &seed);
    ckpt_add(s, "test.ids_i32", DG_I32, 2, (const int64_t[]){3, 5}, &seed);
    ckpt_add(s, "test.empty_bf16", DG_BF16, 2, (const int64_t[]){0, 7}, &seed);
}

/* Same names and shapes, zeroed buffers: what a loader passes in. */
static inline void ckpt_set_like(ckpt_set *dst, const ckpt_set *src) {
    *dst = *src;
    for (int i = 0; i < dst->n; i++) {
        size_t b = dg_ckpt_tensor_bytes(&src->t[i]);
        dst->t[i].data = calloc(1, b ? b : 1);
    }
}

static inline int ckpt_set_equal(const ckpt_set *a, const ckpt_set *b) {
    for (int i = 0; i < a->n; i++)
        if (memcmp(a->t[i].data, b->t[i].data, dg_ckpt_tensor_bytes(&a->t[i])) != 0) return 0;
    return 1;
}

static inline void ckpt_set_free(ckpt_set *s) {
    for (int i = 0; i < s->n; i++) free(s->t[i].data);
    s->n = 0;
}

static inline void ckpt_meta_make(dg_ckpt_meta *m, int64_t iteration) {
    dg_ckpt_meta_init(m);
    m->iteration = iteration;
    m->consumed_samples = iteration * 64;
    m->consumed_valid_samples = 3 * iteration;
    m->optimizer_steps = iteration - 2;
    m->skipped_iters = 2;
    m->nan_iters = 1;
    m->rng[0] = 0xFFFFFFFFFFFFFFFFull;
    m->rng[1] = 0x8000000000000001ull;
    m->rng[2] = (uint64_t)iteration;
    m->rng[3] = 0x0123456789ABCDEFull;
    /* A config record of named numbers: io/ stores it without knowing a
     * model (train/dg_model_record.h translates the model's). Doubles that
     * are not exact in binary must round-trip anyway. */
    static const struct { const char *key; double value; } rec[] = {
        {"num_layers", 2}, {"hidden_size", 64}, {"vocab_size", 50304}, {"rope_base", 10000.0},
        {"norm_epsilon", 1e-5}, {"moe_aux_loss_coeff", 0.1}, {"moe_z_loss_coeff", 1.0 / 3.0},
        {"negative", -7}, {"huge", 9007199254740993.0},
    };
    dg_err err = {{0}};
    for (size_t i = 0; i < sizeof rec / sizeof rec[0]; i++)
        if (dg_ckpt_config_set(&m->config, rec[i].key, rec[i].value, &err) != DG_OK) abort();
    snprintf(m->tokenizer.type, sizeof m->tokenizer.type, "GPT2BPETokenizer");
    snprintf(m->tokenizer.vocab_file, sizeof m->tokenizer.vocab_file, "/data/gpt2 \"vocab\".json");
    snprintf(m->tokenizer.merge_file, sizeof m->tokenizer.merge_file, "/data/merges.txt");
    snprintf(m->tokenizer.model_file, sizeof m->tokenizer.model_file, "/data/sp \"tok\".model");
    m->tokenizer.vocab_size = 50257;
    snprintf(m->data.path, sizeof m->data.path, "0.3 /data/a_text_document 0.7 /data/b");
    snprintf(m->data.split, sizeof m->data.split, "969,30,1");
    m->data.mock = 0;
    m->data.seed = 1234;
}

/* A fresh scratch directory under $TMPDIR (or /tmp). */
static inline void ckpt_tmpdir(char *buf, size_t len) {
    const char *base = getenv("TMPDIR");
    snprintf(buf, len, "%s/dg_ckpt_test_XXXXXX", base ? base : "/tmp");
    if (!mkdtemp(buf)) abort();
}

static inline void ckpt_rmrf(const char *path) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", path);
}

static inline int ckpt_exists(const char *fmt, ...) {
    char p[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p, sizeof p, fmt, ap);
    va_end(ap);
    struct stat sb;
    return stat(p, &sb) == 0;
}

/* Number of entries in dir whose name contains `needle`. */
static inline int ckpt_count(const char *dir, const char *needle) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (strstr(de->d_name, needle)) n++;
    closedir(d);
    return n;
}

static inline void ckpt_write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    fputs(text, f);
    fclose(f);
}

#ifdef assert_non_null /* cmocka tests */
/* One line, naming `file` and containing `what`. */
static inline void assert_msg(const dg_err *err, const char *file, const char *what) {
    if (!strstr(err->msg, file) || !strstr(err->msg, what) || strchr(err->msg, '\n'))
        print_error("message '%s' should name '%s' and say '%s'\n", err->msg, file, what);
    assert_non_null(strstr(err->msg, file));
    assert_non_null(strstr(err->msg, what));
    assert_null(strchr(err->msg, '\n'));
}
#endif

#endif /* CKPT_TEST_UTIL_H */
