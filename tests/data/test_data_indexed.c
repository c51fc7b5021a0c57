/* test_data_indexed.c — the .bin/.idx reader and writer: round trips for
 * every integer dtype, the exact header bytes, and a one-line DG_EINPUT
 * naming the file and the problem for each kind of bad input. */
#include "dg_test_data_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dg_indexed.h"

static char g_dir[256];

static uint32_t lcg(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

/* Writes 3 documents (2, 0 and 3 sequences) of random tokens below `limit`;
 * returns the tokens concatenated in *all (caller frees). */
static void write_sample(const char *prefix, int dtype, int32_t lo, int32_t hi, int32_t **all, int64_t *n_all,
                         int32_t lens[5]) {
    static const int32_t L[5] = {7, 0, 13, 1, 300};
    dg_indexed_writer w;
    dg_err err = {{0}};
    assert_int_equal(dg_indexed_writer_open(&w, prefix, dtype, &err), DG_OK);
    uint32_t seed = 42;
    int64_t total = 0;
    for (int i = 0; i < 5; i++) total += L[i];
    *all = malloc(sizeof(int32_t) * (size_t)total);
    *n_all = total;
    int64_t k = 0;
    for (int s = 0; s < 5; s++) {
        lens[s] = L[s];
        for (int i = 0; i < L[s]; i++) (*all)[k + i] = lo + (int32_t)(lcg(&seed) % (uint32_t)(hi - lo + 1));
        assert_int_equal(dg_indexed_writer_add(&w, *all + k, L[s], &err), DG_OK);
        k += L[s];
        if (s == 1) dg_indexed_writer_end_document(&w);              /* doc 0: seq 0, 1 */
        if (s == 1) dg_indexed_writer_end_document(&w);              /* doc 1: empty */
        if (s == 4) dg_indexed_writer_end_document(&w);              /* doc 2: seq 2..4 */
    }
    assert_int_equal(dg_indexed_writer_finish(&w, &err), DG_OK);
}

static void roundtrip(int dtype, int32_t lo, int32_t hi) {
    char prefix[300];
    snprintf(prefix, sizeof prefix, "%s/rt_%d", g_dir, dtype);
    int32_t *all, lens[5];
    int64_t n;
    write_sample(prefix, dtype, lo, hi, &all, &n, lens);
    dg_indexed ds;
    dg_err err = {{0}};
    assert_int_equal(dg_indexed_open(&ds, prefix, &err), DG_OK);
    assert_int_equal(ds.dtype, dtype);
    assert_int_equal(ds.num_sequences, 5);
    assert_int_equal(ds.num_docs, 3);
    assert_int_equal(ds.num_tokens, n);
    int64_t docs[4] = {0, 2, 2, 5};
    for (int d = 0; d < 4; d++) assert_int_equal(dg_indexed_doc_index(&ds, d), docs[d]);
    int64_t k = 0, ptr = 0;
    int32_t buf[400];
    for (int s = 0; s < 5; s++) {
        assert_int_equal(dg_indexed_seq_len(&ds, s), lens[s]);
        assert_int_equal(dg_indexed_seq_ptr(&ds, s), ptr);
        dg_indexed_read(&ds, s, 0, lens[s], buf);
        for (int i = 0; i < lens[s]; i++) assert_int_equal(buf[i], all[k + i]);
        if (lens[s] > 3) { /* a window in the middle */
            dg_indexed_read(&ds, s, 2, 2, buf);
            assert_int_equal(buf[0], all[k + 2]);
            assert_int_equal(buf[1], all[k + 3]);
        }
        k += lens[s];
        ptr += lens[s] * (int64_t)dg_idx_dtype_size(dtype);
    }
    assert_int_equal((int64_t)ds.bin_size, ptr);
    assert_int_equal((int64_t)ds.idx_size, DG_IDX_HEADER_LEN + 12 * 5 + 8 * 4);
    dg_indexed_close(&ds);
    free(all);
}

static void test_roundtrip_uint16(void **s) { (void)s; roundtrip(DG_IDX_U16, 0, 65535); }
static void test_roundtrip_int32(void **s) { (void)s; roundtrip(DG_IDX_I32, -5, 2000000000); }
static void test_roundtrip_uint8(void **s) { (void)s; roundtrip(DG_IDX_U8, 0, 255); }
static void test_roundtrip_int8(void **s) { (void)s; roundtrip(DG_IDX_I8, -128, 127); }
static void test_roundtrip_int16(void **s) { (void)s; roundtrip(DG_IDX_I16, -32768, 32767); }
static void test_roundtrip_int64(void **s) { (void)s; roundtrip(DG_IDX_I64, -7, 2000000000); }

static void test_header_bytes(void **s) {
    (void)s;
    char prefix[300], path[310];
    snprintf(prefix, sizeof prefix, "%s/hdr", g_dir);
    int32_t *all, lens[5];
    int64_t n;
    write_sample(prefix, DG_IDX_U16, 0, 100, &all, &n, lens);
    free(all);
    snprintf(path, sizeof path, "%s.idx", prefix);
    FILE *f = fopen(path, "rb");
    uint8_t h[DG_IDX_HEADER_LEN];
    assert_int_equal(fread(h, 1, sizeof h, f), sizeof h);
    fclose(f);
    static const uint8_t want[DG_IDX_HEADER_LEN] = {
        'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0, /* magic */
        1,   0,   0,   0,   0,   0,   0,   0,    /* version */
        8,                                       /* dtype: uint16 */
        5,   0,   0,   0,   0,   0,   0,   0,    /* sequences */
        4,   0,   0,   0,   0,   0,   0,   0,    /* document index entries */
    };
    assert_memory_equal(h, want, sizeof want);
    assert_int_equal(dg_idx_dtype_for_vocab(257), DG_IDX_U16);
    assert_int_equal(dg_idx_dtype_for_vocab(65499), DG_IDX_U16);
    assert_int_equal(dg_idx_dtype_for_vocab(65500), DG_IDX_I32);
}

/* A valid dataset at <dir>/<name> to break. */
static void fresh(const char *name, char *prefix, char *idx, char *bin) {
    sprintf(prefix, "%s/%s", g_dir, name);
    sprintf(idx, "%s.idx", prefix);
    sprintf(bin, "%s.bin", prefix);
    int32_t *all, lens[5];
    int64_t n;
    write_sample(prefix, DG_IDX_U16, 0, 1000, &all, &n, lens);
    free(all);
}

static void expect_error(const char *prefix, const char *file, const char *what) {
    dg_indexed ds;
    dg_err err = {{0}};
    assert_int_equal(dg_indexed_open(&ds, prefix, &err), DG_EINPUT);
    fprintf(stderr, "  message: %s\n", err.msg);
    assert_non_null(strstr(err.msg, file));
    assert_non_null(strstr(err.msg, what));
    assert_null(strchr(err.msg, '\n'));
    assert_null(ds.idx);
}

static void test_bad_truncated_bin(void **s) {
    (void)s;
    char p[300], i[310], b[310];
    fresh("tbin", p, i, b);
    shrink_file(b, 2);
    expect_error(p, b, "truncated");
}

static void test_bad_truncated_idx(void **s) {
    (void)s;
    char p[300], i[310], b[310];
    fresh("tidx", p, i, b);
    shrink_file(i, 3);
    expect_error(p, i, "truncated");
}

static void test_bad_magic(void **s) {
    (void)s;
    char p[300], i[310], b[310];
    fresh("magic", p, i, b);
    patch_file(i, 0, "XMIDIDX", 7);
    expect_error(p, i, "wrong magic");
}

static void test_bad_version(void **s) {
    (void)s;
    char p[300], i[310], b[310];
    fresh("version", p, i, b);
    uint64_t v = 2;
    patch_file(i, 9, &v, 8);
    expect_error(p, i, "version 2");
}

static void test_bad_dtype(void **s) {
    (void)s;
    char p[300], i[310], b[310];
    fresh("dtype", p, i, b);
    uint8_t code = 9;
    patch_file(i, 17, &code, 1);
    expect_error(p, i, "unknown dtype code 9");
}

static void test_bad_pointer(void **s) {
    (void)s;
    char p[300], i[310], b[310];
    fresh("pointer", p, i, b);
    int64_t ptr = 1 << 20;
    patch_file(i, DG_IDX_HEADER_LEN + 4 * 5 + 8 * 3, &ptr, 8); /* sequence 3 */
    expect_error(p, i, "past the end");
}

static void test_bad_doc_order(void **s) {
    (void)s;
    char p[300], i[310], b[310];
    fresh("docs", p, i, b);
    int64_t d = 4; /* [0, 4, 2, 5] */
    patch_file(i, DG_IDX_HEADER_LEN + 12 * 5 + 8 * 1, &d, 8);
    expect_error(p, i, "document indices out of order");
    fresh("docs0", p, i, b);
    d = 1; /* first entry not 0 */
    patch_file(i, DG_IDX_HEADER_LEN + 12 * 5, &d, 8);
    expect_error(p, i, "document indices out of order");
    fresh("docslast", p, i, b);
    d = 4; /* last entry != sequence count */
    patch_file(i, DG_IDX_HEADER_LEN + 12 * 5 + 8 * 3, &d, 8);
    expect_error(p, i, "document indices out of order");
}

static void test_missing_files(void **s) {
    (void)s;
    char p[300];
    snprintf(p, sizeof p, "%s/nothing", g_dir);
    expect_error(p, "nothing.idx", "cannot open");
}

static void test_token_does_not_fit(void **s) {
    (void)s;
    char p[300];
    snprintf(p, sizeof p, "%s/fit", g_dir);
    dg_indexed_writer w;
    dg_err err = {{0}};
    assert_int_equal(dg_indexed_writer_open(&w, p, DG_IDX_U16, &err), DG_OK);
    int32_t t[2] = {5, 70000};
    assert_int_equal(dg_indexed_writer_add(&w, t, 2, &err), DG_EINPUT);
    assert_non_null(strstr(err.msg, "70000"));
    dg_indexed_writer_abort(&w);
}

static void test_empty_dataset(void **s) {
    (void)s;
    char p[300];
    snprintf(p, sizeof p, "%s/empty", g_dir);
    dg_indexed_writer w;
    dg_err err = {{0}};
    assert_int_equal(dg_indexed_writer_open(&w, p, DG_IDX_I32, &err), DG_OK);
    assert_int_equal(dg_indexed_writer_finish(&w, &err), DG_OK);
    dg_indexed ds;
    assert_int_equal(dg_indexed_open(&ds, p, &err), DG_OK);
    assert_int_equal(ds.num_sequences, 0);
    assert_int_equal(ds.num_docs, 0);
    dg_indexed_close(&ds);
}

int main(void) {
    tdir_make(g_dir, sizeof g_dir, "indexed");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_uint16), cmocka_unit_test(test_roundtrip_int32),
        cmocka_unit_test(test_roundtrip_uint8),  cmocka_unit_test(test_roundtrip_int8),
        cmocka_unit_test(test_roundtrip_int16),  cmocka_unit_test(test_roundtrip_int64),
        cmocka_unit_test(test_header_bytes),     cmocka_unit_test(test_bad_truncated_bin),
        cmocka_unit_test(test_bad_truncated_idx), cmocka_unit_test(test_bad_magic),
        cmocka_unit_test(test_bad_version),      cmocka_unit_test(test_bad_dtype),
        cmocka_unit_test(test_bad_pointer),      cmocka_unit_test(test_bad_doc_order),
        cmocka_unit_test(test_missing_files),    cmocka_unit_test(test_token_does_not_fit),
        cmocka_unit_test(test_empty_dataset),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tdir_remove(g_dir);
    return rc;
}
