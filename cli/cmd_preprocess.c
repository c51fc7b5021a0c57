/* cmd_preprocess.c — `dagatron preprocess`: tokenize text or JSONL into
 * Megatron's indexed dataset, with the flags of Megatron-LM's
 * tools/preprocess_data.py; and `--inspect` to validate and summarize a
 * dataset (or dump its tokens). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dg_args.h"
#include "dg_base.h"
#include "dg_cli.h"
#include "dg_corpus.h"
#include "dg_file_out.h"
#include "dg_indexed.h"
#include "dg_preprocess.h"
#include "dg_tokenizer.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: dagatron preprocess --input FILE [FILE...] --output-prefix P [flags]\n"
            "       dagatron preprocess --fortunes [DIR] --output-prefix P [flags]\n"
            "       dagatron preprocess --inspect PREFIX [--dump-tokens FILE]\n"
            "\n"
            "Writes P_<key>_document.bin/.idx (Megatron's indexed dataset, one document per\n"
            "JSON line or text document).\n"
            "\n"
            "  --input FILE...          JSONL (*.json, *.jsonl) or text files\n"
            "  --fortunes [DIR]         the fortunes corpus (default %s), one document per fortune\n"
            "  --input-format F         auto (by extension), jsonl or text\n"
            "  --doc-separator S        text: a line equal to S ends a document (default: one per file)\n"
            "  --json-keys K...         JSON keys to tokenize (default: text)\n"
            "  --append-eod             append the end-of-document token to every document\n"
            "  --output-prefix P        output path prefix\n"
            "  --workers N              tokenizer threads (default 1)\n"
            "  --tokenizer-type T       %s (default), %s, HuggingFaceTokenizer,\n"
            "                           SentencePieceTokenizer, Llama2Tokenizer or NullTokenizer\n"
            "  --vocab-file F           vocab.json for %s\n"
            "  --merge-file F           merges.txt for %s\n"
            "  --tokenizer-model F      tokenizer.json (or its folder) / tokenizer.model\n"
            "  --vocab-size N           NullTokenizer: ids 0..N, N the end of document\n"
            "  --log-interval N         progress every N documents (default 0: quiet)\n"
            "  --dataset-impl mmap      accepted for older Megatron scripts (the only format)\n"
            "  --inspect PREFIX         validate PREFIX.idx/.bin and print a summary\n"
            "  --dump-tokens FILE       with --inspect: write every token as little-endian int64\n",
            DG_FORTUNES_DIR, DG_TOK_BYTE_NAME, DG_TOK_GPT2BPE_NAME, DG_TOK_GPT2BPE_NAME, DG_TOK_GPT2BPE_NAME);
}

/* The values after flag argv[*i] up to the next "--" flag. */
static int values(int argc, char **argv, int *i, char ***out) {
    int b = *i + 1, e = b;
    while (e < argc && strncmp(argv[e], "--", 2) != 0) e++;
    *out = argv + b;
    *i = e - 1;
    return e - b;
}

/* --dump-tokens: every token as little-endian int64, all or nothing. */
static int dump_tokens(const dg_indexed *ds, const char *path, dg_err *err) {
    dg_file_out f;
    DG_TRY(dg_file_out_open(&f, path, "--dump-tokens", err));
    int32_t *buf = NULL;
    int64_t cap = 0, *wide = NULL;
    int st = DG_OK;
    for (int64_t s = 0; st == DG_OK && s < ds->num_sequences; s++) {
        int64_t n = dg_indexed_seq_len(ds, s);
        if (n > cap) {
            cap = n;
            buf = dg_realloc(buf, sizeof(int32_t) * (size_t)n);
            wide = dg_realloc(wide, sizeof(int64_t) * (size_t)n);
        }
        dg_indexed_read(ds, s, 0, n, buf);
        for (int64_t k = 0; k < n; k++) wide[k] = buf[k];
        st = dg_file_out_write(&f, wide, sizeof(int64_t) * (size_t)n, err);
    }
    dg_free(buf);
    dg_free(wide);
    if (st == DG_OK) return dg_file_out_commit(&f, err);
    dg_file_out_abort(&f);
    return st;
}

static int inspect(const char *prefix, const char *dump) {
    dg_err err = {{0}};
    dg_indexed ds;
    if (dg_indexed_open(&ds, prefix, &err) != DG_OK) {
        dg_err_print(&err);
        return DG_EINPUT;
    }
    printf("%s: %" PRId64 " sequences, %" PRId64 " documents, %" PRId64 " tokens of %s\n", prefix, ds.num_sequences,
           ds.num_docs, ds.num_tokens, dg_idx_dtype_name(ds.dtype));
    int st = dump ? dump_tokens(&ds, dump, &err) : DG_OK;
    if (st != DG_OK) dg_err_print(&err);
    dg_indexed_close(&ds);
    return st;
}

int dg_cmd_preprocess(int argc, char **argv) {
    char **inputs = NULL, **keys = NULL;
    int n_inputs = 0, n_keys = 0, workers = 1, append_eod = 0, log_interval = 0, fortunes = 0;
    dg_err err = {{0}};
    const char *fortunes_dir = NULL, *fmt = "auto", *sep = NULL, *out = NULL, *tok_type = NULL, *vocab = NULL,
               *merges = NULL, *insp = NULL, *dump = NULL, *tok_model = NULL, *vocab_size = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int last = i + 1 >= argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--input")) {
            n_inputs = values(argc, argv, &i, &inputs);
        } else if (!strcmp(a, "--json-keys")) {
            n_keys = values(argc, argv, &i, &keys);
        } else if (!strcmp(a, "--fortunes")) {
            fortunes = 1;
            if (!last && strncmp(argv[i + 1], "--", 2) != 0) fortunes_dir = argv[++i];
        } else if (!strcmp(a, "--append-eod")) {
            append_eod = 1;
        } else if (!last && !strcmp(a, "--input-format")) {
            fmt = argv[++i];
        } else if (!last && !strcmp(a, "--doc-separator")) {
            sep = argv[++i];
        } else if (!last && !strcmp(a, "--output-prefix")) {
            out = argv[++i];
        } else if (!last && !strcmp(a, "--workers")) {
            /* The range is generous: dg_preprocess_run refuses what memory cannot hold. */
            if (dg_arg_parse_int(a, argv[++i], 1, 1 << 20, &workers, &err) != DG_OK) break;
        } else if (!last && !strcmp(a, "--tokenizer-type")) {
            tok_type = argv[++i];
        } else if (!last && !strcmp(a, "--vocab-file")) {
            vocab = argv[++i];
        } else if (!last && !strcmp(a, "--merge-file")) {
            merges = argv[++i];
        } else if (!last && !strcmp(a, "--tokenizer-model")) {
            tok_model = argv[++i];
        } else if (!last && !strcmp(a, "--vocab-size")) {
            vocab_size = argv[++i];
        } else if (!last && !strcmp(a, "--log-interval")) {
            if (dg_arg_parse_int(a, argv[++i], 0, INT32_MAX, &log_interval, &err) != DG_OK) break;
        } else if (!last && !strcmp(a, "--inspect")) {
            insp = argv[++i];
        } else if (!last && !strcmp(a, "--dump-tokens")) {
            dump = argv[++i];
        } else if (!last && !strcmp(a, "--dataset-impl")) {
            /* Older Megatron scripts pass --dataset-impl mmap: that is the only format. */
            if (strcmp(argv[++i], "mmap") != 0) {
                fprintf(stderr, "dagatron: --dataset-impl: only 'mmap' (Megatron's indexed dataset) is supported\n");
                return DG_EINPUT;
            }
        } else {
            fprintf(stderr, "dagatron: preprocess: unknown flag or missing value: '%s' (see --help)\n", a);
            return DG_EINPUT;
        }
    }
    if (err.msg[0]) { /* a malformed number */
        dg_err_print(&err);
        return DG_EINPUT;
    }
    if (insp) return inspect(insp, dump);

    dg_input_format format = DG_INPUT_AUTO;
    if (!strcmp(fmt, "jsonl")) format = DG_INPUT_JSONL;
    else if (!strcmp(fmt, "text")) format = DG_INPUT_TEXT;
    else if (strcmp(fmt, "auto") != 0) {
        fprintf(stderr, "dagatron: --input-format: expected auto, jsonl or text, got '%s'\n", fmt);
        return DG_EINPUT;
    }
    char **fortune_files = NULL;
    int n_fortune = 0;
    if (fortunes) {
        if (dg_corpus_fortune_files(fortunes_dir, &fortune_files, &n_fortune, &err) != DG_OK) {
            dg_err_print(&err);
            return DG_EINPUT;
        }
        inputs = fortune_files;
        n_inputs = n_fortune;
        format = DG_INPUT_TEXT;
        if (!sep) sep = DG_FORTUNES_SEPARATOR;
    }
    if (n_inputs == 0 || !out) {
        fprintf(stderr, "dagatron: preprocess needs --input (or --fortunes) and --output-prefix (see --help)\n");
        dg_corpus_free_list(fortune_files, n_fortune);
        return DG_EINPUT;
    }
    char *vend = NULL;
    long long nvocab = vocab_size ? strtoll(vocab_size, &vend, 10) : 0;
    if (vocab_size && (vend == vocab_size || *vend)) {
        fprintf(stderr, "dagatron: --vocab-size: expected an integer, got '%s'\n", vocab_size);
        dg_corpus_free_list(fortune_files, n_fortune);
        return DG_EINPUT;
    }
    dg_tokenizer tok;
    dg_tokenizer_opts to = {tok_type, vocab, merges, tok_model, nvocab};
    int tst = dg_tokenizer_open_opts(&tok, &to, &err);
    if (tst == DG_OK && append_eod && tok.eod < 0) {
        tst = dg_err_set(&err, DG_EINPUT, "--append-eod: the tokenizer has no end-of-document token");
        dg_tokenizer_close(&tok);
    }
    if (tst != DG_OK) {
        dg_err_print(&err);
        dg_corpus_free_list(fortune_files, n_fortune);
        return DG_EINPUT;
    }
    dg_preprocess_opts o = {0};
    o.inputs = (const char *const *)inputs;
    o.n_inputs = n_inputs;
    o.format = format;
    o.json_keys = (const char *const *)keys;
    o.n_keys = n_keys;
    o.doc_separator = sep;
    o.append_eod = append_eod;
    o.output_prefix = out;
    o.workers = workers;
    o.tok = &tok;
    o.log_interval = log_interval;
    dg_preprocess_stats st;
    int rc = dg_preprocess_run(&o, &st, &err);
    if (rc == DG_OK) {
        char name[4096];
        dg_preprocess_output_name(name, sizeof name, out, n_keys ? keys[0] : "text");
        printf("dagatron: wrote %s.{bin,idx}%s: %" PRId64 " documents, %" PRId64 " tokens (%s) from %.2f MB in %.2f s, "
               "%.1f MB/s\n",
               name, n_keys > 1 ? " (and the other keys)" : "", st.documents, st.tokens,
               dg_idx_dtype_name(dg_idx_dtype_for_vocab(tok.vocab_size)), (double)st.bytes_in / 1e6, st.seconds,
               st.seconds > 0 ? (double)st.bytes_in / 1e6 / st.seconds : 0.0);
    } else {
        dg_err_print(&err);
    }
    dg_tokenizer_close(&tok);
    dg_corpus_free_list(fortune_files, n_fortune);
    return rc;
}
