/* test_ckpt_shards.c — sharded checkpoints at the io level
 * (io/dg_ckpt_shards.h), with two "ranks" played by one process:
 *  - the plan writes a replicated tensor once and each rank's own slices;
 *  - a checkpoint written as slices loads into other boxes: whole, split
 *    four ways by rows, by columns into strided memory, strided row blocks;
 *  - a SIGKILL at every stage of a two-rank save (each box of each rank,
 *    each rank's file done, files, installed, tracked) leaves the tracker
 *    naming a checkpoint that loads with its own values;
 *  - a table whose slices do not cover a tensor is one clear error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <sys/wait.h>

#include "ckpt_test_util.h"
#include "dg_ckpt_shards.h"

enum { WORLD = 2, ROWS = 8, COLS = 6 };

/* Values of element k of a tensor of the checkpoint saved with `base`. */
static float val(float base, int tensor, int64_t k) { return base + (float)tensor * 100.0f + (float)k; }

/* Rank r's state: rows [4r, 4r + 4) of W [8, 6]; all of N [6] (replicated);
 * of F [4, 6] split with stride 2 over rows, global rows r and 2 + r. */
typedef struct rank_state {
    float w[4 * COLS], n[COLS], f[2 * COLS];
    dg_ckpt_piece p[4];
} rank_state;

static void piece(dg_ckpt_piece *p, const char *name, int ndim, const int64_t *gshape, const int64_t *start,
                  const int64_t *shape, const int64_t *stride, void *data) {
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->dtype = DG_F32;
    p->ndim = ndim;
    for (int d = 0; d < ndim; d++) {
        p->global_shape[d] = gshape[d];
        p->start[d] = start[d];
        p->shape[d] = shape[d];
        p->stride[d] = stride[d];
    }
    p->data = data;
}

static void rank_make(rank_state *s, int r, float base) {
    for (int i = 0; i < 4 * COLS; i++) s->w[i] = val(base, 0, (int64_t)(4 * r) * COLS + i);
    for (int i = 0; i < COLS; i++) s->n[i] = val(base, 1, i);
    for (int j = 0; j < 2; j++)
        for (int c = 0; c < COLS; c++) s->f[j * COLS + c] = val(base, 2, (int64_t)(2 * j + r) * COLS + c);
    const int64_t row_stride[2] = {COLS, 1};
    piece(&s->p[0], "W", 2, (const int64_t[]){ROWS, COLS}, (const int64_t[]){4 * r, 0}, (const int64_t[]){4, COLS},
          row_stride, s->w);
    piece(&s->p[1], "N", 1, (const int64_t[]){COLS}, (const int64_t[]){0}, (const int64_t[]){COLS},
          (const int64_t[]){1}, s->n);
    for (int j = 0; j < 2; j++)
        piece(&s->p[2 + j], "F", 2, (const int64_t[]){4, COLS}, (const int64_t[]){2 * j + r, 0},
              (const int64_t[]){1, COLS}, row_stride, s->f + j * COLS);
}

static void plan_world(rank_state *s, dg_ckpt_plan *plan) {
    dg_ckpt_key keys[WORLD * 4];
    int n_keys[WORLD] = {4, 4};
    for (int r = 0; r < WORLD; r++)
        for (int i = 0; i < 4; i++) dg_ckpt_key_of(&s[r].p[i], &keys[r * 4 + i]);
    dg_err err = {{0}};
    int st = dg_ckpt_plan_make(WORLD, n_keys, keys, 4, plan, &err);
    if (st) print_error("plan: %s\n", err.msg);
    assert_int_equal(st, DG_OK);
}

/* The whole two-rank save, rank 1 writing first, then rank 0, then rank 0
 * finishing. */
static int save_world(const char *dir, int64_t it, float base, const dg_ckpt_save_opts *o, dg_err *err) {
    rank_state s[WORLD];
    for (int r = 0; r < WORLD; r++) rank_make(&s[r], r, base);
    dg_ckpt_plan plan;
    plan_world(s, &plan);
    dg_ckpt_meta m;
    ckpt_meta_make(&m, it);
    long pid = (long)getpid();
    int st = dg_ckpt_begin(dir, it, pid, err);
    for (int r = WORLD - 1; r >= 0 && st == DG_OK; r--) st = dg_ckpt_write_rank(dir, it, pid, &plan, r, s[r].p, o, err);
    if (st == DG_OK) st = dg_ckpt_finish(dir, pid, &m, &plan, 1.0, o, err);
    dg_ckpt_plan_free(&plan);
    return st;
}

static void test_plan_writes_replicas_once(void **state) {
    (void)state;
    rank_state s[WORLD];
    for (int r = 0; r < WORLD; r++) rank_make(&s[r], r, 0);
    dg_ckpt_plan plan;
    plan_world(s, &plan);
    assert_int_equal(plan.n_entries, 7); /* W: 2 slices, F: 4 rows, N once (not twice) */
    int n_norm = 0;
    for (int i = 0; i < plan.n_entries; i++) {
        const dg_ckpt_entry *e = &plan.entries[i];
        if (!strcmp(e->name, "N")) n_norm++;
        if (!strcmp(e->name, "W")) assert_int_equal(e->slice_start[0], 4 * plan.writer[i]); /* its own rows */
        if (!strcmp(e->name, "F")) assert_int_equal(e->slice_start[0] % 2, plan.writer[i]);
        assert_int_equal(e->offset % 64, 0);
    }
    assert_int_equal(n_norm, 1);
    assert_true(plan.count[0] >= 2 && plan.count[1] >= 2);
    dg_ckpt_plan_free(&plan);
}

/* Load whole W, N, F and check every value. */
static void check_whole(const char *dir, int64_t it, float base) {
    float w[ROWS * COLS], n[COLS], f[4 * COLS];
    dg_ckpt_tensor t[3] = {{"W", DG_F32, 2, {ROWS, COLS}, w}, {"N", DG_F32, 1, {COLS}, n}, {"F", DG_F32, 2, {4, COLS}, f}};
    dg_err err = {{0}};
    int st = dg_ckpt_load(dir, it, NULL, NULL, t, 3, &err);
    if (st) print_error("load: %s\n", err.msg);
    assert_int_equal(st, DG_OK);
    for (int k = 0; k < ROWS * COLS; k++) assert_true(w[k] == val(base, 0, k));
    for (int k = 0; k < COLS; k++) assert_true(n[k] == val(base, 1, k));
    for (int k = 0; k < 4 * COLS; k++) assert_true(f[k] == val(base, 2, k));
}

static void test_load_into_other_layouts(void **state) {
    (void)state;
    char dir[256];
    ckpt_tmpdir(dir, sizeof dir);
    dg_err err = {{0}};
    assert_int_equal(save_world(dir, 10, 0, NULL, &err), DG_OK);
    assert_true(ckpt_exists("%s/iter_0000010/model_optim_rng_rank00001.bin", dir));
    check_whole(dir, 10, 0);
    dg_ckpt_manifest man;
    assert_int_equal(dg_ckpt_read_manifest(dir, DG_CKPT_LATEST, &man, &err), DG_OK);
    /* W split four ways by rows, and by columns [3, 6) into a strided buffer
     * (every second float of a [8, 6] buffer: stride {12, 2}) */
    float rows[4][2 * COLS], cols[ROWS * 12];
    dg_ckpt_piece p[5];
    for (int q = 0; q < 4; q++)
        piece(&p[q], "W", 2, (const int64_t[]){ROWS, COLS}, (const int64_t[]){2 * q, 0}, (const int64_t[]){2, COLS},
              (const int64_t[]){COLS, 1}, rows[q]);
    memset(cols, 0, sizeof cols);
    piece(&p[4], "W", 2, (const int64_t[]){ROWS, COLS}, (const int64_t[]){0, 3}, (const int64_t[]){ROWS, 3},
          (const int64_t[]){12, 2}, cols);
    assert_int_equal(dg_ckpt_load_pieces(&man, p, 5, &err), DG_OK);
    for (int q = 0; q < 4; q++)
        for (int k = 0; k < 2 * COLS; k++) assert_true(rows[q][k] == val(0, 0, (int64_t)(2 * q) * COLS + k));
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < 3; c++) {
            assert_true(cols[r * 12 + 2 * c] == val(0, 0, (int64_t)r * COLS + 3 + c));
            assert_true(cols[r * 12 + 2 * c + 1] == 0.0f); /* the gaps untouched */
        }
    /* a table that lost one of W's slices: the loader names what is missing */
    for (int i = 0; i < man.n_tensors; i++)
        if (!strcmp(man.tensors[i].name, "W")) {
            man.tensors[i] = man.tensors[man.n_tensors - 1];
            man.n_tensors--;
            break;
        }
    float w[ROWS * COLS];
    piece(&p[0], "W", 2, (const int64_t[]){ROWS, COLS}, (const int64_t[]){0, 0}, (const int64_t[]){ROWS, COLS},
          (const int64_t[]){COLS, 1}, w);
    assert_int_equal(dg_ckpt_load_pieces(&man, p, 1, &err), DG_EINPUT);
    assert_msg(&err, "iter_0000010/metadata.json", "the stored slices hold 24 of the 48 elements");
    dg_ckpt_manifest_free(&man);
    ckpt_rmrf(dir);
}

/* The child dies at the `kill_at`-th stage it reaches (counting from 0). */
typedef struct counter {
    int seen, kill_at;
    int stage; /* the stage of the last call */
} counter;

static void at_stage(void *ctx, dg_ckpt_stage stage, int index) {
    (void)index;
    counter *c = ctx;
    c->stage = (int)stage;
    if (c->seen++ == c->kill_at) raise(SIGKILL);
}

static void test_sigkill_at_every_stage_of_both_ranks(void **state) {
    (void)state;
    char dir[256];
    ckpt_tmpdir(dir, sizeof dir);
    dg_err err = {{0}};
    assert_int_equal(save_world(dir, 10, 0, NULL, &err), DG_OK);
    /* how many stages a save reaches: 7 boxes, 2 rank files, files, installed, tracked */
    counter dry = {0, -1, -1};
    dg_ckpt_save_opts o = {0, at_stage, &dry, 0};
    assert_int_equal(save_world(dir, 30, 500, &o, &err), DG_OK);
    assert_int_equal(dry.seen, 7 + 2 + 3);
    for (int k = 0; k < dry.seen; k++) {
        char p[300];
        snprintf(p, sizeof p, "%s/%s", dir, DG_CKPT_TRACKER);
        ckpt_write_text(p, "10");
        snprintf(p, sizeof p, "%s/iter_0000020", dir);
        ckpt_rmrf(p);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            counter c = {0, k, -1};
            dg_ckpt_save_opts ok = {0, at_stage, &c, 0};
            dg_err e2 = {{0}};
            _exit(save_world(dir, 20, 1000, &ok, &e2));
        }
        int ws;
        assert_int_equal(waitpid(pid, &ws, 0), pid);
        assert_true(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
        int64_t it = -1;
        assert_int_equal(dg_ckpt_latest(dir, &it, &err), DG_OK);
        assert_int_equal(it, k == dry.seen - 1 ? 20 : 10); /* only a kill after the tracker moved leaves 20 */
        check_whole(dir, it, it == 20 ? 1000 : 0);
        /* iter_0000020 appears only once complete: from the "installed" stage on */
        assert_int_equal(ckpt_exists("%s/iter_0000020", dir), k >= dry.seen - 2);
        if (k >= dry.seen - 2) check_whole(dir, 20, 1000);
    }
    ckpt_rmrf(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_writes_replicas_once),
        cmocka_unit_test(test_load_into_other_layouts),
        cmocka_unit_test(test_sigkill_at_every_stage_of_both_ranks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
