/* test_ckpt_async.c — --async-save's background writer
 * (train/dg_ckpt_async.h), one rank:
 *  - the checkpoint holds the state at dg_ckpt_async_start, not what
 *    training writes into the buffers while the save is in flight; saves
 *    after the first reuse the snapshot buffer, and a bigger state grows
 *    it, each holding its own values;
 *  - a save that fails in the background (its temporary directory gone)
 *    reports the failure at the wait, leaves no iteration directory and no
 *    temporary one, and the tracker still names the previous checkpoint,
 *    which loads with its values; the next save succeeds;
 *  - rank 0's wait for another rank's file gives up only after its timeout
 *    passes with no progress: a rank writing slowly (each box later than
 *    the timeout after the first, never a timeout apart) finishes the save. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <time.h>

#include "ckpt_test_util.h"
#include "dg_ckpt_async.h"
#include "dg_ckpt_fs.h"

enum { COLS = 5, MAX_ROWS = 64 };

static float val(float base, int64_t k) { return base + 0.5f * (float)k; }

static void fill(float *w, int64_t rows, float base) {
    for (int64_t k = 0; k < rows * COLS; k++) w[k] = val(base, k);
}

/* W [rows, COLS] held whole by the one rank, as a sharded save's piece. */
static void piece_of(dg_ckpt_piece *p, float *w, int64_t rows) {
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "W");
    p->dtype = DG_F32;
    p->ndim = 2;
    p->global_shape[0] = p->shape[0] = rows;
    p->global_shape[1] = p->shape[1] = COLS;
    p->stride[0] = COLS;
    p->stride[1] = 1;
    p->data = w;
}

/* Plan and start an asynchronous save of iteration it; with `sabotage`,
 * the temporary directory is removed before the writer starts. */
static int start(dg_ckpt_async *a, const char *dir, int64_t it, float *w, int64_t rows, int sabotage) {
    dg_ckpt_piece p;
    piece_of(&p, w, rows);
    dg_ckpt_key key;
    dg_ckpt_key_of(&p, &key);
    dg_ckpt_plan plan;
    dg_err err = {{0}};
    int n = 1;
    assert_int_equal(dg_ckpt_plan_make(1, &n, &key, 1, &plan, &err), DG_OK);
    long pid = (long)getpid();
    assert_int_equal(dg_ckpt_begin(dir, it, pid, &err), DG_OK);
    if (sabotage) dg_ckpt_abort(dir, it, pid);
    dg_ckpt_meta m;
    ckpt_meta_make(&m, it);
    int st = dg_ckpt_async_start(a, dir, pid, &m, &plan, 0, &p, 1.0, NULL, &err);
    dg_ckpt_plan_free(&plan);
    return st;
}

static void check_load(const char *dir, int64_t it, int64_t rows, float base) {
    float w[MAX_ROWS * COLS];
    dg_ckpt_tensor t = {"W", DG_F32, 2, {rows, COLS}, w};
    dg_err err = {{0}};
    int st = dg_ckpt_load(dir, it, NULL, NULL, &t, 1, &err);
    if (st) print_error("load: %s\n", err.msg);
    assert_int_equal(st, DG_OK);
    for (int64_t k = 0; k < rows * COLS; k++) assert_true(w[k] == val(base, k));
}

static void wait_ok(dg_ckpt_async *a, int64_t want_it) {
    int64_t it;
    dg_err err = {{0}};
    int st = dg_ckpt_async_wait(a, &it, &err);
    if (st) print_error("wait: %s\n", err.msg);
    assert_int_equal(st, DG_OK);
    assert_int_equal(it, want_it);
}

static void test_snapshot_at_start_and_reused(void **state) {
    (void)state;
    char dir[256];
    ckpt_tmpdir(dir, sizeof dir);
    dg_ckpt_async *a = dg_ckpt_async_new();
    float w[MAX_ROWS * COLS];
    const int64_t rows[3] = {8, 8, MAX_ROWS}; /* the same state twice (buffer reused), then a bigger one */
    for (int i = 0; i < 3; i++) {
        fill(w, rows[i], (float)(10 * i + 1));
        assert_int_equal(start(a, dir, 10 + i, w, rows[i], 0), DG_OK);
        fill(w, rows[i], -1000.0f); /* training moves on while the save is in flight */
        wait_ok(a, 10 + i);
    }
    for (int i = 0; i < 3; i++) check_load(dir, 10 + i, rows[i], (float)(10 * i + 1));
    dg_ckpt_async_free(a);
    ckpt_rmrf(dir);
}

static void test_failed_background_save_keeps_previous(void **state) {
    (void)state;
    char dir[256];
    ckpt_tmpdir(dir, sizeof dir);
    dg_ckpt_async *a = dg_ckpt_async_new();
    float w[8 * COLS];
    fill(w, 8, 3.0f);
    assert_int_equal(start(a, dir, 10, w, 8, 0), DG_OK);
    wait_ok(a, 10);
    fill(w, 8, 7.0f);
    assert_int_equal(start(a, dir, 11, w, 8, 1), DG_OK); /* fails on the writer thread */
    int64_t it;
    dg_err err = {{0}};
    assert_int_equal(dg_ckpt_async_wait(a, &it, &err), DG_EINPUT);
    assert_int_equal(it, 11);
    assert_non_null(strstr(err.msg, "cannot create"));
    assert_false(ckpt_exists("%s/iter_0000011", dir));
    assert_int_equal(ckpt_count(dir, ".tmp-"), 0);
    int64_t latest = -1;
    assert_int_equal(dg_ckpt_latest(dir, &latest, NULL), DG_OK);
    assert_int_equal(latest, 10);
    check_load(dir, DG_CKPT_LATEST, 8, 3.0f);
    assert_int_equal(start(a, dir, 12, w, 8, 0), DG_OK); /* the writer is usable again */
    wait_ok(a, 12);
    check_load(dir, DG_CKPT_LATEST, 8, 7.0f);
    dg_ckpt_async_free(a);
    ckpt_rmrf(dir);
}

/* Two ranks: each holds BOXES rows of W [2 * BOXES, COLS] as one-row boxes. */
enum { BOXES = 6 };

typedef struct slow_rank {
    const char *dir;
    long pid;
    const dg_ckpt_plan *plan;
    dg_ckpt_piece *p;
    int st;
} slow_rank;

static void pause_after_box(void *ctx, dg_ckpt_stage stage, int index) {
    (void)ctx;
    (void)index;
    struct timespec ts = {0, 40 * 1000000}; /* 40 ms: under the 100 ms timeout, six of them above it */
    if (stage == DG_CKPT_AT_TENSOR) nanosleep(&ts, NULL);
}

static void *write_slowly(void *arg) {
    slow_rank *s = arg;
    dg_ckpt_save_opts o = {0, pause_after_box, NULL, 0};
    dg_err err = {{0}};
    s->st = dg_ckpt_write_rank(s->dir, 20, s->pid, s->plan, 1, s->p, &o, &err);
    return NULL;
}

static void test_slow_rank_is_not_a_lost_rank(void **state) {
    (void)state;
    char dir[256];
    ckpt_tmpdir(dir, sizeof dir);
    static float w[2 * BOXES * COLS];
    fill(w, 2 * BOXES, 5.0f);
    dg_ckpt_piece p[2][BOXES];
    dg_ckpt_key keys[2 * BOXES];
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < BOXES; i++) {
            dg_ckpt_piece *x = &p[r][i];
            piece_of(x, w + (r * BOXES + i) * COLS, 1);
            x->global_shape[0] = 2 * BOXES;
            x->start[0] = r * BOXES + i;
            dg_ckpt_key_of(x, &keys[r * BOXES + i]);
        }
    dg_ckpt_plan plan;
    dg_err err = {{0}};
    int n_keys[2] = {BOXES, BOXES};
    assert_int_equal(dg_ckpt_plan_make(2, n_keys, keys, BOXES, &plan, &err), DG_OK);
    long pid = (long)getpid();
    assert_int_equal(dg_ckpt_begin(dir, 20, pid, &err), DG_OK);
    assert_int_equal(dg_ckpt_write_rank(dir, 20, pid, &plan, 0, p[0], NULL, &err), DG_OK);
    slow_rank s = {dir, pid, &plan, p[1], -1};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, write_slowly, &s), 0);
    dg_ckpt_meta m;
    ckpt_meta_make(&m, 20);
    int st = dg_ckpt_finish(dir, pid, &m, &plan, 0.1, NULL, &err);
    pthread_join(t, NULL);
    if (st) print_error("finish: %s\n", err.msg);
    assert_int_equal(s.st, DG_OK);
    assert_int_equal(st, DG_OK);
    check_load(dir, 20, 2 * BOXES, 5.0f);
    dg_ckpt_plan_free(&plan);
    ckpt_rmrf(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_snapshot_at_start_and_reused),
        cmocka_unit_test(test_failed_background_save_keeps_previous),
        cmocka_unit_test(test_slow_rank_is_not_a_lost_rank),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
