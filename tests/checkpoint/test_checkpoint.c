/* test_checkpoint.c — single-rank checkpoints: the on-disk layout, a
 * bitwise round trip of tensors and meta, keep-last-K, replacing an
 * iteration, and a one-line DG_EINPUT naming the file for each kind of bad
 * input. (Crash safety under SIGKILL: test_checkpoint_crash.c.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <math.h>
#include <sys/wait.h>

#include "ckpt_test_util.h"
#include "dg_ckpt_fs.h"

/* Save iteration `it` of a set made from `seed` into dir. */
static void save_it(const char *dir, int64_t it, uint64_t seed, int keep, ckpt_set *out) {
    ckpt_set s;
    ckpt_set_make(&s, seed, 1);
    dg_ckpt_meta m;
    ckpt_meta_make(&m, it);
    dg_err err = {{0}};
    int st = dg_ckpt_save(dir, &m, s.t, s.n, &(dg_ckpt_save_opts){.keep_last = keep}, &err);
    if (st) print_error("save: %s\n", err.msg);
    assert_int_equal(st, DG_OK);
    if (out) *out = s;
    else ckpt_set_free(&s);
}

/* ---- pieces ----------------------------------------------------------------------- */

static void test_crc32(void **state) {
    (void)state;
    /* The standard check value, and zlib's chaining. */
    assert_int_equal(dg_crc32(0, "123456789", 9), 0xCBF43926u);
    assert_int_equal(dg_crc32(0, NULL, 0), 0u);
    assert_int_equal(dg_crc32(0xCBF43926u, NULL, 0), 0xCBF43926u); /* an empty piece leaves a chain alone */
    assert_int_equal(dg_crc32(dg_crc32(0, "12345", 5), "6789", 4), 0xCBF43926u);
    /* Slicing-by-8 equals the bytewise definition at every length and offset. */
    uint8_t buf[300];
    uint64_t s = 7;
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)dg_splitmix64(&s);
    for (size_t off = 0; off < 9; off++)
        for (size_t n = 0; n + off <= sizeof buf; n += 13) {
            uint32_t r = 0xFFFFFFFFu;
            for (size_t i = 0; i < n; i++) {
                r ^= buf[off + i];
                for (int k = 0; k < 8; k++) r = (r >> 1) ^ (0xEDB88320u & (0u - (r & 1u)));
            }
            assert_int_equal(dg_crc32(0, buf + off, n), ~r);
        }
}

static void test_names(void **state) {
    (void)state;
    int64_t it = -1;
    long pid = 0;
    assert_true(dg_ckpt_parse_iter_name("iter_0000010", &it) && it == 10);
    assert_true(dg_ckpt_parse_iter_name("iter_12345678", &it) && it == 12345678);
    assert_false(dg_ckpt_parse_iter_name("iter_0000010.tmp-55", &it));
    assert_false(dg_ckpt_parse_iter_name("iter_10", &it));
    assert_false(dg_ckpt_parse_iter_name("iter_00000x0", &it));
    assert_false(dg_ckpt_parse_iter_name("latest_checkpointed_iteration.txt", &it));
    assert_true(dg_ckpt_parse_tmp_name("iter_0000010.tmp-55", &pid) && pid == 55);
    assert_true(dg_ckpt_parse_tmp_name("iter_0000010.tmp-55-del", &pid) && pid == 55);
    assert_true(dg_ckpt_parse_tmp_name("latest_checkpointed_iteration.txt.tmp-9", &pid) && pid == 9);
    assert_false(dg_ckpt_parse_tmp_name("iter_0000010", &pid));
    char p[64];
    dg_err err = {{0}};
    assert_int_equal(dg_ckpt_iter_dir(p, sizeof p, "/c", 10, &err), DG_OK);
    assert_string_equal(p, "/c/iter_0000010");
}

/* ---- round trip and layout ------------------------------------------------------------ */

static void test_roundtrip(void **state) {
    (void)state;
    char dir[256];
    ckpt_tmpdir(dir, sizeof dir);
    char sub[300];
    snprintf(sub, sizeof sub, "%s/a/b", dir); /* save creates missing parents */
    ckpt_set s;
    save_it(sub, 10, 42, 0, &s);

    /* Megatron's layout, and nothing temporary left behind. */
    assert_true(ckpt_exists("%s/iter_0000010/metadata.json", sub));
    assert_true(ckpt_exists("%s/iter_0000010/model_optim_rng.bin", sub));
    assert_int_equal(ckpt_count(sub, ".tmp-"), 0);
    char *text;
    size_t n;
    char tracker[400];
    snprintf(tracker, sizeof tracker, "%s/latest_checkpointed_iteration.txt", sub);
    dg_err err = {{0}};
    assert_int_equal(dg_ckpt_read_file(tracker, &text, &n, &err), DG_OK);
    assert_string_equal(text, "10");
    dg_free(text);
    assert_true(dg_ckpt_has_tracker(sub));
    int64_t it = -1;
    assert_int_equal(dg_ckpt_latest(sub, &it, &err), DG_OK);
    assert_int_equal(it, 10);

    /* Bitwise tensors and every meta field. */
    ckpt_set r;
    ckpt_set_like(&r, &s);
    dg_ckpt_meta want, got;
    ckpt_meta_make(&want, 10);
    memset(&got, 0xAB, sizeof got);
    int st = dg_ckpt_load(sub, DG_CKPT_LATEST, NULL, &got, r.t, r.n, &err);
    if (st) print_error("%s\n", err.msg);
    assert_int_equal(st, DG_OK);
    assert_true(ckpt_set_equal(&s, &r));
    assert_int_equal(got.iteration, 10);
    assert_int_equal(got.consumed_samples, want.consumed_samples);
    assert_int_equal(got.consumed_valid_samples, want.consumed_valid_samples);
    assert_int_equal(got.optimizer_steps, want.optimizer_steps);
    assert_int_equal(got.skipped_iters, want.skipped_iters);
    assert_int_equal(got.nan_iters, want.nan_iters);
    assert_memory_equal(got.rng, want.rng, sizeof want.rng);
    assert_int_equal(got.config.n, want.config.n); /* the config record: keys in order, values bitwise */
    for (int i = 0; i < want.config.n; i++) {
        assert_string_equal(got.config.key[i], want.config.key[i]);
        if (memcmp(&got.config.value[i], &want.config.value[i], sizeof(double)))
            print_error("config '%s': %.17g, saved %.17g\n", want.config.key[i], got.config.value[i],
                        want.config.value[i]);
        assert_memory_equal(&got.config.value[i], &want.config.value[i], sizeof(double));
    }
    assert_string_equal(got.tokenizer.type, want.tokenizer.type);
    assert_string_equal(got.tokenizer.vocab_file, want.tokenizer.vocab_file);
    assert_string_equal(got.tokenizer.merge_file, want.tokenizer.merge_file);
    assert_int_equal(got.tokenizer.vocab_size, want.tokenizer.vocab_size);
    assert_string_equal(got.tokenizer.model_file, want.tokenizer.model_file);
    assert_string_equal(got.data.path, want.data.path);
    assert_string_equal(got.data.split, want.data.split);
    assert_int_equal(got.data.mock, want.data.mock);
    assert_int_equal(got.data.seed, want.data.seed);

    /* The manifest describes each tensor whole, 64-byte aligned, with the
     * CRC of its bytes; a subset of tensors loads alone (generate). */
    dg_ckpt_manifest man;
    assert_int_equal(dg_ckpt_read_manifest(sub, 10, &man, &err), DG_OK);
    assert_int_equal(man.n_tensors, s.n);
    for (int i = 0; i < s.n; i++) {
        const dg_ckpt_entry *e = dg_ckpt_find(&man, s.t[i].name);
        assert_non_null(e);
        assert_int_equal(e->offset % 64, 0);
        assert_int_equal(e->nbytes, dg_ckpt_tensor_bytes(&s.t[i]));
        assert_int_equal(e->crc32, dg_crc32(0, s.t[i].data, (size_t)e->nbytes));
        assert_string_equal(e->file, "model_optim_rng.bin");
        for (int d = 0; d < e->ndim; d++) {
            assert_int_equal(e->global_shape[d], s.t[i].shape[d]);
            assert_int_equal(e->shape[d], s.t[i].shape[d]);
            assert_int_equal(e->slice_start[d], 0);
        }
    }
    assert_null(dg_ckpt_find(&man, "nope"));
    dg_ckpt_manifest_free(&man);
    ckpt_set_free(&r);
    ckpt_set_like(&r, &s);
    assert_int_equal(dg_ckpt_load(sub, 10, NULL, NULL, r.t, 4, &err), DG_OK);
    assert_memory_equal(r.t[2].data, s.t[2].data, dg_ckpt_tensor_bytes(&s.t[2]));

    ckpt_set_free(&r);
    ckpt_set_free(&s);
    ckpt_rmrf(dir);
}

/* dg_ckpt_tensor_from names optimizer state after the parameter. */
static void test_tensor_from(void **state) {
    (void)state;
    dg_tensor g;
    memset(&g, 0, sizeof g);
    snprintf(g.name, sizeof g.name, "decoder.layers.0.mlp.router.weight");
    g.dtype = DG_F32;
    g.ndim = 2;
    g.shape[0] = 4;
    g.shape[1] = 64;
    float buf[4];
    dg_ckpt_tensor t;
    dg_err err = {{0}};
    assert_int_equal(dg_ckpt_tensor_from(&t, "optimizer.exp_avg_sq.", &g, buf, &err), DG_OK);
    assert_string_equal(t.name, "optimizer.exp_avg_sq.decoder.layers.0.mlp.router.weight");
    assert_int_equal(t.ndim, 2);
    assert_int_equal(t.shape[1], 64);
    assert_ptr_equal(t.data, buf);
    assert_int_equal(dg_ckpt_tensor_bytes(&t), 4 * 64 * 4);
}

/* ---- keep-last-K, replacing, stale temporaries ------------------------------------------ */

static void test_keep_last(void **state) {
    (void)state;
    char dir[256];
    ckpt_tmpdir(dir, sizeof dir);
    /* Things a reader and the pruner must leave alone. */
    char p[400];
    snprintf(p, sizeof p, "%s/iter_abc", dir);
    mkdir(p, 0777);
    snprintf(p, sizeof p, "%s/notes.txt", dir);
    ckpt_write_text(p, "hello");
    for (int it = 1; it <= 5; it++) save_it(dir, it * 10, (uint64_t)it, 2, NULL);
    for (int it = 1; it <= 3; it++) assert_false(ckpt_exists("%s/iter_%07d", dir, it * 10));
    assert_true(ckpt_exists("%s/iter_0000040", dir));
    assert_true(ckpt_exists("%s/iter_0000050", dir));
    assert_true(ckpt_exists("%s/iter_abc", dir));
    assert_true(ckpt_exists("%s/notes.txt", dir));
    assert_int_equal(ckpt_count(dir, ".tmp-"), 0);
    dg_err err = {{0}};
    int64_t it;
    assert_int_equal(dg_ckpt_latest(dir, &it, &err), DG_OK);
    assert_int_equal(it, 50);

    /* keep_last <= 0 keeps everything. */
    save_it(dir, 60, 6, 0, NULL);
    save_it(dir, 70, 7, -1, NULL);
    assert_int_equal(ckpt_count(dir, "iter_00000"), 4);

    /* Saving an older iteration: the tracker follows it (as Megatron's), the
     * newest are kept by number, and the one just written survives. */
    save_it(dir, 5, 8, 1, NULL);
    assert_int_equal(dg_ckpt_latest(dir, &it, &err), DG_OK);
    assert_int_equal(it, 5);
    assert_true(ckpt_exists("%s/iter_0000005", dir));
    assert_true(ckpt_exists("%s/iter_0000070", dir));
    assert_false(ckpt_exists("%s/iter_0000060", dir));
    ckpt_rmrf(dir);
}

static void test_replace_same_iteration(void **state) {
    (void)state;
    char dir[256];
    ckpt_tmpdir(dir, sizeof dir);
    ckpt_set a, b, r;
    save_it(dir, 10, 1, 0, &a);
    save_it(dir, 10, 2, 0, &b);
    assert_false(ckpt_set_equal(&a, &b));
    ckpt_set_like(&r, &b);
    dg_err err = {{0}};
    assert_int_equal(dg_ckpt_load(dir, 10, NULL, NULL, r.t, r.n, &err), DG_OK);
    assert_true(ckpt_set_equal(&b, &r));
    assert_int_equal(ckpt_count(dir, ".tmp-"), 0);
    ckpt_set_free(&a);
    ckpt_set_free(&b);
    ckpt_set_free(&r);
    ckpt_rmrf(dir);
}

/* Leftovers of dead processes are removed by the next save; a live
 * process's are not (it may be saving). */
static void test_stale_tmp_cleanup(void **state) {
    (void)state;
    char dir[256], p[400];
    ckpt_tmpdir(dir, sizeof dir);
    pid_t child = fork();
    if (child == 0) _exit(0);
    waitpid(child, NULL, 0); /* a pid that is certainly gone */
    snprintf(p, sizeof p, "%s/iter_0000020.tmp-%ld", dir, (long)child);
    mkdir(p, 0777);
    snprintf(p, sizeof p, "%s/iter_0000020.tmp-%ld/model_optim_rng.bin", dir, (long)child);
    ckpt_write_text(p, "partial");
    snprintf(p, sizeof p, "%s/latest_checkpointed_iteration.txt.tmp-%ld", dir, (long)child);
    ckpt_write_text(p, "2");
    snprintf(p, sizeof p, "%s/iter_0000030.tmp-1", dir); /* pid 1 is alive */
    mkdir(p, 0777);
    /* Readers ignore them. */
    dg_err err = {{0}};
    int64_t it;
    assert_int_equal(dg_ckpt_latest(dir, &it, &err), DG_EINPUT);
    save_it(dir, 10, 1, 1, NULL);
    assert_int_equal(ckpt_count(dir, ".tmp-"), 1);
    assert_true(ckpt_exists("%s/iter_0000030.tmp-1", dir));
    ckpt_rmrf(dir);
}

/* ---- bad input ------------------------------------------------------------------------------ */

typedef struct bad_fixture {
    char dir[256];
    char bin[400], manifest[400], tracker[400];
    ckpt_set s, r;
} bad_fixture;

static void bad_setup(bad_fixture *f) {
    ckpt_tmpdir(f->dir, sizeof f->dir);
    save_it(f->dir, 10, 3, 0, &f->s);
    ckpt_set_like(&f->r, &f->s);
    snprintf(f->bin, sizeof f->bin, "%s/iter_0000010/model_optim_rng.bin", f->dir);
    snprintf(f->manifest, sizeof f->manifest, "%s/iter_0000010/metadata.json", f->dir);
    snprintf(f->tracker, sizeof f->tracker, "%s/latest_checkpointed_iteration.txt", f->dir);
}

static void bad_teardown(bad_fixture *f) {
    ckpt_set_free(&f->s);
    ckpt_set_free(&f->r);
    ckpt_rmrf(f->dir);
}

static int load_all(bad_fixture *f, dg_err *err) {
    memset(err, 0, sizeof *err);
    return dg_ckpt_load(f->dir, DG_CKPT_LATEST, NULL, NULL, f->r.t, f->r.n, err);
}

/* Replace the first `from` in the manifest by `to`. */
static void edit_manifest(bad_fixture *f, const char *from, const char *to) {
    char *text;
    size_t n;
    dg_err err = {{0}};
    assert_int_equal(dg_ckpt_read_file(f->manifest, &text, &n, &err), DG_OK);
    char *at = strstr(text, from);
    assert_non_null(at);
    FILE *o = fopen(f->manifest, "wb");
    fwrite(text, 1, (size_t)(at - text), o);
    fputs(to, o);
    fputs(at + strlen(from), o);
    fclose(o);
    dg_free(text);
}

static void test_bad_tensor_files(void **state) {
    (void)state;
    bad_fixture f;
    dg_err err;

    /* Truncated .bin: found before any buffer is written. */
    bad_setup(&f);
    struct stat sb;
    stat(f.bin, &sb);
    assert_int_equal(truncate(f.bin, sb.st_size / 2), 0);
    assert_int_equal(load_all(&f, &err), DG_EINPUT);
    assert_msg(&err, "iter_0000010/model_optim_rng.bin", "truncated");
    for (int i = 0; i < f.r.n; i++) {
        size_t b = dg_ckpt_tensor_bytes(&f.r.t[i]);
        for (size_t k = 0; k < b; k++) assert_int_equal(((uint8_t *)f.r.t[i].data)[k], 0);
    }
    bad_teardown(&f);

    /* One flipped byte: the CRC names the tensor. */
    bad_setup(&f);
    int fd = open(f.bin, O_RDWR);
    uint8_t byte;
    assert_int_equal(pread(fd, &byte, 1, 1000), 1);
    byte ^= 0x10;
    assert_int_equal(pwrite(fd, &byte, 1, 1000), 1);
    close(fd);
    assert_int_equal(load_all(&f, &err), DG_EINPUT);
    assert_msg(&err, "model_optim_rng.bin", "checksum mismatch in tensor 'embedding.word_embeddings.weight'");
    bad_teardown(&f);

    /* A missing .bin. */
    bad_setup(&f);
    unlink(f.bin);
    assert_int_equal(load_all(&f, &err), DG_EINPUT);
    assert_msg(&err, "model_optim_rng.bin", "No such file");
    bad_teardown(&f);
}

/* A dg_ckpt_expect check: refuses a checkpoint whose record has the key ctx. */
static int refuse_layers(const dg_ckpt_config *ckpt, const void *ctx, const char *where, dg_err *err) {
    const double *v = dg_ckpt_config_get(ckpt, ctx);
    if (!v) return DG_OK;
    return dg_err_set(err, DG_EINPUT, "%s: %s is %g, refused", where, (const char *)ctx, *v);
}

static void test_bad_requests(void **state) {
    (void)state;
    bad_fixture f;
    dg_err err;
    bad_setup(&f);

    /* A tensor the checkpoint lacks. */
    snprintf(f.r.t[5].name, sizeof f.r.t[5].name, "decoder.layers.9.mlp.router.weight");
    assert_int_equal(load_all(&f, &err), DG_EINPUT);
    assert_msg(&err, "iter_0000010/metadata.json", "no tensor 'decoder.layers.9.mlp.router.weight'");
    snprintf(f.r.t[5].name, sizeof f.r.t[5].name, "%s", f.s.t[5].name);

    /* Wrong shape, wrong rank, wrong dtype. */
    f.r.t[1].shape[0] = 8;
    assert_int_equal(load_all(&f, &err), DG_EINPUT);
    assert_msg(&err, "metadata.json", "tensor 'decoder.layers.0.mlp.router.weight' has shape [4,64] in the checkpoint, this run expects [8,64]");
    f.r.t[1].shape[0] = 4;
    f.r.t[1].ndim = 3;
    assert_int_equal(load_all(&f, &err), DG_EINPUT);
    assert_msg(&err, "metadata.json", "has shape");
    f.r.t[1].ndim = 2;
    f.r.t[12].dtype = DG_I32;
    assert_int_equal(load_all(&f, &err), DG_EINPUT);
    assert_msg(&err, "metadata.json", "tensor 'test.scalar_i64' is i64 in the checkpoint, this run expects i32");
    f.r.t[12].dtype = DG_I64;
    assert_int_equal(load_all(&f, &err), DG_OK);

    /* The caller's check sees the config record and can refuse the load
     * before any byte is read (what the trainer's architecture check does,
     * train/dg_model_record.h; tested in test_ckpt_model). */
    float before = ((float *)f.r.t[0].data)[0];
    ((float *)f.r.t[0].data)[0] = -123.0f;
    dg_ckpt_expect refuse = {refuse_layers, "num_layers"};
    assert_int_equal(dg_ckpt_load(f.dir, 10, &refuse, NULL, f.r.t, f.r.n, &err), DG_EINPUT);
    assert_msg(&err, "metadata.json", "num_layers is 2, refused");
    assert_true(((float *)f.r.t[0].data)[0] == -123.0f); /* untouched */
    dg_ckpt_expect accept = {refuse_layers, "no_such_key"};
    assert_int_equal(dg_ckpt_load(f.dir, 10, &accept, NULL, f.r.t, f.r.n, &err), DG_OK);
    assert_true(((float *)f.r.t[0].data)[0] == before);
    bad_teardown(&f);
}

static void test_bad_tracker(void **state) {
    (void)state;
    bad_fixture f;
    dg_err err;
    int64_t it;
    bad_setup(&f);

    ckpt_write_text(f.tracker, "99");
    assert_int_equal(load_all(&f, &err), DG_EINPUT);
    assert_msg(&err, "latest_checkpointed_iteration.txt", "iter_0000099 does not exist");

    const char *garbage[] = {"abc\n", "", "-3", "1e3", "10 11", "release", "99999999999999999999"};
    for (size_t i = 0; i < DG_ARRAY_LEN(garbage); i++) {
        ckpt_write_text(f.tracker, garbage[i]);
        memset(&err, 0, sizeof err);
        assert_int_equal(dg_ckpt_latest(f.dir, &it, &err), DG_EINPUT);
        assert_msg(&err, "latest_checkpointed_iteration.txt", "expected an iteration number");
    }
    ckpt_write_text(f.tracker, " 10\n"); /* hand-edited: whitespace is fine */
    assert_int_equal(load_all(&f, &err), DG_OK);

    unlink(f.tracker);
    mkdir(f.tracker, 0777);
    assert_int_equal(load_all(&f, &err), DG_EINPUT);
    assert_msg(&err, "latest_checkpointed_iteration.txt", "not a regular file");
    rmdir(f.tracker);
    assert_false(dg_ckpt_has_tracker(f.dir));
    assert_int_equal(load_all(&f, &err), DG_EINPUT);
    assert_msg(&err, "latest_checkpointed_iteration.txt", "no checkpoint tracker");
    /* A named iteration still loads without the tracker. */
    assert_int_equal(dg_ckpt_load(f.dir, 10, NULL, NULL, f.r.t, f.r.n, &err), DG_OK);
    assert_int_equal(dg_ckpt_load(f.dir, 11, NULL, NULL, f.r.t, f.r.n, &err), DG_EINPUT);
    assert_msg(&err, "iter_0000011/metadata.json", "No such file");
    bad_teardown(&f);
}

static void test_bad_manifest(void **state) {
    (void)state;
    static const struct {
        const char *from, *to, *says;
    } edits[] = {
        {"\"format\"", "\"formt\"", "'format' is missing"},
        {"\"version\":\t1", "\"version\":\t3", "format version 3, this dagatron reads versions 1 to 2"},
        {"\"iteration\":\t10", "\"iteration\":\t12", "says iteration 12 but sits in iter_0000010"},
        {"\"consumed_samples\":\t640", "\"consumed_samples\":\t6.5", "'consumed_samples' = 6.5 is not an integer"},
        {"\"0xffffffffffffffff\"", "\"ffff\"", "rng[0] is not a \"0x...\" hex word"},
        {"\"num_layers\":\t2", "\"num_layers\":\t\"2\"", "model field 'num_layers' is not a number"},
        {"\"dtype\":\t\"f32\"", "\"dtype\":\t\"f33\"", "unknown dtype 'f33'"},
        {"\"file\":\t\"model_optim_rng.bin\"", "\"file\":\t\"../x.bin\"", "is not a relative path inside the checkpoint"},
        {"\"nbytes\":\t25600", "\"nbytes\":\t25604", "does not match its shape"},
        {"\"slice_start\":\t[0, 0]", "\"slice_start\":\t[1, 0]", "exceeds its size"},
        {"\"tensors\":\t[", "\"tensors\":\t[{\"name\": \"test.scalar_i64\", \"dtype\": \"i64\", \"global_shape\": [], "
                           "\"slice_start\": [], \"shape\": [], \"file\": \"model_optim_rng.bin\", \"offset\": 0, "
                           "\"nbytes\": 8, \"crc32\": 0}, ", "tensor 'test.scalar_i64' appears twice"},
        {"{", "[", "not valid JSON"},
        {"\"tensors\":", "\"tensors\": 3, \"x\":", "'tensors' is missing or not a list"},
    };
    for (size_t i = 0; i < DG_ARRAY_LEN(edits); i++) {
        bad_fixture f;
        dg_err err;
        bad_setup(&f);
        edit_manifest(&f, edits[i].from, edits[i].to);
        int st = load_all(&f, &err);
        if (st != DG_EINPUT) print_error("edit %zu (%s) gave %d\n", i, edits[i].to, st);
        assert_int_equal(st, DG_EINPUT);
        assert_msg(&err, "iter_0000010/metadata.json", edits[i].says);
        bad_teardown(&f);
    }
    /* Truncated manifest. */
    bad_fixture f;
    dg_err err;
    bad_setup(&f);
    assert_int_equal(truncate(f.manifest, 100), 0);
    assert_int_equal(load_all(&f, &err), DG_EINPUT);
    assert_msg(&err, "metadata.json", "not valid JSON");
    bad_teardown(&f);
}

static void test_bad_save_dir(void **state) {
    (void)state;
    char dir[256], p[400];
    ckpt_tmpdir(dir, sizeof dir);
    snprintf(p, sizeof p, "%s/file", dir);
    ckpt_write_text(p, "x");
    ckpt_set s;
    ckpt_set_make(&s, 1, 1);
    dg_ckpt_meta m;
    ckpt_meta_make(&m, 10);
    dg_err err = {{0}};
    assert_int_equal(dg_ckpt_save(p, &m, s.t, s.n, NULL, &err), DG_EINPUT);
    assert_msg(&err, "/file", "not a directory");
    snprintf(p, sizeof p, "%s/file/sub", dir);
    memset(&err, 0, sizeof err);
    assert_int_equal(dg_ckpt_save(p, &m, s.t, s.n, NULL, &err), DG_EINPUT);
    assert_msg(&err, "/file", "cannot create directory");
    /* A caller bug (duplicate names) is internal, and nothing is written. */
    dg_ckpt_tensor keep = s.t[1];
    s.t[1] = s.t[0];
    assert_int_equal(dg_ckpt_save(dir, &m, s.t, s.n, NULL, &err), DG_EINTERNAL);
    assert_msg(&err, "dg_ckpt_save", "appears twice");
    assert_false(ckpt_exists("%s/iter_0000010", dir));
    s.t[1] = keep;
    ckpt_set_free(&s);
    ckpt_rmrf(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32),
        cmocka_unit_test(test_names),
            cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_tensor_from),
        cmocka_unit_test(test_keep_last),
        cmocka_unit_test(test_replace_same_iteration),
        cmocka_unit_test(test_stale_tmp_cleanup),
        cmocka_unit_test(test_bad_tensor_files),
        cmocka_unit_test(test_bad_requests),
        cmocka_unit_test(test_bad_tracker),
        cmocka_unit_test(test_bad_manifest),
        cmocka_unit_test(test_bad_save_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
