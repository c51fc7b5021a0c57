/* dg_feed.c — see dg_feed.h. */
#include "dg_feed.h"

#include <string.h>

#include "dg_corpus.h"
#include "dg_tokenizer.h"

/* splitmix64 of (seed, sample): the mock sample's parameters. */
static uint64_t mix(uint64_t x) { return dg_splitmix64(&x); }

/* A list flag's value holds at most this many words (one character and a space each). */
#define MAX_WORDS (DG_ARG_STR_LEN / 2 + 1)

/* Split the --data-path words in place into argv-style pointers. */
static int split_words(char *s, char **words, int max) {
    int n = 0;
    for (char *tok = strtok(s, " "); tok && n < max; tok = strtok(NULL, " ")) words[n++] = tok;
    return n;
}

/* --train-data-path, --valid-data-path, --test-data-path: the words of each. */
typedef struct split_paths {
    char buf[DG_SPLIT_COUNT][DG_ARG_STR_LEN];
    char *words[DG_SPLIT_COUNT][MAX_WORDS];
    int n[DG_SPLIT_COUNT];
} split_paths;

static int has_split_paths(const dg_train_config *c) {
    return c->train_data_path[0] || c->valid_data_path[0] || c->test_data_path[0];
}

void dg_feed_split_paths_describe(const dg_train_config *c, char *out, size_t cap) {
    const char *path[DG_SPLIT_COUNT] = {c->train_data_path, c->valid_data_path, c->test_data_path};
    static const char *name[DG_SPLIT_COUNT] = {"train", "valid", "test"};
    size_t o = 0;
    out[0] = 0;
    for (int s = 0; s < DG_SPLIT_COUNT; s++)
        if (path[s][0] && o < cap) o += (size_t)snprintf(out + o, cap - o, "%s%s: %s", o ? "; " : "", name[s], path[s]);
}

/* Megatron's rules for per-split paths (arguments.py, BlendedMegatronDatasetConfig):
 * one data source. An explicit --split beside them is ignored with a note (the
 * trainer's start-up lines): each split's datasets are read whole. (Megatron's
 * dataset config asserts on the pair since --split lost its default; a script
 * carrying an old --split with per-split paths is still meant.) dagatron also
 * needs the train split's (Megatron would skip training and only evaluate). */
static int check_split_paths(const dg_train_config *c, dg_err *err) {
    if (!has_split_paths(c)) return DG_OK;
    const char *given = c->train_data_path[0] ? "--train-data-path" : c->valid_data_path[0] ? "--valid-data-path"
                                                                                            : "--test-data-path";
    if (c->data_path[0])
        return dg_err_set(err, DG_EINPUT, "--data-path and %s exclude each other: give one blend cut by --split, or "
                          "each split its own", given);
    if (c->mock_data) return dg_err_set(err, DG_EINPUT, "--mock-data and %s exclude each other", given);
    if (!c->train_data_path[0])
        return dg_err_set(err, DG_EINPUT, "%s without --train-data-path: nothing to train on (dagatron has no "
                          "evaluation-only run)", given);
    return DG_OK;
}

static void split_paths_fill(split_paths *sp, const dg_train_config *c) {
    const char *path[DG_SPLIT_COUNT] = {c->train_data_path, c->valid_data_path, c->test_data_path};
    for (int s = 0; s < DG_SPLIT_COUNT; s++) {
        snprintf(sp->buf[s], sizeof sp->buf[s], "%s", path[s]);
        sp->n[s] = split_words(sp->buf[s], sp->words[s], MAX_WORDS);
    }
}

int dg_feed_null_tokenizer(const dg_train_config *c) {
    return !strcmp(c->tokenizer_type, DG_TOK_NULL_NAME) || (c->mock_data && !c->tokenizer_type[0]);
}

/* The ids and end of document of the tokenizer the flags name (NullTokenizer:
 * --vocab-size N gives N + 1 ids, dg_tokenizer.h); `type` stands in when no
 * --tokenizer-type was given (NULL: dg_tokenizer_open_opts's default). */
static int tokenizer_ids(dg_feed *f, const dg_train_config *c, const char *type, dg_err *err) {
    dg_tokenizer tok;
    dg_tokenizer_opts to = {c->tokenizer_type[0] ? c->tokenizer_type : type, c->vocab_file[0] ? c->vocab_file : NULL,
                            c->merge_file[0] ? c->merge_file : NULL, c->tokenizer_model[0] ? c->tokenizer_model : NULL,
                            c->null_vocab_size};
    DG_TRY(dg_tokenizer_open_opts(&tok, &to, err));
    f->vocab = tok.vocab_size;
    f->eod = tok.eod;
    dg_tokenizer_close(&tok);
    return DG_OK;
}

int dg_feed_open(dg_feed *f, const dg_train_config *c, const int64_t num_samples[3], dg_err *err) {
    memset(f, 0, sizeof *f);
    f->seq_length = c->model.seq_length;
    f->seed = (uint64_t)c->seed;
    DG_TRY(check_split_paths(c, err));
    if (c->mock_data) {
        /* Megatron's mock data draws its tokens from the tokenizer's ids;
         * naming no other, that is NullTokenizer over --vocab-size */
        if (dg_feed_null_tokenizer(c) && c->null_vocab_size <= 0)
            return dg_err_set(err, DG_EINPUT, "--mock-data: --vocab-size is required");
        f->mock = 1;
        DG_TRY(tokenizer_ids(f, c, DG_TOK_NULL_NAME, err));
        snprintf(f->source, sizeof f->source, "mock data (vocabulary %lld)", (long long)f->vocab);
        return DG_OK;
    }

    char path_buf[4096];
    char *words[MAX_WORDS];
    int n_words = 0;
    dg_default_data dd;
    split_paths per; /* ~15 KB */
    memset(per.n, 0, sizeof per.n);
    if (!c->data_path[0] && !has_split_paths(c)) {
        /* The default corpus: fortunes, byte-level tokens, built once into the cache.
         * Another tokenizer would be recorded for tokens it did not make. */
        const char *flag = NULL, *value = NULL;
        if (c->tokenizer_type[0] && strcmp(c->tokenizer_type, DG_TOK_BYTE_NAME) && !c->tokenizer_type_default)
            flag = "--tokenizer-type", value = c->tokenizer_type;
        else if (c->tokenizer_model[0])
            flag = "--tokenizer-model", value = c->tokenizer_model;
        else if (c->vocab_file[0])
            flag = "--vocab-file", value = c->vocab_file;
        else if (c->merge_file[0])
            flag = "--merge-file", value = c->merge_file;
        if (flag)
            return dg_err_set(err, DG_EINPUT,
                              "%s %s: the default corpus (no --data-path) is byte-level tokens; pass --data-path "
                              "with a dataset `dagatron preprocess` made with that tokenizer, or --mock-data",
                              flag, value);
        DG_TRY(dg_corpus_default_dataset(c->data_cache_path[0] ? c->data_cache_path : NULL, 0, 1,
                                         &dd, err));
        snprintf(path_buf, sizeof path_buf, "%s", dd.prefix);
        words[0] = path_buf;
        n_words = 1;
        f->vocab = dd.vocab_size;
        f->eod = dd.eod;
        snprintf(f->source, sizeof f->source, "the fortunes corpus, byte-level (%s)", dd.prefix);
    } else {
        if (has_split_paths(c)) {
            split_paths_fill(&per, c);
            dg_feed_split_paths_describe(c, f->source, sizeof f->source);
        } else {
            snprintf(path_buf, sizeof path_buf, "%s", c->data_path);
            n_words = split_words(path_buf, words, MAX_WORDS);
            snprintf(f->source, sizeof f->source, "%s", c->data_path);
        }
        /* The tokenizer decides the vocabulary (NullTokenizer: --vocab-size). */
        DG_TRY(tokenizer_ids(f, c, NULL, err));
    }
    dg_data_config dc;
    memset(&dc, 0, sizeof dc);
    dc.n_words = n_words;
    dc.words = words;
    for (int s = 0; s < DG_SPLIT_COUNT; s++) {
        dc.split_n_words[s] = per.n[s];
        dc.split_words[s] = per.words[s];
    }
    dc.split = c->split;
    for (int s = 0; s < 3; s++) dc.num_samples[s] = num_samples[s];
    dc.gpt.seq_length = c->model.seq_length;
    dc.gpt.seed = (uint32_t)c->seed;
    dc.gpt.drop_last_partial = 1;
    /* --data-cache-path: Megatron's path_to_cache (NULL: beside the data). */
    dc.gpt.cache_dir = c->data_cache_path[0] ? c->data_cache_path : NULL;
    DG_TRY(dg_data_open(&f->data, &dc, err));
    return DG_OK;
}

void dg_feed_close(dg_feed *f) {
    if (!f->mock) dg_data_close(&f->data);
}

int dg_feed_microbatch(const dg_feed *f, int split, int64_t consumed, int shard, int n_shards,
                       int mbs, int32_t *tokens, dg_err *err) {
    if (!f->mock)
        return dg_data_microbatch(&f->data, split, consumed, shard, n_shards, mbs, tokens, err);
    int64_t S1 = f->seq_length + 1;
    for (int b = 0; b < mbs; b++) {
        int64_t i = consumed + (int64_t)shard * mbs + b;
        uint64_t h = mix(f->seed * 1000003u + (uint64_t)split * 7919u + (uint64_t)i);
        int64_t start = (int64_t)(h % (uint64_t)f->vocab);
        int64_t stride = 1 + (int64_t)((h >> 32) % 3);
        for (int64_t j = 0; j < S1; j++) tokens[b * S1 + j] = (int32_t)((start + j * stride) % f->vocab);
    }
    return DG_OK;
}
