/* bench_preprocess.c — preprocessing throughput (MB of input per second) of
 * `dagatron preprocess` for the byte-level tokenizer and a 4096-token BPE
 * trained on the corpus, on text and on JSONL input, with 1 worker and with
 * all cores.
 *
 * The corpus is the fortunes (one document per fortune), repeated R times
 * (default 8, about 20 MB) so the timing is not dominated by start-up.
 *
 *   bench_preprocess [--repeat R] [--workers N] [--dir TMPDIR]
 */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dg_base.h"
#include "dg_bpe.h"
#include "dg_corpus.h"
#include "dg_data_map.h"
#include "dg_preprocess.h"
#include "dg_tokenizer.h"

/* Write the corpus R times as text (% separated) and as JSONL. */
static int write_corpus(const char *txt, const char *jsonl, int repeat, dg_err *err) {
    char **files;
    int n;
    DG_TRY(dg_corpus_fortune_files(NULL, &files, &n, err));
    FILE *ft = fopen(txt, "w"), *fj = fopen(jsonl, "w");
    if (!ft || !fj) return dg_err_set(err, DG_EINPUT, "cannot write the benchmark corpus next to %s", txt);
    dg_bytebuf doc = {0};
    for (int r = 0; r < repeat; r++) {
        for (int i = 0; i < n; i++) {
            dg_map m;
            DG_TRY(dg_map_file(&m, files[i], err));
            dg_record *recs;
            int64_t count;
            dg_corpus_split(m.p, m.n, DG_INPUT_TEXT, DG_FORTUNES_SEPARATOR, &recs, &count);
            for (int64_t k = 0; k < count; k++) {
                fwrite(recs[k].p, 1, recs[k].n, ft);
                fputs("%\n", ft);
                doc.n = 0;
                dg_bytebuf_append(&doc, recs[k].p, (int64_t)recs[k].n);
                dg_bytebuf_append(&doc, "", 1);
                cJSON *o = cJSON_CreateObject();
                cJSON_AddStringToObject(o, "text", (const char *)doc.v);
                char *s = cJSON_PrintUnformatted(o);
                fputs(s, fj);
                fputc('\n', fj);
                cJSON_free(s);
                cJSON_Delete(o);
            }
            dg_free(recs);
            dg_unmap(&m);
        }
    }
    dg_bytebuf_free(&doc);
    fclose(ft);
    fclose(fj);
    dg_corpus_free_list(files, n);
    return DG_OK;
}

static int run(const char *name, const dg_tokenizer *tok, const char *input, dg_input_format fmt, int workers,
               const char *out, dg_err *err) {
    const char *inputs[1] = {input};
    dg_preprocess_opts o = {0};
    o.inputs = inputs;
    o.n_inputs = 1;
    o.format = fmt;
    o.doc_separator = fmt == DG_INPUT_TEXT ? DG_FORTUNES_SEPARATOR : NULL;
    o.append_eod = 1;
    o.output_prefix = out;
    o.workers = workers;
    o.tok = tok;
    dg_preprocess_stats st;
    DG_TRY(dg_preprocess_run(&o, &st, err));
    printf("bench_preprocess: %-18s %-5s workers=%d: %7.1f MB -> %9lld tokens in %6.3f s = %7.1f MB/s\n", name,
           fmt == DG_INPUT_TEXT ? "text" : "jsonl", workers, (double)st.bytes_in / 1e6, (long long)st.tokens,
           st.seconds, (double)st.bytes_in / 1e6 / st.seconds);
    return DG_OK;
}

int main(int argc, char **argv) {
    int repeat = 8, workers = (int)sysconf(_SC_NPROCESSORS_ONLN);
    const char *dir = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--repeat")) repeat = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--workers")) workers = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--dir")) dir = argv[i + 1];
    }
    if (workers < 1) workers = 1;
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s/dg_bench_preprocess_XXXXXX", dir ? dir : "/tmp");
    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        return 1;
    }
    char txt[600], jsonl[600], out[600];
    snprintf(txt, sizeof txt, "%s/corpus.txt", tmp);
    snprintf(jsonl, sizeof jsonl, "%s/corpus.jsonl", tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    dg_err err = {{0}};
    int st = write_corpus(txt, jsonl, repeat, &err);

    dg_tokenizer byte_tok, bpe_tok;
    if (st == DG_OK) st = dg_tokenizer_open(&byte_tok, NULL, NULL, NULL, &err);
    if (st == DG_OK) {
        char **files;
        int n;
        double t0 = dg_now();
        st = dg_corpus_fortune_files(NULL, &files, &n, &err);
        dg_bpe bpe;
        if (st == DG_OK)
            st = dg_corpus_train_bpe((const char *const *)files, n, DG_INPUT_TEXT, DG_FORTUNES_SEPARATOR, NULL, 4096,
                                     &bpe, &err);
        if (st == DG_OK) {
            printf("bench_preprocess: trained BPE 4096 on fortunes (2.5 MB) in %.2f s\n", dg_now() - t0);
            dg_tokenizer_from_bpe(&bpe_tok, &bpe);
            dg_corpus_free_list(files, n);
        }
    }
    int ws[2] = {1, workers};
    for (int k = 0; k < (workers > 1 ? 2 : 1) && st == DG_OK; k++) {
        if (st == DG_OK) st = run(DG_TOK_BYTE_NAME, &byte_tok, txt, DG_INPUT_TEXT, ws[k], out, &err);
        if (st == DG_OK) st = run(DG_TOK_GPT2BPE_NAME, &bpe_tok, txt, DG_INPUT_TEXT, ws[k], out, &err);
        if (st == DG_OK) st = run(DG_TOK_BYTE_NAME, &byte_tok, jsonl, DG_INPUT_JSONL, ws[k], out, &err);
        if (st == DG_OK) st = run(DG_TOK_GPT2BPE_NAME, &bpe_tok, jsonl, DG_INPUT_JSONL, ws[k], out, &err);
    }
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) fprintf(stderr, "bench_preprocess: could not remove %s\n", tmp);
    if (st != DG_OK) {
        dg_err_print(&err);
        return st;
    }
    dg_tokenizer_close(&byte_tok);
    dg_tokenizer_close(&bpe_tok);
    return 0;
}
