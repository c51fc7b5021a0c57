/* test_data_gpt.c — GPT dataset indices with Megatron's semantics.
 *
 * The test data encodes each token's origin: token = 1000 * sequence + position
 * (+ 5,000,000 for the second dataset of a blend), so every sample can be
 * traced back to its positions in the stream of sequences that the document
 * index lays out. Asserted:
 *  - each sample is seq_length + 1 consecutive tokens of that stream, sample j
 *    starting at stream position j * seq_length (so consecutive samples share
 *    one token, and every stream position in [1, num_samples * seq_length] is
 *    the *target* of exactly one sample; within one epoch only the stream's
 *    first token and a tail shorter than seq_length are never targets);
 *  - the document index holds every sequence of the split exactly once per
 *    epoch, and nothing outside the split; the shuffle index is a permutation;
 *  - a separate final epoch when few samples come from it (and not otherwise),
 *    shuffled apart from the full epochs;
 *  - seeded builds are deterministic, the cache returns identical indices;
 *  - starting at sample k (or at any consumed-samples count) gives the same
 *    stream as reading from 0; data-parallel ranks read disjoint slices that
 *    together make the global batch;
 *  - a split shorter than one sample repeats over epochs; an empty one is refused;
 *  - --split rounding, --data-path parsing and the blend's weighted index.
 */
#include "dg_test_data_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dg_blend.h"
#include "dg_data_rng.h"
#include "dg_gpt_dataset.h"

static char g_dir[256];

static void make_dataset(const char *prefix, int nseq, uint32_t seed, int32_t base) {
    dg_indexed_writer w;
    dg_err err = {{0}};
    assert_int_equal(dg_indexed_writer_open(&w, prefix, DG_IDX_I32, &err), DG_OK);
    int32_t buf[1000];
    for (int s = 0; s < nseq; s++) {
        seed = seed * 1664525u + 1013904223u;
        int len = s == 3 ? 0 : 1 + (int)((seed >> 8) % 180); /* one empty sequence */
        for (int i = 0; i < len; i++) buf[i] = base + 1000 * s + i;
        assert_int_equal(dg_indexed_writer_add(&w, buf, len, &err), DG_OK);
        dg_indexed_writer_end_document(&w);
    }
    assert_int_equal(dg_indexed_writer_finish(&w, &err), DG_OK);
}

static dg_gpt_config cfg_of(int64_t L, uint32_t seed, const char *cache) {
    dg_gpt_config c = {0};
    c.seq_length = L;
    c.seed = seed;
    c.drop_last_partial = 1;
    c.pad_token = -1;
    c.cache_dir = cache;
    return c;
}

/* The stream of tokens laid out by the document index. */
static int32_t *stream_of(const dg_gpt_dataset *ds, int64_t *n) {
    int64_t total = ds->num_epochs * ds->tokens_per_epoch, k = 0;
    int32_t *s = malloc(sizeof(int32_t) * (size_t)total);
    for (int64_t p = 0; p < ds->doc_index_len; p++) {
        int64_t len = dg_indexed_seq_len(ds->data, ds->doc_index[p]);
        dg_indexed_read(ds->data, ds->doc_index[p], 0, len, s + k);
        k += len;
    }
    assert_int_equal(k, total);
    *n = total;
    return s;
}

/* Everything the header comment promises about one built dataset. */
static void check_dataset(const dg_gpt_dataset *ds, int64_t b, int64_t e, int64_t requested) {
    int64_t L = ds->seq_length, nseq = e - b;
    assert_true(ds->num_samples >= (requested < 0 ? 1 : requested));
    assert_int_equal(ds->doc_index_len, ds->num_epochs * nseq);
    /* Each epoch's block of the document index (with a separate final
     * epoch, the blocks are the first E-1 epochs together, then the last). */
    int *seen = calloc((size_t)nseq, sizeof(int));
    for (int64_t p = 0; p < ds->doc_index_len; p++) {
        int32_t q = ds->doc_index[p];
        assert_true(q >= b && q < e);
        seen[q - b]++;
        if (ds->separate_final_epoch && p == (ds->num_epochs - 1) * nseq - 1)
            for (int64_t i = 0; i < nseq; i++) assert_int_equal(seen[i], ds->num_epochs - 1);
    }
    for (int64_t i = 0; i < nseq; i++) assert_int_equal(seen[i], ds->num_epochs);
    free(seen);
    /* Samples are consecutive windows of the stream. */
    int64_t n;
    int32_t *stream = stream_of(ds, &n);
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)(L + 1));
    int64_t *target = calloc((size_t)n, sizeof(int64_t));
    for (int64_t j = 0; j < ds->num_samples; j++) {
        dg_gpt_dataset_sample_unshuffled(ds, j, tok);
        for (int64_t i = 0; i <= L; i++) assert_int_equal(tok[i], stream[j * L + i]);
        for (int64_t i = 1; i <= L; i++) target[j * L + i]++;
    }
    for (int64_t p = 0; p < n; p++) assert_int_equal(target[p], (p >= 1 && p <= ds->num_samples * L) ? 1 : 0);
    /* Within one epoch of the stream, all but the first token and a tail
     * shorter than seq_length are targets. */
    assert_true(ds->num_epochs * ds->tokens_per_epoch - 1 - ds->num_samples * L < L);
    /* The shuffle index is a permutation (two blocks with a separate final epoch). */
    char *hit = calloc((size_t)ds->num_samples, 1);
    int64_t sans = ds->separate_final_epoch ? ((ds->num_epochs - 1) * ds->tokens_per_epoch - 1) / L : ds->num_samples;
    for (int64_t i = 0; i < ds->num_samples; i++) {
        int64_t v = ds->shuffle_index[i];
        assert_true(v >= 0 && v < ds->num_samples);
        assert_int_equal(hit[v], 0);
        hit[v] = 1;
        assert_true(i < sans ? v < sans : v >= sans);
    }
    free(hit);
    free(target);
    free(tok);
    free(stream);
}

static void test_one_epoch(void **s) {
    (void)s;
    char p[300];
    snprintf(p, sizeof p, "%s/a", g_dir);
    make_dataset(p, 200, 1, 0);
    dg_indexed d;
    dg_err err = {{0}};
    assert_int_equal(dg_indexed_open(&d, p, &err), DG_OK);
    dg_gpt_config c = cfg_of(64, 1234, "");
    dg_gpt_dataset ds;
    assert_int_equal(dg_gpt_dataset_build(&ds, &d, 20, 180, -1, &c, "train", &err), DG_OK);
    assert_int_equal(ds.num_epochs, 1);
    assert_int_equal(ds.separate_final_epoch, 0);
    assert_int_equal(ds.num_samples, (ds.tokens_per_epoch - 1) / 64);
    check_dataset(&ds, 20, 180, -1);
    dg_gpt_dataset_free(&ds);
    dg_indexed_close(&d);
}

static void test_epochs_and_final_epoch(void **s) {
    (void)s;
    char p[300];
    snprintf(p, sizeof p, "%s/b", g_dir);
    make_dataset(p, 100, 2, 0);
    dg_indexed d;
    dg_err err = {{0}};
    assert_int_equal(dg_indexed_open(&d, p, &err), DG_OK);
    dg_gpt_config c = cfg_of(32, 7, "");
    dg_gpt_dataset ds;
    assert_int_equal(dg_gpt_dataset_build(&ds, &d, 0, 100, -1, &c, "train", &err), DG_OK);
    int64_t T = ds.tokens_per_epoch, per_epoch = (T - 1) / 32;
    dg_gpt_dataset_free(&ds);
    /* 2 epochs and a little: the final epoch is separate. */
    int64_t sans = (2 * T - 1) / 32;
    assert_int_equal(dg_gpt_dataset_build(&ds, &d, 0, 100, sans + 3, &c, "train", &err), DG_OK);
    assert_int_equal(ds.num_epochs, 3);
    assert_int_equal(ds.separate_final_epoch, 1);
    check_dataset(&ds, 0, 100, sans + 3);
    dg_gpt_dataset_free(&ds);
    /* 2 epochs and 90% of a third: not separate. */
    assert_int_equal(dg_gpt_dataset_build(&ds, &d, 0, 100, sans + per_epoch * 9 / 10, &c, "train", &err), DG_OK);
    assert_int_equal(ds.num_epochs, 3);
    assert_int_equal(ds.separate_final_epoch, 0);
    check_dataset(&ds, 0, 100, sans + per_epoch * 9 / 10);
    dg_gpt_dataset_free(&ds);
    dg_indexed_close(&d);
}

static int same_indices(const dg_gpt_dataset *a, const dg_gpt_dataset *b) {
    return a->num_samples == b->num_samples && a->doc_index_len == b->doc_index_len &&
           !memcmp(a->doc_index, b->doc_index, sizeof(int32_t) * (size_t)a->doc_index_len) &&
           !memcmp(a->sample_index, b->sample_index, sizeof(int64_t) * (size_t)(2 * (a->num_samples + 1))) &&
           !memcmp(a->shuffle_index, b->shuffle_index, sizeof(int64_t) * (size_t)a->num_samples);
}

static void test_deterministic_and_cached(void **s) {
    (void)s;
    char p[300], cache[300];
    snprintf(p, sizeof p, "%s/c", g_dir);
    snprintf(cache, sizeof cache, "%s/cache", g_dir);
    make_dataset(p, 150, 3, 0);
    dg_indexed d;
    dg_err err = {{0}};
    assert_int_equal(dg_indexed_open(&d, p, &err), DG_OK);
    dg_gpt_config c = cfg_of(50, 99, "");
    dg_gpt_dataset a, b, x, y;
    assert_int_equal(dg_gpt_dataset_build(&a, &d, 0, 150, 1000, &c, "train", &err), DG_OK);
    assert_int_equal(dg_gpt_dataset_build(&b, &d, 0, 150, 1000, &c, "train", &err), DG_OK);
    assert_true(same_indices(&a, &b));
    c.seed = 100;
    assert_int_equal(dg_gpt_dataset_build(&x, &d, 0, 150, 1000, &c, "train", &err), DG_OK);
    assert_false(same_indices(&a, &x));
    dg_gpt_dataset_free(&x);
    c.seed = 99;
    c.cache_dir = cache;
    assert_int_equal(dg_gpt_dataset_build(&x, &d, 0, 150, 1000, &c, "train", &err), DG_OK);
    assert_int_equal(x.cache_hit, 0);
    assert_int_equal(dg_gpt_dataset_build(&y, &d, 0, 150, 1000, &c, "train", &err), DG_OK);
    assert_int_equal(y.cache_hit, 1);
    assert_true(same_indices(&a, &x));
    assert_true(same_indices(&a, &y));
    check_dataset(&y, 0, 150, 1000);
    dg_gpt_dataset_free(&a);
    dg_gpt_dataset_free(&b);
    dg_gpt_dataset_free(&x);
    dg_gpt_dataset_free(&y);
    dg_indexed_close(&d);
}

/* A split with fewer tokens than one sample repeats its sequences over as
 * many epochs as the samples need (Megatron's indices do); a split with no
 * sequences, or no tokens, is refused. */
static void test_short_split(void **s) {
    (void)s;
    char p[300];
    snprintf(p, sizeof p, "%s/d", g_dir);
    make_dataset(p, 5, 4, 0); /* at most 4 x 180 tokens; sequence 3 is empty */
    dg_indexed d;
    dg_err err = {{0}};
    assert_int_equal(dg_indexed_open(&d, p, &err), DG_OK);
    dg_gpt_config c = cfg_of(1000, 1, "");
    dg_gpt_dataset ds;
    assert_int_equal(dg_gpt_dataset_build(&ds, &d, 0, 5, 10, &c, "train", &err), DG_OK);
    assert_true(ds.tokens_per_epoch < 1001);
    assert_int_equal(ds.num_epochs, (10 * 1000 + 1 + ds.tokens_per_epoch - 1) / ds.tokens_per_epoch);
    assert_int_equal(ds.separate_final_epoch, 0);
    check_dataset(&ds, 0, 5, 10);
    dg_gpt_dataset_free(&ds);
    assert_int_equal(dg_gpt_dataset_build(&ds, &d, 2, 2, 10, &c, "valid", &err), DG_EINPUT);
    assert_non_null(strstr(err.msg, "valid split"));
    assert_non_null(strstr(err.msg, "holds no documents"));
    assert_int_equal(dg_gpt_dataset_build(&ds, &d, 3, 4, 10, &c, "test", &err), DG_EINPUT);
    assert_non_null(strstr(err.msg, "hold 0 tokens"));
    dg_indexed_close(&d);
}

static void test_split(void **s) {
    (void)s;
    double w[3];
    int64_t b[3], e[3];
    int present[3];
    dg_err err = {{0}};
    assert_int_equal(dg_split_parse("969,30,1", w, &err), DG_OK);
    dg_split_bounds(w, 1000, b, e, present);
    assert_int_equal(b[0], 0);
    assert_int_equal(e[0], 969);
    assert_int_equal(b[1], 969);
    assert_int_equal(e[1], 999);
    assert_int_equal(b[2], 999);
    assert_int_equal(e[2], 1000);
    assert_int_equal(dg_split_parse("1,1", w, &err), DG_OK); /* 0.5, 0.5, 0 */
    dg_split_bounds(w, 5, b, e, present);
    assert_int_equal(e[0], 2); /* round(2.5) == 2, half to even as Python */
    assert_int_equal(present[2], 0);
    assert_int_equal(dg_split_parse("a,b", w, &err), DG_EINPUT);
    assert_int_equal(dg_split_parse("0,0,0", w, &err), DG_EINPUT);
}

static void test_blend_spec_and_index(void **s) {
    (void)s;
    dg_blend_spec sp;
    dg_err err = {{0}};
    char *w1[] = {"0.7", "a", "0.3", "b"};
    assert_int_equal(dg_blend_spec_parse("--data-path", 4, w1, &sp, &err), DG_OK);
    assert_int_equal(sp.n, 2);
    assert_non_null(sp.weights);
    assert_true(sp.weights[0] > 0.699 && sp.weights[0] < 0.701);
    assert_string_equal(sp.prefixes[1], "b");
    dg_blend_spec_free(&sp);
    char *w2[] = {"a", "b"};
    assert_int_equal(dg_blend_spec_parse("--data-path", 2, w2, &sp, &err), DG_OK);
    assert_int_equal(sp.n, 2);
    assert_null(sp.weights);
    dg_blend_spec_free(&sp);
    char *w3[] = {"0.5", "a", "b", "c"};
    assert_int_equal(dg_blend_spec_parse("--data-path", 4, w3, &sp, &err), DG_EINPUT);

    double w[3] = {0.5, 0.3, 0.2};
    int16_t di[1000];
    int64_t dsi[1000], cnt[3] = {0, 0, 0};
    dg_blending_indices(w, 3, 1000, di, dsi);
    for (int i = 0; i < 1000; i++) {
        assert_int_equal(dsi[i], cnt[di[i]]);
        cnt[di[i]]++;
        for (int k = 0; k < 3; k++) assert_true(cnt[k] - w[k] * (i + 1) < 1.0001 && w[k] * (i + 1) - cnt[k] < 1.0001);
    }
    assert_int_equal(cnt[0], 500);
    assert_int_equal(cnt[1], 300);
    assert_int_equal(cnt[2], 200);
}

/* A blended feed: samples come from the right dataset in the right
 * proportion; resuming and data-parallel slicing read the same stream. */
static void test_blended_feed_and_ranks(void **s) {
    (void)s;
    char a[300], b[300];
    snprintf(a, sizeof a, "%s/ba", g_dir);
    snprintf(b, sizeof b, "%s/bb", g_dir);
    make_dataset(a, 300, 5, 0);
    make_dataset(b, 300, 6, 5000000);
    char *words[] = {"0.7", a, "0.3", b};
    dg_data_config cfg = {0};
    cfg.n_words = 4;
    cfg.words = words;
    cfg.split = "969,30,1";
    cfg.num_samples[0] = 2000;
    cfg.num_samples[1] = 40;
    cfg.num_samples[2] = 0;
    cfg.gpt = cfg_of(24, 1234, "");
    dg_data d;
    dg_err err = {{0}};
    assert_int_equal(dg_data_open(&d, &cfg, &err), DG_OK);
    assert_int_equal(d.split[0].size, 1400 + 600);
    assert_true(d.split[1].present);
    assert_false(d.split[2].present);
    int64_t L = 24, from_b = 0;
    int32_t *t = malloc(sizeof(int32_t) * (size_t)(L + 1));
    for (int64_t i = 0; i < d.split[0].size; i++) {
        dg_data_sample(&d, 0, i, t);
        int fb = t[0] >= 5000000;
        from_b += fb;
        for (int64_t k = 0; k <= L; k++) assert_int_equal(t[k] >= 5000000, fb);
    }
    assert_int_equal(from_b, 600);
    /* Data-parallel slices: 4 ranks x micro-batch 3; resume at step 5. */
    int dp = 4, mbs = 3;
    int32_t *all = malloc(sizeof(int32_t) * (size_t)(dp * mbs) * (size_t)(L + 1));
    int32_t *mine = malloc(sizeof(int32_t) * (size_t)mbs * (size_t)(L + 1));
    for (int step = 0; step < 8; step++) {
        int64_t consumed = (int64_t)step * dp * mbs;
        for (int r = 0; r < dp; r++) {
            assert_int_equal(dg_data_microbatch(&d, 0, consumed, r, dp, mbs, mine, &err), DG_OK);
            memcpy(all + (size_t)r * mbs * (L + 1), mine, sizeof(int32_t) * (size_t)mbs * (size_t)(L + 1));
        }
        for (int m = 0; m < dp * mbs; m++) {
            dg_data_sample(&d, 0, consumed + m, t);
            assert_memory_equal(all + (size_t)m * (L + 1), t, sizeof(int32_t) * (size_t)(L + 1));
        }
    }
    /* Running off the end is an error, not a wrap. */
    assert_int_equal(dg_data_microbatch(&d, 0, d.split[0].size - 2, 0, dp, mbs, mine, &err), DG_EINPUT);
    free(all);
    free(mine);
    free(t);
    dg_data_close(&d);
}

/* Starting at sample k yields the same stream as reading through from 0. */
static void test_resume(void **s) {
    (void)s;
    char p[300];
    snprintf(p, sizeof p, "%s/r", g_dir);
    make_dataset(p, 120, 8, 0);
    char *words[] = {p};
    dg_data_config cfg = {0};
    cfg.n_words = 1;
    cfg.words = words;
    cfg.split = "1";
    cfg.num_samples[0] = 500;
    cfg.gpt = cfg_of(40, 5, "");
    dg_data d1, d2;
    dg_err err = {{0}};
    assert_int_equal(dg_data_open(&d1, &cfg, &err), DG_OK);
    int64_t L = 40, n = 500;
    int32_t *ref = malloc(sizeof(int32_t) * (size_t)(n * (L + 1)));
    for (int64_t i = 0; i < n; i++) dg_data_sample(&d1, 0, i, ref + i * (L + 1));
    dg_data_close(&d1);
    /* A fresh open (as after a restart), reading from k = 137 on. */
    assert_int_equal(dg_data_open(&d2, &cfg, &err), DG_OK);
    int32_t *t = malloc(sizeof(int32_t) * (size_t)(L + 1));
    for (int64_t i = 137; i < n; i++) {
        dg_data_sample(&d2, 0, i, t);
        assert_memory_equal(t, ref + i * (L + 1), sizeof(int32_t) * (size_t)(L + 1));
    }
    free(t);
    free(ref);
    dg_data_close(&d2);
}

static void test_mt19937(void **s) {
    (void)s;
    dg_mt19937 r;
    dg_mt_seed(&r, 5489);
    assert_int_equal(dg_mt_next32(&r), 3499211612u); /* the reference MT19937 output */
    dg_mt_seed(&r, 1234);
    int32_t x[20];
    for (int i = 0; i < 20; i++) x[i] = i;
    dg_mt_shuffle_i32(&r, x, 20);
    /* numpy.random.RandomState(1234).shuffle(numpy.arange(20)) */
    const int32_t want[20] = {3, 13, 2, 16, 14, 5, 4, 0, 8, 18, 17, 11, 10, 9, 7, 1, 19, 12, 6, 15};
    assert_memory_equal(x, want, sizeof want);
}

int main(void) {
    tdir_make(g_dir, sizeof g_dir, "gpt");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mt19937),
        cmocka_unit_test(test_one_epoch),
        cmocka_unit_test(test_epochs_and_final_epoch),
        cmocka_unit_test(test_deterministic_and_cached),
        cmocka_unit_test(test_short_split),
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_blend_spec_and_index),
        cmocka_unit_test(test_blended_feed_and_ranks),
        cmocka_unit_test(test_resume),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tdir_remove(g_dir);
    return rc;
}
