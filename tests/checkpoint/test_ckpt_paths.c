/* test_ckpt_paths.c — what --load means and whether --save can take a
 * checkpoint (io/dg_ckpt_paths.h), decided before a run starts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <unistd.h>

#include "ckpt_test_util.h"
#include "dg_ckpt_paths.h"

static void expect_refusal(int st, const dg_err *err, const char *what) {
    if (st != DG_EINPUT || !strstr(err->msg, what) || strchr(err->msg, '\n'))
        print_error("got %d '%s', expected DG_EINPUT saying '%s'\n", st, err->msg, what);
    assert_int_equal(st, DG_EINPUT);
    assert_non_null(strstr(err->msg, what));
    assert_null(strchr(err->msg, '\n'));
}

static dg_ckpt_load_plan plan_ok(const char *load, const char *save) {
    dg_ckpt_load_plan p = DG_CKPT_LOAD_RESUME + 1;
    dg_err err = {{0}};
    int st = dg_ckpt_plan_load(load, save, &p, &err);
    if (st) print_error("plan %s / %s: %s\n", load, save, err.msg);
    assert_int_equal(st, DG_OK);
    return p;
}

static void plan_refused(const char *load, const char *save, const char *what) {
    dg_ckpt_load_plan p;
    dg_err err = {{0}};
    expect_refusal(dg_ckpt_plan_load(load, save, &p, &err), &err, what);
}

static void test_plan_load(void **state) {
    (void)state;
    char dir[256], a[512], b[1024], rel[512];
    ckpt_tmpdir(dir, sizeof dir);
    assert_int_equal(plan_ok("", ""), DG_CKPT_LOAD_NONE);
    assert_int_equal(plan_ok("", "/anywhere"), DG_CKPT_LOAD_NONE);

    /* missing: refused unless it is --save */
    snprintf(a, sizeof a, "%s/new", dir);
    plan_refused(a, "", "No such file or directory");
    snprintf(b, sizeof b, "%s/other", dir);
    plan_refused(a, b, "No such file or directory");
    assert_int_equal(plan_ok(a, a), DG_CKPT_LOAD_FRESH);
    snprintf(b, sizeof b, "%s/./new//", dir);
    assert_int_equal(plan_ok(a, b), DG_CKPT_LOAD_FRESH);
    /* a relative spelling of the same missing directory */
    char cwd[512];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(dir), 0);
    snprintf(rel, sizeof rel, "new");
    assert_int_equal(plan_ok(rel, a), DG_CKPT_LOAD_FRESH);
    assert_int_equal(chdir(cwd), 0);

    /* a regular file */
    snprintf(a, sizeof a, "%s/file", dir);
    ckpt_write_text(a, "x");
    plan_refused(a, a, "not a directory");

    /* an empty directory: refused, unless it is --save (also via a symlink) */
    snprintf(a, sizeof a, "%s/empty", dir);
    assert_int_equal(mkdir(a, 0777), 0);
    plan_refused(a, "", "no checkpoint there");
    assert_int_equal(plan_ok(a, a), DG_CKPT_LOAD_FRESH);
    snprintf(b, sizeof b, "%s/link", dir);
    assert_int_equal(symlink(a, b), 0);
    assert_int_equal(plan_ok(b, a), DG_CKPT_LOAD_FRESH);

    /* checkpoints without their tracker: refused even when it is --save */
    snprintf(a, sizeof a, "%s/ck", dir);
    ckpt_set s;
    ckpt_set_make(&s, 1, 1);
    dg_ckpt_meta m;
    ckpt_meta_make(&m, 20);
    dg_err err = {{0}};
    assert_int_equal(dg_ckpt_save(a, &m, s.t, s.n, NULL, &err), DG_OK);
    ckpt_set_free(&s);
    assert_int_equal(plan_ok(a, a), DG_CKPT_LOAD_RESUME);
    assert_int_equal(plan_ok(a, ""), DG_CKPT_LOAD_RESUME);
    snprintf(b, sizeof b, "%s/latest_checkpointed_iteration.txt", a);
    ckpt_write_text(b, "7");
    plan_refused(a, a, "iter_0000007 does not exist");
    assert_int_equal(unlink(b), 0);
    plan_refused(a, a, "holds iter_0000020 but no latest_checkpointed_iteration.txt");
    ckpt_rmrf(dir);
}

static void save_refused(const char *dir, uint64_t bytes, const char *what) {
    dg_err err = {{0}};
    expect_refusal(dg_ckpt_check_save_dir(dir, bytes, &err), &err, what);
}

static void test_check_save(void **state) {
    (void)state;
    char dir[256], a[512], b[512];
    ckpt_tmpdir(dir, sizeof dir);
    dg_err err = {{0}};
    assert_int_equal(dg_ckpt_check_save_dir(dir, 1000, &err), DG_OK);
    /* creatable, and not created by the check */
    snprintf(a, sizeof a, "%s/x/y/z", dir);
    assert_int_equal(dg_ckpt_check_save_dir(a, 1000, &err), DG_OK);
    assert_false(ckpt_exists("%s/x", dir));
    assert_int_equal(ckpt_count(dir, ".tmp-"), 0); /* the probe file is gone */

    snprintf(a, sizeof a, "%s/file", dir);
    ckpt_write_text(a, "x");
    save_refused(a, 1000, "exists and is not a directory");
    snprintf(b, sizeof b, "%s/file/sub/dir", dir);
    save_refused(b, 1000, "is not a directory");
    save_refused("/proc", 1000, "cannot write there");
    save_refused("/proc/dagatron-test/ckpt", 1000, "cannot be created in /proc");
    /* More than any disk has: the free-space rule, named in the message. */
    save_refused(dir, UINT64_MAX / 2, "a checkpoint needs");
    assert_int_equal(ckpt_count(dir, ".tmp-"), 0);
    ckpt_rmrf(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_load),
        cmocka_unit_test(test_check_save),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
