/* test_ckpt_tokenizer.c — the tokenizer a checkpoint names, reopened
 * (io/dg_tok_ckpt.h), under both NullTokenizer rules (issue 25, item 1):
 *
 *   - NullTokenizer follows Megatron: --vocab-size N gives N + 1 ids and N
 *     is the end of document, for 128/128 too (129 ids, padded to 256 by the
 *     trainer: tests/tokenizer/test_tokenizers.py null);
 *   - a checkpoint written before "eod" was recorded (the older rule: N ids,
 *     N - 1 the end of document, none on mock data) reopens as it did, the
 *     v1 fixture (tests/checkpoint/v1_before_record) among them, and is
 *     written back without the field;
 *   - the recorded "eod" survives a save and a read; a file tokenizer whose
 *     end of document is not the recorded one, or a NullTokenizer eod outside
 *     its ids, is one line naming the manifest. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ckpt_test_util.h"
#include "dg_ckpt_fs.h"
#include "dg_tok_ckpt.h"

/* The tokenizer m names, reopened: its ids and end of document. */
static int reopen(const dg_ckpt_meta *m, int64_t *vocab, int32_t *eod, dg_err *err) {
    dg_tokenizer t;
    int st = dg_tokenizer_open_ckpt(&t, m, "m.json", err);
    if (st != DG_OK) return st;
    *vocab = t.vocab_size;
    *eod = t.eod;
    dg_tokenizer_close(&t);
    return DG_OK;
}

/* Megatron's NullTokenizer: vocab_size + 1 ids, the end of document vocab_size. */
static void test_megatron_rule(void **state) {
    (void)state;
    int64_t sizes[] = {2, 50, 127, 128, 255, 50256};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        dg_tokenizer t;
        dg_tokenizer_opts o = {DG_TOK_NULL_NAME, NULL, NULL, NULL, sizes[i]};
        dg_err err = {{0}};
        assert_int_equal(dg_tokenizer_open_opts(&t, &o, &err), DG_OK);
        assert_int_equal(t.vocab_size, sizes[i] + 1);
        assert_int_equal(t.eod, sizes[i]);
        /* the end of document is an id, and decodes as one */
        dg_bytebuf b = {0};
        assert_int_equal(dg_tokenizer_decode(&t, &t.eod, 1, &b, &err), DG_OK);
        char want[24];
        snprintf(want, sizeof want, "%lld", (long long)sizes[i]);
        assert_int_equal(b.n, (int64_t)strlen(want));
        assert_memory_equal(b.v, want, strlen(want));
        dg_bytebuf_free(&b);
        dg_tokenizer_close(&t);
    }
}

/* The v1 fixture: NullTokenizer on mock data, vocab_size 100, no "eod":
 * 100 ids and no end of document, as generate read it before; the same
 * record off mock data: N - 1 = 99. */
static void test_older_checkpoint(void **state) {
    (void)state;
    dg_ckpt_manifest man;
    dg_err err = {{0}};
    assert_int_equal(dg_ckpt_read_manifest(DG_CKPT_FIXTURES "/v1_before_record", DG_CKPT_LATEST, &man, &err), DG_OK);
    assert_false(man.meta.tokenizer.eod_recorded);
    int64_t vocab = 0;
    int32_t eod = 0;
    assert_int_equal(reopen(&man.meta, &vocab, &eod, &err), DG_OK);
    assert_int_equal(vocab, 100);
    assert_int_equal(eod, -1);
    dg_ckpt_meta m = man.meta;
    m.data.mock = 0;
    assert_int_equal(reopen(&m, &vocab, &eod, &err), DG_OK);
    assert_int_equal(vocab, 100);
    assert_int_equal(eod, 99);
    /* written back, it still has no "eod": it still reads by the older rule */
    char dir[256], path[400], *text;
    size_t n;
    ckpt_tmpdir(dir, sizeof dir);
    assert_int_equal(dg_ckpt_save(dir, &man.meta, NULL, 0, NULL, &err), DG_OK);
    snprintf(path, sizeof path, "%s/iter_0000001/metadata.json", dir);
    assert_int_equal(dg_ckpt_read_file(path, &text, &n, &err), DG_OK);
    assert_null(strstr(text, "\"eod\""));
    dg_free(text);
    ckpt_rmrf(dir);
    dg_ckpt_manifest_free(&man);
}

/* A checkpoint of today's rule records "eod"; it reads back as saved, on
 * mock data too (Megatron's mock data ends documents with the tokenizer's
 * end of document). */
static void test_recorded_eod(void **state) {
    (void)state;
    dg_ckpt_meta m;
    dg_ckpt_meta_init(&m);
    m.iteration = 3;
    snprintf(m.tokenizer.type, sizeof m.tokenizer.type, "%s", DG_TOK_NULL_NAME);
    m.tokenizer.vocab_size = 129; /* --vocab-size 128 */
    m.tokenizer.eod = 128;
    m.tokenizer.eod_recorded = 1;
    m.data.mock = 1;
    char dir[256];
    ckpt_tmpdir(dir, sizeof dir);
    dg_err err = {{0}};
    assert_int_equal(dg_ckpt_save(dir, &m, NULL, 0, NULL, &err), DG_OK);
    dg_ckpt_manifest man;
    assert_int_equal(dg_ckpt_read_manifest(dir, DG_CKPT_LATEST, &man, &err), DG_OK);
    assert_true(man.meta.tokenizer.eod_recorded);
    assert_int_equal(man.meta.tokenizer.eod, 128);
    int64_t vocab = 0;
    int32_t eod = 0;
    assert_int_equal(reopen(&man.meta, &vocab, &eod, &err), DG_OK);
    assert_int_equal(vocab, 129);
    assert_int_equal(eod, 128);
    dg_ckpt_manifest_free(&man);
    ckpt_rmrf(dir);

    /* an eod outside the ids; a byte-level checkpoint (no files) whose
     * recorded end of document is not 256 */
    m.tokenizer.eod = 129;
    assert_int_equal(reopen(&m, &vocab, &eod, &err), DG_EINPUT);
    assert_msg(&err, "m.json", "eod 129 is outside its vocabulary [0, 129)");
    snprintf(m.tokenizer.type, sizeof m.tokenizer.type, "%s", DG_TOK_BYTE_NAME);
    m.tokenizer.vocab_size = 257;
    m.tokenizer.eod = 255;
    assert_int_equal(reopen(&m, &vocab, &eod, &err), DG_EINPUT);
    assert_msg(&err, "m.json", "had end-of-document id 255, its files reopened give 256");
    m.tokenizer.eod = 256;
    assert_int_equal(reopen(&m, &vocab, &eod, &err), DG_OK);
    assert_int_equal(vocab, 257);
    assert_int_equal(eod, 256);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_megatron_rule),
        cmocka_unit_test(test_older_checkpoint),
        cmocka_unit_test(test_recorded_eod),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
