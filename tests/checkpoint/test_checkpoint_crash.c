/* test_checkpoint_crash.c — crash safety: a save killed with SIGKILL at any
 * stage leaves the previous checkpoint loadable, bitwise, with the tracker
 * naming it; and the tracker never names an incomplete directory.
 *
 * A forked child saves; the save's stage seam (dg_ckpt_save_opts.at, see
 * dg_checkpoint.h) kills it at a named stage, or stops it at every stage
 * until the parent has looked at the disk. No timing is involved: each
 * test sees the same moments on every run, under any sanitizer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ckpt_test_util.h"

enum { SEED_OLD = 100, SEED_NEW = 200 };

static void save_or_die(const char *dir, int64_t it, uint64_t seed, int keep) {
    ckpt_set s;
    ckpt_set_make(&s, seed, 4);
    dg_ckpt_meta m;
    ckpt_meta_make(&m, it);
    dg_err err = {{0}};
    int st = dg_ckpt_save(dir, &m, s.t, s.n, &(dg_ckpt_save_opts){.keep_last = keep}, &err);
    if (st) print_error("save %lld: %s\n", (long long)it, err.msg);
    assert_int_equal(st, DG_OK);
    ckpt_set_free(&s);
}

/* What the child does at each stage: die at one, or report every stage on
 * `report` and wait for a byte on `resume`. */
typedef struct stage_ctl {
    int kill_stage, kill_index; /* kill_stage < 0: never */
    int report, resume;         /* pipe ends, -1: none */
} stage_ctl;

typedef struct stage_msg {
    int stage, index;
} stage_msg;

static void at_stage(void *ctx, dg_ckpt_stage stage, int index) {
    const stage_ctl *c = ctx;
    if ((int)stage == c->kill_stage && index == c->kill_index) raise(SIGKILL);
    if (c->report < 0) return;
    stage_msg m = {(int)stage, index};
    char go;
    if (write(c->report, &m, sizeof m) != (ssize_t)sizeof m || read(c->resume, &go, 1) != 1) _exit(3);
}

/* Fork a child that saves iteration `it` from `seed` under ctl. */
static pid_t spawn_save(const char *dir, int64_t it, uint64_t seed, stage_ctl ctl) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        ckpt_set s;
        ckpt_set_make(&s, seed, 4);
        dg_ckpt_meta m;
        ckpt_meta_make(&m, it);
        dg_err err = {{0}};
        dg_ckpt_save_opts o = {0, at_stage, &ctl, 0};
        int st = dg_ckpt_save(dir, &m, s.t, s.n, &o, &err);
        if (st) fprintf(stderr, "child save: %s\n", err.msg);
        _exit(st);
    }
    return pid;
}

static int n_tensors(void) {
    ckpt_set s;
    ckpt_set_make(&s, 1, 4);
    int n = s.n;
    ckpt_set_free(&s);
    return n;
}

/* Load iteration `it` (DG_CKPT_LATEST: the tracker's) and check it holds
 * the tensors made from `seed`. Returns the iteration loaded. */
static int64_t load_and_check(const char *dir, int64_t it, uint64_t seed) {
    ckpt_set want, got;
    ckpt_set_make(&want, seed, 4);
    ckpt_set_like(&got, &want);
    dg_ckpt_meta m;
    dg_err err = {{0}};
    int st = dg_ckpt_load(dir, it, NULL, &m, got.t, got.n, &err);
    if (st) print_error("load: %s\n", err.msg);
    assert_int_equal(st, DG_OK);
    assert_true(ckpt_set_equal(&want, &got));
    ckpt_set_free(&want);
    ckpt_set_free(&got);
    return m.iteration;
}

static int64_t tracker(const char *dir) {
    int64_t it = -1;
    dg_err err = {{0}};
    int st = dg_ckpt_latest(dir, &it, &err);
    if (st) print_error("latest: %s\n", err.msg);
    assert_int_equal(st, DG_OK);
    return it;
}

/* Killed while the tensors are being written: the half-written temporary
 * directory is there but ignored, and the next save cleans it up. */
static void test_sigkill_mid_write(void **state) {
    (void)state;
    char dir[256], bin[400];
    ckpt_tmpdir(dir, sizeof dir);
    save_or_die(dir, 10, SEED_OLD, 0);

    pid_t pid = spawn_save(dir, 20, SEED_NEW, (stage_ctl){DG_CKPT_AT_TENSOR, n_tensors() / 2, -1, -1});
    int ws;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    assert_true(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
    snprintf(bin, sizeof bin, "%s/iter_0000020.tmp-%ld/model_optim_rng.bin", dir, (long)pid);
    struct stat sb;
    assert_true(stat(bin, &sb) == 0 && sb.st_size > 0);
    assert_false(ckpt_exists("%s/iter_0000020", dir));
    assert_int_equal(tracker(dir), 10);
    assert_int_equal(load_and_check(dir, DG_CKPT_LATEST, SEED_OLD), 10);

    save_or_die(dir, 30, SEED_NEW, 2);
    assert_int_equal(ckpt_count(dir, ".tmp-"), 0);
    assert_int_equal(load_and_check(dir, DG_CKPT_LATEST, SEED_NEW), 30);
    assert_int_equal(load_and_check(dir, 10, SEED_OLD), 10);
    ckpt_rmrf(dir);
}

/* What the disk must show when a save of iteration 20 over a tracked
 * iteration 10 has reached `stage` (or died there): the tracker names a
 * checkpoint that loads bitwise, and an iter_0000020 that exists is
 * complete. `replacing`: an older iter_0000020 was there before. */
static void check_stage(const char *dir, int stage, int replacing) {
    int64_t it = tracker(dir);
    int want = stage == DG_CKPT_AT_TRACKED ? 20 : 10;
    if (it != want) print_error("stage %d: tracker %lld, expected %d\n", stage, (long long)it, want);
    assert_int_equal(it, want);
    assert_int_equal(load_and_check(dir, DG_CKPT_LATEST, it == 10 ? SEED_OLD : SEED_NEW), it);
    int present = ckpt_exists("%s/iter_0000020", dir);
    int installed = stage == DG_CKPT_AT_INSTALLED || stage == DG_CKPT_AT_TRACKED;
    assert_int_equal(present, replacing || installed);
    if (present) load_and_check(dir, 20, SEED_NEW);
    load_and_check(dir, 10, SEED_OLD);
}

/* The stages of a one-rank save in the order they come: each tensor, the
 * rank's file durable, files done, installed, tracked (k = 0 .. nt + 3). */
static void stage_of(int k, int nt, int *stage, int *index) {
    *stage = k < nt ? DG_CKPT_AT_TENSOR : k == nt ? DG_CKPT_AT_RANK_FILE : DG_CKPT_AT_FILES + (k - nt - 1);
    *index = k < nt ? k : k == nt ? 0 : -1;
}

/* Kill at every stage (each tensor, the rank's file, files done, installed, tracked), first
 * saving a new iteration 20, then replacing an existing one: after each,
 * the disk is as check_stage expects. */
static void test_sigkill_at_every_stage(void **state) {
    (void)state;
    char dir[256];
    ckpt_tmpdir(dir, sizeof dir);
    int nt = n_tensors();
    for (int replacing = 0; replacing < 2; replacing++) {
        save_or_die(dir, 10, SEED_OLD, 0); /* the tracker back on 10 */
        for (int k = 0; k < nt + 4; k++) {
            int stage, index;
            stage_of(k, nt, &stage, &index);
            if (replacing && stage == DG_CKPT_AT_TRACKED) continue; /* would leave the tracker on 20 */
            pid_t pid = spawn_save(dir, 20, SEED_NEW, (stage_ctl){stage, index, -1, -1});
            int ws;
            assert_int_equal(waitpid(pid, &ws, 0), pid);
            assert_true(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
            check_stage(dir, stage, replacing);
            if (!replacing && (stage == DG_CKPT_AT_INSTALLED || stage == DG_CKPT_AT_TRACKED)) {
                /* iter_0000020 now exists: back to before this save */
                char p[300];
                snprintf(p, sizeof p, "%s/iter_0000020", dir);
                ckpt_rmrf(p);
                save_or_die(dir, 10, SEED_OLD, 0);
            }
        }
        if (!replacing) save_or_die(dir, 20, SEED_NEW, 0); /* an iter_0000020 to replace */
    }
    save_or_die(dir, 20, SEED_NEW, 0);
    assert_int_equal(tracker(dir), 20);
    ckpt_rmrf(dir);
}

/* Stop the save at every stage and look: whatever the tracker names loads
 * bitwise, and iter_0000020 appears complete, before the tracker moves. */
static void test_tracker_after_directory(void **state) {
    (void)state;
    char dir[256];
    ckpt_tmpdir(dir, sizeof dir);
    save_or_die(dir, 10, SEED_OLD, 0);
    int up[2], down[2];
    assert_int_equal(pipe(up), 0);
    assert_int_equal(pipe(down), 0);
    pid_t pid = spawn_save(dir, 20, SEED_NEW, (stage_ctl){-1, 0, up[1], down[0]});
    close(up[1]);
    close(down[0]);
    int nt = n_tensors(), stops = 0, last = -1;
    stage_msg m;
    while (read(up[0], &m, sizeof m) == (ssize_t)sizeof m) {
        /* the stages come in order, each tensor once */
        int k = m.stage == DG_CKPT_AT_TENSOR ? m.index : m.stage == DG_CKPT_AT_RANK_FILE ? nt : nt + 1 + (m.stage - DG_CKPT_AT_FILES);
        assert_int_equal(k, last + 1);
        last = k;
        check_stage(dir, m.stage, 0);
        stops++;
        assert_int_equal(write(down[1], "g", 1), 1);
    }
    close(up[0]);
    close(down[1]);
    int ws;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    assert_int_equal(stops, nt + 4);
    assert_int_equal(tracker(dir), 20);
    ckpt_rmrf(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sigkill_mid_write),
        cmocka_unit_test(test_sigkill_at_every_stage),
        cmocka_unit_test(test_tracker_after_directory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
