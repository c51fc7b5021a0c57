/* cmd_tokenizer.c — `dagatron tokenizer train|eval|encode`: learn a
 * byte-level BPE (vocab.json + merges.txt), measure one on a corpus, or
 * encode a string. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dg_args.h"
#include "dg_base.h"
#include "dg_bpe.h"
#include "dg_bpe_train.h"
#include "dg_cli.h"
#include "dg_corpus.h"
#include "dg_data_map.h"
#include "dg_tokenizer.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: dagatron tokenizer train --vocab-size N --output-dir DIR [corpus flags]\n"
            "       dagatron tokenizer eval [--tokenizer-type T] [--vocab-file F --merge-file F | --tokenizer-model F]\n"
            "                               [corpus flags]\n"
            "       dagatron tokenizer encode [--tokenizer-type T] [--vocab-file F --merge-file F | --tokenizer-model F]\n"
            "                                 --text STR\n"
            "\n"
            "train   learns a GPT-2-style byte-level BPE and writes DIR/vocab.json + DIR/merges.txt\n"
            "eval    checks decode(encode(doc)) == doc for every document and prints tokens per byte\n"
            "encode  prints the ids of STR, space-separated\n"
            "\n"
            "corpus flags (default: the fortunes corpus, one document per fortune):\n"
            "  --input FILE...       JSONL (*.json, *.jsonl) or text files\n"
            "  --input-format F      auto, jsonl or text\n"
            "  --doc-separator S     text: a line equal to S ends a document\n"
            "  --json-keys K         the JSON key holding the text (default: text)\n");
}

typedef struct cli {
    const char *cmd;
    char **inputs;
    int n_inputs;
    const char *fmt, *sep, *key, *out_dir, *tok_type, *vocab, *merges, *text;
    const char *tok_model; /* --tokenizer-model (HuggingFace, SentencePiece) */
    int vocab_size;
    char **owned; /* fortune files, when used */
    int n_owned;
} cli;

static int parse(int argc, char **argv, cli *c) {
    memset(c, 0, sizeof *c);
    c->fmt = "auto";
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? DG_EINPUT : -1;
    }
    c->cmd = argv[1];
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        int last = i + 1 >= argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return -1;
        } else if (!strcmp(a, "--input")) {
            int b = i + 1, e = b;
            while (e < argc && strncmp(argv[e], "--", 2) != 0) e++;
            c->inputs = argv + b;
            c->n_inputs = e - b;
            i = e - 1;
        } else if (!last && !strcmp(a, "--input-format")) c->fmt = argv[++i];
        else if (!last && !strcmp(a, "--doc-separator")) c->sep = argv[++i];
        else if (!last && !strcmp(a, "--json-keys")) c->key = argv[++i];
        else if (!last && !strcmp(a, "--output-dir")) c->out_dir = argv[++i];
        else if (!last && !strcmp(a, "--tokenizer-type")) c->tok_type = argv[++i];
        else if (!last && !strcmp(a, "--vocab-file")) c->vocab = argv[++i];
        else if (!last && !strcmp(a, "--merge-file")) c->merges = argv[++i];
        else if (!last && !strcmp(a, "--text")) c->text = argv[++i];
        else if (!last && !strcmp(a, "--tokenizer-model")) c->tok_model = argv[++i];
        else if (!last && !strcmp(a, "--vocab-size")) {
            /* >= 257 and what memory can hold are checked by the trainer (dg_bpe_train_check_size). */
            dg_err err = {{0}};
            if (dg_arg_parse_int(a, argv[++i], 1, INT32_MAX, &c->vocab_size, &err) != DG_OK) {
                dg_err_print(&err);
                return DG_EINPUT;
            }
        } else {
            fprintf(stderr, "dagatron: tokenizer: unknown flag or missing value: '%s' (see --help)\n", a);
            return DG_EINPUT;
        }
    }
    return DG_OK;
}

static dg_input_format format_of(const cli *c) {
    if (!strcmp(c->fmt, "jsonl")) return DG_INPUT_JSONL;
    if (!strcmp(c->fmt, "text")) return DG_INPUT_TEXT;
    return DG_INPUT_AUTO;
}

/* Default to the fortunes corpus. */
static int corpus(cli *c, dg_err *err) {
    if (strcmp(c->fmt, "auto") && strcmp(c->fmt, "jsonl") && strcmp(c->fmt, "text"))
        return dg_err_set(err, DG_EINPUT, "--input-format: expected auto, jsonl or text, got '%s'", c->fmt);
    if (c->n_inputs > 0) return DG_OK;
    DG_TRY(dg_corpus_fortune_files(NULL, &c->owned, &c->n_owned, err));
    c->inputs = c->owned;
    c->n_inputs = c->n_owned;
    c->fmt = "text";
    if (!c->sep) c->sep = DG_FORTUNES_SEPARATOR;
    return DG_OK;
}

static int train(cli *c, dg_err *err) {
    if (c->vocab_size <= 0 || !c->out_dir)
        return dg_err_set(err, DG_EINPUT, "tokenizer train needs --vocab-size and --output-dir");
    DG_TRY(dg_bpe_train_check_size(c->vocab_size, err)); /* before reading the corpus */
    DG_TRY(corpus(c, err));
    DG_TRY(dg_mkdirs(c->out_dir, err));
    double t0 = dg_now();
    dg_bpe bpe;
    DG_TRY(dg_corpus_train_bpe((const char *const *)c->inputs, c->n_inputs, format_of(c), c->sep, c->key,
                               c->vocab_size, &bpe, err));
    char v[4096], m[4096];
    snprintf(v, sizeof v, "%s/vocab.json", c->out_dir);
    snprintf(m, sizeof m, "%s/merges.txt", c->out_dir);
    int st = dg_bpe_save(&bpe, v, m, err);
    if (st == DG_OK)
        printf("dagatron: trained a BPE of %d tokens (%d merges) in %.2f s: %s, %s\n", bpe.vocab_size, bpe.n_merges,
               dg_now() - t0, v, m);
    dg_bpe_free(&bpe);
    return st;
}

static int open_tokenizer(const cli *c, dg_tokenizer *tok, dg_err *err) {
    dg_tokenizer_opts o = {c->tok_type ? c->tok_type : (c->vocab ? DG_TOK_GPT2BPE_NAME : NULL), c->vocab, c->merges,
                           c->tok_model, c->vocab_size};
    return dg_tokenizer_open_opts(tok, &o, err);
}

static int eval(cli *c, dg_err *err) {
    DG_TRY(corpus(c, err));
    dg_tokenizer tok;
    DG_TRY(open_tokenizer(c, &tok, err));
    dg_tok_state ts;
    dg_tok_state_init(&ts);
    dg_i32buf ids = {0}, seg = {0};
    dg_bytebuf text = {0}, back = {0};
    int64_t docs = 0, bytes = 0, tokens = 0, bad = 0;
    int st = DG_OK;
    double t0 = dg_now();
    for (int i = 0; i < c->n_inputs && st == DG_OK; i++) {
        dg_input_format f = format_of(c) ? format_of(c) : dg_corpus_guess_format(c->inputs[i]);
        dg_map mp;
        st = dg_map_file(&mp, c->inputs[i], err);
        if (st != DG_OK) break;
        dg_record *recs;
        int64_t n;
        dg_corpus_split(mp.p, mp.n, f, f == DG_INPUT_TEXT ? c->sep : NULL, &recs, &n);
        for (int64_t r = 0; r < n && st == DG_OK; r++) {
            text.n = seg.n = 0;
            if (f == DG_INPUT_JSONL) {
                st = dg_corpus_json_text(&recs[r], c->inputs[i], c->key ? c->key : "text", &text, &seg, err);
            } else {
                dg_bytebuf_append(&text, recs[r].p, (int64_t)recs[r].n);
                dg_i32buf_push(&seg, (int32_t)recs[r].n);
            }
            for (int64_t s = 0, off = 0; st == DG_OK && s < seg.n; off += seg.v[s++]) {
                ids.n = back.n = 0;
                dg_tokenizer_encode(&tok, &ts, text.v + off, (size_t)seg.v[s], &ids);
                st = dg_tokenizer_decode(&tok, ids.v, ids.n, &back, err);
                if (st == DG_OK && (back.n != seg.v[s] || memcmp(back.v, text.v + off, (size_t)back.n) != 0)) {
                    if (bad++ < 3)
                        fprintf(stderr, "dagatron: round trip differs for %s:%lld\n", c->inputs[i],
                                (long long)recs[r].line);
                }
                bytes += seg.v[s];
                tokens += ids.n;
            }
            docs++;
        }
        dg_free(recs);
        dg_unmap(&mp);
    }
    double dt = dg_now() - t0;
    if (st == DG_OK) {
        printf("dagatron: %s, vocabulary %" PRId64 ": %" PRId64 " documents, %" PRId64 " bytes -> %" PRId64
               " tokens: %.4f tokens/byte; round trip %s (%" PRId64 " mismatches); %.1f MB/s\n",
               c->tok_type ? c->tok_type : tok.kind == DG_TOK_BYTE ? DG_TOK_BYTE_NAME : DG_TOK_GPT2BPE_NAME,
               tok.vocab_size, docs, bytes, tokens,
               bytes ? (double)tokens / (double)bytes : 0.0, bad ? "FAILED" : "exact", bad,
               dt > 0 ? (double)bytes / 1e6 / dt : 0.0);
        if (bad) st = DG_EINTERNAL;
    }
    dg_tok_state_free(&ts);
    dg_i32buf_free(&ids);
    dg_i32buf_free(&seg);
    dg_bytebuf_free(&text);
    dg_bytebuf_free(&back);
    dg_tokenizer_close(&tok);
    return st;
}

static int encode(cli *c, dg_err *err) {
    if (!c->text) return dg_err_set(err, DG_EINPUT, "tokenizer encode needs --text");
    dg_tokenizer tok;
    DG_TRY(open_tokenizer(c, &tok, err));
    dg_i32buf ids = {0};
    dg_tokenizer_encode(&tok, NULL, (const uint8_t *)c->text, strlen(c->text), &ids);
    for (int64_t i = 0; i < ids.n; i++) printf(i ? " %d" : "%d", ids.v[i]);
    printf("\n");
    dg_i32buf_free(&ids);
    dg_tokenizer_close(&tok);
    return DG_OK;
}

int dg_cmd_tokenizer(int argc, char **argv) {
    cli c;
    int st = parse(argc, argv, &c);
    if (st == -1) return 0;
    if (st != DG_OK) return st;
    dg_err err = {{0}};
    if (!strcmp(c.cmd, "train")) st = train(&c, &err);
    else if (!strcmp(c.cmd, "eval")) st = eval(&c, &err);
    else if (!strcmp(c.cmd, "encode")) st = encode(&c, &err);
    else st = dg_err_set(&err, DG_EINPUT, "tokenizer: unknown subcommand '%s' (train, eval or encode)", c.cmd);
    if (st != DG_OK && err.msg[0]) dg_err_print(&err);
    dg_corpus_free_list(c.owned, c.n_owned);
    return st;
}
