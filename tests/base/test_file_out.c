/* test_file_out.c — base/dg_file_out.h: an output file is replaced whole or
 * not at all, and nothing the writer did not create is ever removed (issue
 * 25, item 8). Real failures only: a full device, a full file (RLIMIT_FSIZE,
 * which stops root too), a path under a regular file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "dg_file_out.h"

static char dir[64];

static int setup(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/dg_file_out_XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[512];
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    if (d) closedir(d);
    return rmdir(dir);
}

static void path_of(char *p, size_t n, const char *name) {
    snprintf(p, n, "%s/%s", dir, name);
}

static void put(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

static void assert_holds(const char *path, const char *text) {
    char buf[256] = {0};
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    assert_string_equal(buf, text);
}

static int temporaries(void) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) n += strstr(e->d_name, ".tmp-") != NULL;
    closedir(d);
    return n;
}

static void expect_failure(int st, const dg_err *err, const char *a, const char *b) {
    if (st != DG_EINPUT || !strstr(err->msg, a) || !strstr(err->msg, b))
        print_error("got %d '%s', expected DG_EINPUT with '%s' and '%s'\n", st, err->msg, a, b);
    assert_int_equal(st, DG_EINPUT);
    assert_non_null(strstr(err->msg, a));
    assert_non_null(strstr(err->msg, b));
    assert_null(strchr(err->msg, '\n'));
}

/* A new file, then a replacement that keeps the old file's permissions. */
static void test_create_and_replace(void **state) {
    (void)state;
    char p[256];
    path_of(p, sizeof p, "a.txt");
    dg_err err = {{0}};
    assert_int_equal(dg_file_out_replace(p, "first", 5, NULL, &err), DG_OK);
    assert_holds(p, "first");
    assert_int_equal(chmod(p, 0640), 0);
    dg_file_out o;
    assert_int_equal(dg_file_out_open(&o, p, "-o", &err), DG_OK);
    fputs("second", o.f);
    assert_holds(p, "first"); /* nothing in place before commit */
    assert_int_equal(dg_file_out_commit(&o, &err), DG_OK);
    assert_holds(p, "second");
    struct stat sb;
    assert_int_equal(stat(p, &sb), 0);
    assert_int_equal(sb.st_mode & 07777, 0640);
    assert_int_equal(temporaries(), 0);
}

/* Abort, and close then abort: the old file stays, the temporary goes. */
static void test_abort_keeps_old(void **state) {
    (void)state;
    char p[256];
    path_of(p, sizeof p, "b.txt");
    put(p, "old");
    dg_err err = {{0}};
    dg_file_out o;
    assert_int_equal(dg_file_out_open(&o, p, NULL, &err), DG_OK);
    fputs("new", o.f);
    dg_file_out_abort(&o);
    assert_holds(p, "old");
    assert_int_equal(dg_file_out_open(&o, p, NULL, &err), DG_OK);
    fputs("new", o.f);
    assert_int_equal(dg_file_out_close(&o, &err), DG_OK);
    assert_int_equal(temporaries(), 1);
    dg_file_out_abort(&o);
    dg_file_out_abort(&o); /* released: a no-op */
    assert_holds(p, "old");
    assert_int_equal(temporaries(), 0);
}

/* The file fills mid-write (RLIMIT_FSIZE: EFBIG, as a full disk): one line
 * naming the file, the old one intact, no temporary. */
static void test_full_mid_write(void **state) {
    (void)state;
    char p[256];
    path_of(p, sizeof p, "c.txt");
    put(p, "old");
    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = 4096;
    void (*h)(int) = signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    dg_err err = {{0}};
    dg_file_out o;
    int st = dg_file_out_open(&o, p, "--flag", &err);
    static char big[8192];
    memset(big, 'x', sizeof big);
    if (st == DG_OK) fwrite(big, 1, sizeof big, o.f); /* unchecked, as the dump writers do */
    if (st == DG_OK) st = dg_file_out_commit(&o, &err);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    expect_failure(st, &err, "--flag ", "c.txt: write failed: File too large");
    assert_holds(p, "old");
    assert_int_equal(temporaries(), 0);
    /* dg_file_out_write reports the short write itself */
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    st = dg_file_out_open(&o, p, NULL, &err);
    if (st == DG_OK) st = dg_file_out_write(&o, big, sizeof big, &err);
    if (st != DG_OK) dg_file_out_abort(&o);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, h);
    expect_failure(st, &err, "c.txt: ", "File too large");
    assert_holds(p, "old");
    assert_int_equal(temporaries(), 0);
}

/* A device, directly or through a link: written into, its failure
 * reported, never removed. */
static void test_device_never_removed(void **state) {
    (void)state;
    char link[256], node[256];
    path_of(link, sizeof link, "full-link");
    path_of(node, sizeof node, "full-node");
    assert_int_equal(symlink("/dev/full", link), 0);
    int have_node = mknod(node, S_IFCHR | 0600, makedev(1, 7)) == 0;
    for (int k = 0; k < 1 + have_node; k++) {
        const char *p = k ? node : link;
        dg_err err = {{0}};
        dg_file_out o;
        assert_int_equal(dg_file_out_open(&o, p, NULL, &err), DG_OK);
        fputs("text", o.f);
        expect_failure(dg_file_out_commit(&o, &err), &err, p, "write failed: No space left on device");
        struct stat sb;
        assert_int_equal(lstat(p, &sb), 0);
        assert_true(k ? S_ISCHR(sb.st_mode) : S_ISLNK(sb.st_mode));
    }
    assert_int_equal(temporaries(), 0);
}

/* A link to a regular file: the file is replaced, the link stays; a
 * dangling link is written through. */
static void test_links_followed(void **state) {
    (void)state;
    char target[256], link[256], dangling[256], made[256];
    path_of(target, sizeof target, "target.txt");
    path_of(link, sizeof link, "link.txt");
    path_of(dangling, sizeof dangling, "dangling.txt");
    path_of(made, sizeof made, "made.txt");
    put(target, "old");
    assert_int_equal(symlink("target.txt", link), 0);
    assert_int_equal(symlink("made.txt", dangling), 0);
    dg_err err = {{0}};
    assert_int_equal(dg_file_out_replace(link, "new", 3, NULL, &err), DG_OK);
    struct stat sb;
    assert_int_equal(lstat(link, &sb), 0);
    assert_true(S_ISLNK(sb.st_mode));
    assert_holds(target, "new");
    assert_int_equal(dg_file_out_replace(dangling, "made", 4, NULL, &err), DG_OK);
    assert_int_equal(lstat(dangling, &sb), 0);
    assert_true(S_ISLNK(sb.st_mode));
    assert_holds(made, "made");
    assert_int_equal(temporaries(), 0);
}

/* Paths that cannot be written: one line naming the path; nothing changes. */
static void test_unwritable_paths(void **state) {
    (void)state;
    char file[256], under[256], sub[256];
    path_of(file, sizeof file, "plain.txt");
    path_of(under, sizeof under, "plain.txt/x");
    path_of(sub, sizeof sub, "sub");
    put(file, "old");
    assert_int_equal(mkdir(sub, 0700), 0);
    dg_err err = {{0}};
    dg_file_out o;
    expect_failure(dg_file_out_open(&o, under, "-o", &err), &err, "-o ",
                   "plain.txt/x: cannot open for writing: Not a directory");
    expect_failure(dg_file_out_open(&o, sub, NULL, &err), &err, "sub: ", "cannot open for writing: Is a directory");
    assert_holds(file, "old");
    struct stat sb;
    assert_int_equal(stat(sub, &sb), 0);
    assert_true(S_ISDIR(sb.st_mode));
    assert_int_equal(rmdir(sub), 0);
    assert_int_equal(temporaries(), 0);
}

/* A regular file this process has open as a standard stream (`-o
 * /dev/stdout > f`): written into, not replaced (the same inode). */
static void test_standard_stream_written_in_place(void **state) {
    (void)state;
    char p[256];
    path_of(p, sizeof p, "stdin.txt");
    put(p, "old");
    int saved = dup(0), fd = open(p, O_RDONLY);
    assert_true(saved >= 0 && fd >= 0);
    assert_int_equal(dup2(fd, 0), 0);
    close(fd);
    struct stat before, after;
    assert_int_equal(stat(p, &before), 0);
    dg_err err = {{0}};
    int st = dg_file_out_replace(p, "new", 3, NULL, &err);
    assert_int_equal(dup2(saved, 0), 0);
    close(saved);
    assert_int_equal(st, DG_OK);
    assert_int_equal(stat(p, &after), 0);
    assert_true(before.st_ino == after.st_ino);
    assert_holds(p, "new");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_create_and_replace, setup, teardown),
        cmocka_unit_test_setup_teardown(test_abort_keeps_old, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_mid_write, setup, teardown),
        cmocka_unit_test_setup_teardown(test_device_never_removed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_links_followed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unwritable_paths, setup, teardown),
        cmocka_unit_test_setup_teardown(test_standard_stream_written_in_place, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
