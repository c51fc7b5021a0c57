/* test_data_bpe.c — the byte-level BPE: GPT-2 pre-tokenization, merge
 * order, vocab.json/merges.txt round trips, decode(encode(x)) == x on
 * arbitrary bytes and on the whole fortunes corpus, and the acceptance
 * figure: a 4096-token BPE trained on fortunes needs < 0.35 tokens per byte
 * (printed). */
#include "dg_test_data_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dg_bpe.h"
#include "dg_bpe_train.h"
#include "dg_corpus.h"
#include "dg_data_map.h"
#include "dg_tokenizer.h"

static char g_dir[256];

/* Pieces of s joined with '|'. */
static void pieces(const char *s, char *out) {
    size_t n = strlen(s), k = 0;
    for (size_t i = 0; i < n;) {
        size_t e = dg_bpe_pretok_next((const uint8_t *)s, n, i);
        assert_true(e > i && e <= n);
        if (i) out[k++] = '|';
        memcpy(out + k, s + i, e - i);
        k += e - i;
        i = e;
    }
    out[k] = 0;
}

static void test_pretokenizer(void **s) {
    (void)s;
    static const char *cases[][2] = {
        {"Hello world", "Hello| world"},
        {"don't stop", "don|'t| stop"},
        {"we're I'll you've I'm he'd it's", "we|'re| I|'ll| you|'ve| I|'m| he|'d| it|'s"},
        {"x'S", "x|'|S"},
        {"a  b", "a| | b"},
        {"   end", "  | end"},
        {"x\n\ny", "x|\n|\n|y"},
        {"trailing  ", "trailing|  "},
        {"123abc 45", "123|abc| 45"},
        {"!!? hi...", "!!?| hi|..."},
        {"h\xc3\xa9llo w\xc3\xb6rld", "h\xc3\xa9llo| w\xc3\xb6rld"},
        {"a\xe2\x80\x94" "b", "a|\xe2\x80\x94|b"},         /* an em dash is a symbol */
        {"\xd9\xa3\xd9\xa4 x", "\xd9\xa3\xd9\xa4| x"},     /* Arabic-Indic digits are numbers */
        {"tab\there", "tab|\t|here"},
        {"\xff\xfe" "ab", "\xff\xfe|ab"},                   /* invalid UTF-8: symbols */
    };
    char out[256];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pieces(cases[i][0], out);
        assert_string_equal(out, cases[i][1]);
    }
    assert_int_equal(dg_bpe_byte_char(' '), 0x120); /* "Ġ" */
    assert_int_equal(dg_bpe_byte_char('\n'), 0x10a); /* "Ċ" */
    assert_int_equal(dg_bpe_byte_char('A'), 'A');
}

/* Merge order: the lowest-ranked pair first, all its occurrences. */
static void test_merge_order(void **s) {
    (void)s;
    dg_bpe b0;
    dg_bpe_from_merges(&b0, NULL, 0);
    int32_t a = b0.byte_id['a'], bb = b0.byte_id['b'], c = b0.byte_id['c'];
    dg_bpe_free(&b0);
    /* 256: b c, 257: a b, 258: a bc */
    const int32_t m[3][2] = {{bb, c}, {a, bb}, {a, 256}};
    dg_bpe b;
    dg_bpe_from_merges(&b, m, 3);
    assert_int_equal(b.vocab_size, 260);
    assert_int_equal(b.eod, 259);
    dg_i32buf ids = {0};
    dg_bpe_encode(&b, NULL, (const uint8_t *)"abc", 3, &ids);
    assert_int_equal(ids.n, 1);
    assert_int_equal(ids.v[0], 258);
    ids.n = 0;
    dg_bpe_encode(&b, NULL, (const uint8_t *)"abab", 4, &ids);
    assert_int_equal(ids.n, 2);
    assert_int_equal(ids.v[0], 257);
    assert_int_equal(ids.v[1], 257);
    dg_i32buf_free(&ids);
    dg_bpe_free(&b);
}

static void roundtrip_bytes(const dg_bpe *b, dg_bpe_cache *c, const uint8_t *x, size_t n) {
    dg_i32buf ids = {0};
    dg_bytebuf back = {0};
    dg_err err = {{0}};
    dg_bpe_encode(b, c, x, n, &ids);
    assert_int_equal(dg_bpe_decode(b, ids.v, ids.n, &back, &err), DG_OK);
    assert_int_equal(back.n, (int64_t)n);
    if (n) assert_memory_equal(back.v, x, n);
    dg_i32buf_free(&ids);
    dg_bytebuf_free(&back);
}

static void test_train_save_load_roundtrip(void **s) {
    (void)s;
    const char *text = "the quick brown fox jumps over the lazy dog. The dog's quick, the fox isn't!\n"
                       "h\xc3\xa9llo w\xc3\xb6rld 12345 123 the the the fox fox\n";
    dg_bpe_trainer *t = dg_bpe_trainer_new();
    for (int i = 0; i < 3; i++) dg_bpe_trainer_add(t, (const uint8_t *)text, strlen(text));
    dg_bpe b;
    dg_err err = {{0}};
    assert_int_equal(dg_bpe_trainer_train(t, 300, &b, &err), DG_OK);
    dg_bpe_trainer_free(t);
    assert_true(b.vocab_size <= 300 && b.vocab_size > 257);
    char v[300], m[300];
    snprintf(v, sizeof v, "%s/vocab.json", g_dir);
    snprintf(m, sizeof m, "%s/merges.txt", g_dir);
    assert_int_equal(dg_bpe_save(&b, v, m, &err), DG_OK);
    dg_bpe l;
    assert_int_equal(dg_bpe_load(&l, v, m, &err), DG_OK);
    assert_int_equal(l.vocab_size, b.vocab_size);
    assert_int_equal(l.n_merges, b.n_merges);
    assert_int_equal(l.eod, b.eod);
    for (int32_t i = 0; i < b.vocab_size; i++) {
        assert_int_equal(l.tok_len[i], b.tok_len[i]);
        assert_memory_equal(l.tok_bytes[i], b.tok_bytes[i], (size_t)b.tok_len[i]);
    }
    /* Same ids from the trained and the reloaded tokenizer, cached or not. */
    dg_i32buf x = {0}, y = {0};
    dg_bpe_cache c;
    dg_bpe_cache_init(&c);
    dg_bpe_encode(&b, NULL, (const uint8_t *)text, strlen(text), &x);
    dg_bpe_encode(&l, &c, (const uint8_t *)text, strlen(text), &y);
    dg_bpe_encode(&l, &c, (const uint8_t *)text, strlen(text), &y);
    assert_int_equal(2 * x.n, y.n);
    assert_memory_equal(x.v, y.v, sizeof(int32_t) * (size_t)x.n);
    assert_memory_equal(x.v, y.v + x.n, sizeof(int32_t) * (size_t)x.n);
    assert_true(x.n < (int64_t)strlen(text) / 2);
    /* Arbitrary bytes, including invalid UTF-8 and NULs. */
    uint32_t seed = 9;
    uint8_t buf[4096];
    for (int r = 0; r < 200; r++) {
        size_t n = (size_t)(r * 19 % 4096);
        for (size_t i = 0; i < n; i++) {
            seed = seed * 1664525u + 1013904223u;
            buf[i] = (r % 2) ? (uint8_t)(seed >> 24) : (uint8_t)text[(seed >> 8) % strlen(text)];
        }
        roundtrip_bytes(&l, &c, buf, n);
    }
    /* An unknown id does not decode. */
    dg_bytebuf back = {0};
    int32_t bad = 99999;
    assert_int_equal(dg_bpe_decode(&l, &bad, 1, &back, &err), DG_EINPUT);
    dg_bytebuf_free(&back);
    dg_i32buf_free(&x);
    dg_i32buf_free(&y);
    dg_bpe_cache_free(&c);
    dg_bpe_free(&l);
    dg_bpe_free(&b);
}

static void test_load_errors(void **s) {
    (void)s;
    char v[300], m[300];
    snprintf(v, sizeof v, "%s/bad_vocab.json", g_dir);
    snprintf(m, sizeof m, "%s/bad_merges.txt", g_dir);
    FILE *f = fopen(v, "w");
    fputs("[1, 2]", f);
    fclose(f);
    f = fopen(m, "w");
    fputs("#version: 0.2\n", f);
    fclose(f);
    dg_bpe b;
    dg_err err = {{0}};
    assert_int_equal(dg_bpe_load(&b, v, m, &err), DG_EINPUT);
    assert_non_null(strstr(err.msg, "bad_vocab.json"));
    /* A merge of tokens the vocabulary lacks names its line. */
    dg_bpe ok;
    dg_bpe_from_merges(&ok, NULL, 0);
    assert_int_equal(dg_bpe_save(&ok, v, m, &err), DG_OK);
    dg_bpe_free(&ok);
    f = fopen(m, "a");
    fputs("Ġ t\n", f);
    fclose(f);
    assert_int_equal(dg_bpe_load(&b, v, m, &err), DG_EINPUT);
    assert_non_null(strstr(err.msg, "bad_merges.txt:2"));
}

/* Issue 10: a vocab.json id that is negative, a string, fractional, past
 * int32 or not below the number of entries (Megatron's vocabulary size) is
 * refused with a message naming the token. The message used to
 * read the token's name after the JSON tree was freed (a use-after-free
 * that ASan reports, and that printed garbage). */
static void test_vocab_bad_ids(void **s) {
    (void)s;
    static const char *ids[] = {"-1", "\"7\"", "1.5", "3000000000", "null"};
    const char *key = "a_token_with_a_rather_long_name_0123456789";
    char v[300], m[300];
    snprintf(v, sizeof v, "%s/ids_vocab.json", g_dir);
    snprintf(m, sizeof m, "%s/ids_merges.txt", g_dir);
    FILE *f = fopen(m, "w");
    fputs("#version: 0.2\n", f);
    fclose(f);
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        f = fopen(v, "w");
        fprintf(f, "{\"a\": 0, \"%s\": %s, \"b\": 1}", key, ids[i]);
        fclose(f);
        dg_bpe b;
        dg_err err = {{0}};
        assert_int_equal(dg_bpe_load(&b, v, m, &err), DG_EINPUT);
        char want[128];
        snprintf(want, sizeof want, "token '%s' has no valid integer id", key);
        if (!strstr(err.msg, want)) fail_msg("id %s: got '%s'", ids[i], err.msg);
    }
    f = fopen(v, "w");
    fprintf(f, "{\"a\": 0, \"%s\": 3, \"b\": 1}", key);
    fclose(f);
    dg_bpe b;
    dg_err err = {{0}};
    assert_int_equal(dg_bpe_load(&b, v, m, &err), DG_EINPUT);
    char want[160];
    snprintf(want, sizeof want, "token '%s' has id 3, but the vocabulary has 3 entries", key);
    if (!strstr(err.msg, want)) fail_msg("sparse id: got '%s'", err.msg);
}

/* Acceptance 3 over the whole corpus. */
static void test_fortunes_4096(void **s) {
    (void)s;
    char **files;
    int n;
    dg_err err = {{0}};
    if (dg_corpus_fortune_files(NULL, &files, &n, &err) != DG_OK) {
        fprintf(stderr, "%s\n", err.msg);
        fail();
    }
    double t0 = dg_now();
    dg_bpe b;
    assert_int_equal(
        dg_corpus_train_bpe((const char *const *)files, n, DG_INPUT_TEXT, DG_FORTUNES_SEPARATOR, NULL, 4096, &b, &err),
        DG_OK);
    double t_train = dg_now() - t0;
    assert_int_equal(b.vocab_size, 4096);
    dg_tokenizer tok;
    dg_tokenizer_from_bpe(&tok, &b);
    dg_tok_state st;
    dg_tok_state_init(&st);
    int64_t bytes = 0, tokens = 0, docs = 0;
    dg_i32buf ids = {0};
    dg_bytebuf back = {0};
    t0 = dg_now();
    for (int i = 0; i < n; i++) {
        dg_map mp;
        assert_int_equal(dg_map_file(&mp, files[i], &err), DG_OK);
        dg_record *recs;
        int64_t count;
        dg_corpus_split(mp.p, mp.n, DG_INPUT_TEXT, DG_FORTUNES_SEPARATOR, &recs, &count);
        for (int64_t r = 0; r < count; r++) {
            ids.n = back.n = 0;
            dg_tokenizer_encode(&tok, &st, recs[r].p, recs[r].n, &ids);
            assert_int_equal(dg_tokenizer_decode(&tok, ids.v, ids.n, &back, &err), DG_OK);
            assert_int_equal(back.n, (int64_t)recs[r].n);
            assert_memory_equal(back.v, recs[r].p, recs[r].n);
            bytes += (int64_t)recs[r].n;
            tokens += ids.n;
            docs++;
        }
        dg_free(recs);
        dg_unmap(&mp);
    }
    double t_enc = dg_now() - t0;
    double tpb = (double)tokens / (double)bytes;
    printf("fortunes: %lld documents, %lld bytes; BPE 4096 trained in %.2f s; %lld tokens = %.4f tokens/byte "
           "(acceptance: < 0.35); decode(encode(x)) == x for every document; encode %.1f MB/s\n",
           (long long)docs, (long long)bytes, t_train, (long long)tokens, tpb, t_enc > 0 ? bytes / 1e6 / t_enc : 0.0);
    assert_true(docs > 10000);
    assert_true(tpb < 0.35);
    dg_i32buf_free(&ids);
    dg_bytebuf_free(&back);
    dg_tok_state_free(&st);
    dg_tokenizer_close(&tok);
    dg_corpus_free_list(files, n);
}

int main(void) {
    tdir_make(g_dir, sizeof g_dir, "bpe");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pretokenizer),
        cmocka_unit_test(test_merge_order),
        cmocka_unit_test(test_train_save_load_roundtrip),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_vocab_bad_ids),
        cmocka_unit_test(test_fortunes_4096),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tdir_remove(g_dir);
    return rc;
}
