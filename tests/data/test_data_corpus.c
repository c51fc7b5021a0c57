/* test_data_corpus.c — the fortunes corpus and the default dataset:
 * one document per fortune; dg_corpus_default_dataset builds the tokenized
 * .bin/.idx once (byte-level and BPE 4096) and re-uses it; the training feed
 * opens it with --split 969,30,1 and yields samples whose tokens decode to
 * fortune text. Also the record splitter (JSONL lines, separators) and its
 * batch-at-a-time cursor. */
#include "dg_test_data_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dg_blend.h"
#include "dg_corpus.h"
#include "dg_tokenizer.h"

static char g_dir[256];

static void test_split_records(void **s) {
    (void)s;
    const char *t = "a\n%\nb b\n%\n%\nc\n";
    dg_record *r;
    int64_t n;
    dg_corpus_split((const uint8_t *)t, strlen(t), DG_INPUT_TEXT, "%", &r, &n);
    assert_int_equal(n, 3);
    assert_int_equal(r[1].n, 4);
    assert_memory_equal(r[1].p, "b b\n", 4);
    assert_int_equal(r[2].line, 6);
    dg_free(r);
    const char *j = "{\"text\": \"x\"}\n\n  \n{\"text\": [\"y\", \"zz\"]}";
    dg_corpus_split((const uint8_t *)j, strlen(j), DG_INPUT_JSONL, NULL, &r, &n);
    assert_int_equal(n, 2);
    assert_int_equal(r[1].line, 4);
    dg_bytebuf text = {0};
    dg_i32buf seg = {0};
    dg_err err = {{0}};
    assert_int_equal(dg_corpus_json_text(&r[1], "f.jsonl", "text", &text, &seg, &err), DG_OK);
    assert_int_equal(seg.n, 2);
    assert_int_equal(text.n, 3);
    assert_int_equal(dg_corpus_json_text(&r[1], "f.jsonl", "body", &text, &seg, &err), DG_EINPUT);
    assert_string_equal(err.msg, "f.jsonl:4: no string (or list of strings) under key 'body'");
    dg_bytebuf_free(&text);
    dg_i32buf_free(&seg);
    dg_free(r);
}

/* Reading a batch at a time gives the records of a one-shot split. */
static void test_cursor_batches(void **s) {
    (void)s;
    const char *inputs[2] = {"a\n%\nb b\n%\n%\nc\nd\n%\ne", "{\"t\": 1}\n\n{\"t\": 2}\n{\"t\": 3}\n"};
    dg_input_format fmts[2] = {DG_INPUT_TEXT, DG_INPUT_JSONL};
    for (int f = 0; f < 2; f++) {
        const uint8_t *p = (const uint8_t *)inputs[f];
        size_t n = strlen(inputs[f]);
        dg_record *all;
        int64_t count;
        dg_corpus_split(p, n, fmts[f], "%", &all, &count);
        assert_int_equal(count, f == 0 ? 4 : 3);
        for (int64_t max = 1; max <= 3; max++) {
            for (size_t max_bytes = 1; max_bytes <= 100; max_bytes += 99) {
                dg_record_cursor c;
                dg_record_cursor_init(&c, p, n, fmts[f], "%");
                dg_record out[3];
                int64_t k = 0, got;
                while ((got = dg_record_cursor_next(&c, out, max, max_bytes)) > 0) {
                    for (int64_t i = 0; i < got; i++, k++) {
                        assert_true(k < count);
                        assert_ptr_equal(out[i].p, all[k].p);
                        assert_int_equal(out[i].n, all[k].n);
                        assert_int_equal(out[i].line, all[k].line);
                    }
                }
                assert_int_equal(k, count);
            }
        }
        dg_free(all);
    }
}

static void check_default(int32_t vocab) {
    dg_default_data dd;
    dg_err err = {{0}};
    double t0 = dg_now();
    if (dg_corpus_default_dataset(g_dir, vocab, 2, &dd, &err) != DG_OK) {
        fprintf(stderr, "%s\n", err.msg);
        fail();
    }
    double t_build = dg_now() - t0;
    t0 = dg_now();
    assert_int_equal(dg_corpus_default_dataset(g_dir, vocab, 2, &dd, &err), DG_OK); /* cached */
    double t_reuse = dg_now() - t0;
    printf("default dataset (%s, vocabulary %lld): %s built in %.2f s, re-used in %.3f s\n", dd.tokenizer_type,
           (long long)dd.vocab_size, dd.prefix, t_build, t_reuse);
    dg_indexed ds;
    assert_int_equal(dg_indexed_open(&ds, dd.prefix, &err), DG_OK);
    assert_true(ds.num_docs > 15000);
    assert_int_equal(ds.num_docs, ds.num_sequences);
    /* Every document ends with the end-of-document token. */
    int32_t t;
    for (int64_t i = 0; i < ds.num_sequences; i += 997) {
        dg_indexed_read(&ds, i, dg_indexed_seq_len(&ds, i) - 1, 1, &t);
        assert_int_equal(t, dd.eod);
    }
    dg_indexed_close(&ds);
    /* The feed over it. */
    char *words[] = {dd.prefix};
    dg_data_config cfg = {0};
    cfg.n_words = 1;
    cfg.words = words;
    cfg.split = "969,30,1";
    cfg.num_samples[0] = 1000;
    cfg.num_samples[1] = 10;
    cfg.num_samples[2] = 10;
    cfg.gpt.seq_length = 128;
    cfg.gpt.seed = 1234;
    cfg.gpt.drop_last_partial = 1;
    dg_data d;
    assert_int_equal(dg_data_open(&d, &cfg, &err), DG_OK);
    for (int sp = 0; sp < 3; sp++) assert_true(d.split[sp].present && d.split[sp].size >= cfg.num_samples[sp]);
    int32_t tok[129];
    dg_data_sample(&d, 0, 0, tok);
    dg_tokenizer tk;
    assert_int_equal(dg_tokenizer_open(&tk, dd.tokenizer_type, vocab ? dd.vocab_file : NULL,
                                       vocab ? dd.merge_file : NULL, &err), DG_OK);
    dg_bytebuf text = {0};
    assert_int_equal(dg_tokenizer_decode(&tk, tok, 129, &text, &err), DG_OK);
    printf("  first training sample: \"%.*s\"\n", (int)DG_MIN(text.n, 100), (const char *)text.v);
    dg_bytebuf_free(&text);
    dg_tokenizer_close(&tk);
    dg_data_close(&d);
}

static void test_default_byte(void **s) { (void)s; check_default(0); }
static void test_default_bpe(void **s) { (void)s; check_default(4096); }

int main(void) {
    tdir_make(g_dir, sizeof g_dir, "corpus");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_records),
        cmocka_unit_test(test_cursor_batches),
        cmocka_unit_test(test_default_byte),
        cmocka_unit_test(test_default_bpe),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tdir_remove(g_dir);
    return rc;
}
