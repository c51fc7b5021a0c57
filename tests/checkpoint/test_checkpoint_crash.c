/* test_checkpoint_crash.c — crash safety: a save killed with SIGKILL at any
 * moment leaves the previous checkpoint loadable, bitwise, with the tracker
 * naming it; and the tracker never names an incomplete directory.
 *
 * A forked child saves; DG_CKPT_TEST_DELAY_MS (see dg_checkpoint.h) makes it
 * sleep after each tensor so the parent can kill it mid-write without
 * needing hundreds of megabytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "ckpt_test_util.h"

enum { SEED_OLD = 100, SEED_NEW = 200 };

static void sleep_ms(long ms) { nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000L}, NULL); }

static void save_or_die(const char *dir, int64_t it, uint64_t seed, int keep) {
    ckpt_set s;
    ckpt_set_make(&s, seed, 4);
    dg_ckpt_meta m;
    ckpt_meta_make(&m, it);
    dg_err err = {{0}};
    int st = dg_ckpt_save(dir, &m, s.t, s.n, keep, &err);
    if (st) print_error("save %lld: %s\n", (long long)it, err.msg);
    assert_int_equal(st, DG_OK);
    ckpt_set_free(&s);
}

/* Fork a child that saves iteration `it` from `seed`, sleeping delay_ms
 * after each tensor. */
static pid_t spawn_save(const char *dir, int64_t it, uint64_t seed, int delay_ms) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char d[32];
        snprintf(d, sizeof d, "%d", delay_ms);
        setenv("DG_CKPT_TEST_DELAY_MS", d, 1);
        ckpt_set s;
        ckpt_set_make(&s, seed, 4);
        dg_ckpt_meta m;
        ckpt_meta_make(&m, it);
        dg_err err = {{0}};
        int st = dg_ckpt_save(dir, &m, s.t, s.n, 0, &err);
        if (st) fprintf(stderr, "child save: %s\n", err.msg);
        _exit(st);
    }
    return pid;
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

/* The acceptance test: kill while the tensors are being written. */
static void test_sigkill_mid_write(void **state) {
    (void)state;
    char dir[256], bin[400];
    ckpt_tmpdir(dir, sizeof dir);
    save_or_die(dir, 10, SEED_OLD, 0);

    pid_t pid = spawn_save(dir, 20, SEED_NEW, 100); /* 16 tensors: ~1.6 s */
    snprintf(bin, sizeof bin, "%s/iter_0000020.tmp-%ld/model_optim_rng.bin", dir, (long)pid);
    struct stat sb;
    int waited = 0;
    while ((stat(bin, &sb) != 0 || sb.st_size == 0) && waited < 10000) {
        sleep_ms(5);
        waited += 5;
    }
    assert_true(waited < 10000); /* the child started writing */
    sleep_ms(250);
    assert_int_equal(kill(pid, SIGKILL), 0);
    int ws;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    assert_true(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);

    /* Killed mid-write: the half-written directory is there, but ignored. */
    assert_true(stat(bin, &sb) == 0);
    assert_false(ckpt_exists("%s/iter_0000020", dir));
    assert_int_equal(tracker(dir), 10);
    assert_int_equal(load_and_check(dir, DG_CKPT_LATEST, SEED_OLD), 10);

    /* The next save cleans up after the dead process. */
    save_or_die(dir, 30, SEED_NEW, 2);
    assert_int_equal(ckpt_count(dir, ".tmp-"), 0);
    assert_int_equal(load_and_check(dir, DG_CKPT_LATEST, SEED_NEW), 30);
    assert_int_equal(load_and_check(dir, 10, SEED_OLD), 10);
    ckpt_rmrf(dir);
}

/* Kill at many moments across the whole save (tensors, manifest, fsyncs,
 * rename, tracker, and replacing an existing iter_0000020): after each, the
 * tracker names a checkpoint that loads bitwise, and every iter_* directory
 * present is complete. */
static void test_sigkill_anywhere(void **state) {
    (void)state;
    char dir[256];
    ckpt_tmpdir(dir, sizeof dir);
    save_or_die(dir, 10, SEED_OLD, 0);
    int saw_old = 0, saw_new = 0;
    for (int k = 0; k < 16; k++) {
        pid_t pid = spawn_save(dir, 20, SEED_NEW, 15); /* ~240 ms of tensors */
        if (k < 15) {
            sleep_ms(k * 20);
            kill(pid, SIGKILL);
        }
        int ws;
        assert_int_equal(waitpid(pid, &ws, 0), pid);
        if (k == 15) assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
        int64_t it = tracker(dir);
        assert_true(it == 10 || it == 20);
        load_and_check(dir, DG_CKPT_LATEST, it == 10 ? SEED_OLD : SEED_NEW);
        if (ckpt_exists("%s/iter_0000020", dir)) load_and_check(dir, 20, SEED_NEW);
        load_and_check(dir, 10, SEED_OLD);
        saw_old += it == 10;
        saw_new += it == 20;
    }
    assert_true(saw_old > 0); /* the early kills interrupted the first save */
    assert_true(saw_new > 0);
    assert_int_equal(tracker(dir), 20);
    ckpt_rmrf(dir);
}

/* While a save runs, poll: whatever the tracker names loads bitwise, and an
 * iter_0000020 that exists at all is complete. */
static void test_tracker_after_directory(void **state) {
    (void)state;
    char dir[256];
    ckpt_tmpdir(dir, sizeof dir);
    save_or_die(dir, 10, SEED_OLD, 0);
    pid_t pid = spawn_save(dir, 20, SEED_NEW, 10);
    int polls = 0, done = 0, ws = 0;
    while (!done) {
        done = waitpid(pid, &ws, WNOHANG) == pid; /* poll once more after it exits */
        /* Load the iteration read, not DG_CKPT_LATEST: the child may move
         * the tracker between the two reads. */
        int64_t it = tracker(dir);
        assert_true(it == 10 || it == 20);
        assert_int_equal(load_and_check(dir, it, it == 10 ? SEED_OLD : SEED_NEW), it);
        if (ckpt_exists("%s/iter_0000020", dir)) load_and_check(dir, 20, SEED_NEW);
        polls++;
    }
    assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    assert_true(polls > 5);
    assert_int_equal(tracker(dir), 20);
    ckpt_rmrf(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sigkill_mid_write),
        cmocka_unit_test(test_sigkill_anywhere),
        cmocka_unit_test(test_tracker_after_directory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
