/* dg_corpus_default.c — tokenizers and datasets built from corpora, and the
 * default fortunes dataset (see dg_corpus.h). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dg_bpe.h"
#include "dg_bpe_train.h"
#include "dg_corpus.h"
#include "dg_data_map.h"
#include "dg_file_out.h"
#include "dg_indexed.h"
#include "dg_preprocess.h"
#include "dg_tokenizer.h"

int dg_corpus_train_bpe(const char *const *files, int n_files, dg_input_format fmt, const char *separator,
                        const char *json_key, int32_t vocab_size, struct dg_bpe *out, dg_err *err) {
    DG_TRY(dg_bpe_train_check_size(vocab_size, err)); /* before reading the corpus */
    dg_bpe_trainer *t = dg_bpe_trainer_new();
    dg_bytebuf text = {0};
    dg_i32buf seg = {0};
    int st = DG_OK;
    for (int i = 0; i < n_files && st == DG_OK; i++) {
        dg_input_format f = fmt ? fmt : dg_corpus_guess_format(files[i]);
        dg_map m;
        st = dg_map_file(&m, files[i], err);
        if (st != DG_OK) break;
        dg_record *recs;
        int64_t count;
        dg_corpus_split(m.p, m.n, f, f == DG_INPUT_TEXT ? separator : NULL, &recs, &count);
        for (int64_t r = 0; r < count && st == DG_OK; r++) {
            if (f == DG_INPUT_TEXT) {
                dg_bpe_trainer_add(t, recs[r].p, recs[r].n);
                continue;
            }
            text.n = seg.n = 0;
            st = dg_corpus_json_text(&recs[r], files[i], json_key ? json_key : "text", &text, &seg, err);
            for (int64_t s = 0, off = 0; st == DG_OK && s < seg.n; off += seg.v[s++])
                dg_bpe_trainer_add(t, text.v + off, (size_t)seg.v[s]);
        }
        dg_free(recs);
        dg_unmap(&m);
    }
    if (st == DG_OK) st = dg_bpe_trainer_train(t, vocab_size, out, err);
    dg_bpe_trainer_free(t);
    dg_bytebuf_free(&text);
    dg_i32buf_free(&seg);
    return st;
}

static void cache_root(char *out, size_t cap, const char *cache_dir) {
    const char *e;
    if (cache_dir) snprintf(out, cap, "%s", cache_dir);
    else if ((e = getenv("DG_CACHE_DIR")) && *e) snprintf(out, cap, "%s", e);
    else if ((e = getenv("XDG_CACHE_HOME")) && *e) snprintf(out, cap, "%s/dagatron", e);
    else snprintf(out, cap, "%s/.cache/dagatron", (e = getenv("HOME")) && *e ? e : "/tmp");
}

static void remove_tree(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[4096];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

/* Fill the paths of a dataset in `dir`; DG_EINPUT when they do not fit. */
static int fill_paths(dg_default_data *out, const char *dir, int bpe, dg_err *err) {
    int ok = snprintf(out->dir, sizeof out->dir, "%s", dir) < (int)sizeof out->dir;
    ok = ok && snprintf(out->prefix, sizeof out->prefix, "%s/fortunes_text_document", dir) < (int)sizeof out->prefix;
    out->vocab_file[0] = out->merge_file[0] = 0;
    if (bpe) {
        ok = ok && snprintf(out->vocab_file, sizeof out->vocab_file, "%s/vocab.json", dir) < (int)sizeof out->vocab_file;
        ok = ok && snprintf(out->merge_file, sizeof out->merge_file, "%s/merges.txt", dir) < (int)sizeof out->merge_file;
    }
    if (!ok) return dg_err_set(err, DG_EINPUT, "%s: cache path too long (max %d bytes)", dir, DG_CORPUS_PATH_LEN - 32);
    return DG_OK;
}

/* Build the dataset (and tokenizer) into `dir`. */
static int build(const char *dir, int32_t vocab, int workers, dg_err *err) {
    char **files;
    int n;
    DG_TRY(dg_corpus_fortune_files(NULL, &files, &n, err));
    dg_default_data tmp;
    dg_tokenizer tok;
    int st = fill_paths(&tmp, dir, vocab > 0, err);
    if (st != DG_OK) {
        dg_corpus_free_list(files, n);
        return st;
    }
    if (vocab > 0) {
        dg_bpe bpe;
        st = dg_corpus_train_bpe((const char *const *)files, n, DG_INPUT_TEXT, DG_FORTUNES_SEPARATOR, NULL, vocab,
                                 &bpe, err);
        if (st == DG_OK) {
            st = dg_bpe_save(&bpe, tmp.vocab_file, tmp.merge_file, err);
            dg_tokenizer_from_bpe(&tok, &bpe);
        }
    } else {
        st = dg_tokenizer_open(&tok, NULL, NULL, NULL, err);
    }
    if (st == DG_OK) {
        char prefix[DG_CORPUS_PATH_LEN + 16];
        snprintf(prefix, sizeof prefix, "%.*s/fortunes", DG_CORPUS_PATH_LEN - 1, dir);
        dg_preprocess_opts o = {0};
        o.inputs = (const char *const *)files;
        o.n_inputs = n;
        o.format = DG_INPUT_TEXT;
        o.doc_separator = DG_FORTUNES_SEPARATOR;
        o.append_eod = 1;
        o.output_prefix = prefix;
        o.workers = workers > 0 ? workers : 1;
        o.tok = &tok;
        dg_preprocess_stats stats;
        st = dg_preprocess_run(&o, &stats, err);
        dg_tokenizer_close(&tok);
    }
    dg_corpus_free_list(files, n);
    return st;
}

int dg_corpus_default_dataset(const char *cache_dir, int32_t bpe_vocab_size, int workers, dg_default_data *out,
                              dg_err *err) {
    memset(out, 0, sizeof *out);
    if (bpe_vocab_size != 0 && bpe_vocab_size < 257)
        return dg_err_set(err, DG_EINPUT, "default dataset: BPE vocabulary %d is below 257", bpe_vocab_size);
    char root[DG_CORPUS_PATH_LEN], dir[DG_CORPUS_PATH_LEN];
    cache_root(root, sizeof root, cache_dir);
    int len = bpe_vocab_size > 0 ? snprintf(dir, sizeof dir, "%s/fortunes-bpe%d", root, bpe_vocab_size)
                                 : snprintf(dir, sizeof dir, "%s/fortunes-byte", root);
    if (len >= (int)sizeof dir - 32)
        return dg_err_set(err, DG_EINPUT, "%s: cache path too long (max %d bytes)", root, DG_CORPUS_PATH_LEN - 64);
    DG_TRY(fill_paths(out, dir, bpe_vocab_size > 0, err));
    out->tokenizer_type = bpe_vocab_size > 0 ? DG_TOK_GPT2BPE_NAME : DG_TOK_BYTE_NAME;

    char done[DG_CORPUS_PATH_LEN + 32];
    snprintf(done, sizeof done, "%s/COMPLETE", dir);
    if (!dg_file_exists(done)) {
        DG_TRY(dg_mkdirs(root, err));
        char tmp[DG_CORPUS_PATH_LEN];
        if (snprintf(tmp, sizeof tmp, "%s.tmp.%d", dir, (int)getpid()) >= (int)sizeof tmp)
            return dg_err_set(err, DG_EINPUT, "%s: cache path too long", dir);
        remove_tree(tmp);
        DG_TRY(dg_mkdirs(tmp, err));
        int st = build(tmp, bpe_vocab_size, workers, err);
        if (st == DG_OK) {
            /* the marker too is checked: a cache without it would be rebuilt
             * beside, and never replace, a directory left incomplete */
            snprintf(done, sizeof done, "%s/COMPLETE", tmp);
            st = dg_file_out_replace(done, "", 0, NULL, err);
        }
        if (st != DG_OK) {
            remove_tree(tmp); /* ours alone: <dir>.tmp.<pid> */
            return st;
        }
        if (rename(tmp, dir) != 0) remove_tree(tmp); /* another process got there first */
    }
    dg_tokenizer tok;
    DG_TRY(dg_tokenizer_open(&tok, out->tokenizer_type, bpe_vocab_size > 0 ? out->vocab_file : NULL,
                             bpe_vocab_size > 0 ? out->merge_file : NULL, err));
    out->vocab_size = tok.vocab_size;
    out->eod = tok.eod;
    dg_tokenizer_close(&tok);
    dg_indexed ds;
    DG_TRY(dg_indexed_open(&ds, out->prefix, err));
    dg_indexed_close(&ds);
    return DG_OK;
}
