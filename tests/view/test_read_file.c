/* test_read_file.c — base/dg_read_file.c, what the trace, graph dump and
 * device profile readers read through (issue 25, item 11): a regular file
 * reads whole; a file over the bound is refused from its size before any
 * is read; one whose size says nothing (/proc: 0) is read until it passes
 * the bound, then refused (the cap while reading, as for a file that
 * grows); /dev/zero, a directory, a FIFO and a missing file are refused in
 * one line naming them; nothing is left allocated on a refusal. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "dg_read_file.h"

static void expect_refused(const char *path, size_t max, const char *words) {
    char *buf = (char *)1;
    size_t n = 7;
    dg_err err = {{0}};
    assert_int_equal(dg_read_file(path, "--x", max, &buf, &n, &err), DG_EINPUT);
    assert_null(buf);
    assert_int_equal(n, 0);
    if (!strstr(err.msg, words) || strncmp(err.msg, "--x: ", 5) || strchr(err.msg, '\n'))
        fail_msg("'%s' lacks '%s'", err.msg, words);
}

static void test_regular(void **state) {
    (void)state;
    const char *path = "test_read_file.txt";
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs("{\"a\": 1}", f);
    fclose(f);
    char *buf = NULL;
    size_t n = 0;
    dg_err err = {{0}};
    assert_int_equal(dg_read_file(path, "--x", 8, &buf, &n, &err), DG_OK);
    assert_int_equal(n, 8);
    assert_string_equal(buf, "{\"a\": 1}");
    dg_free(buf);
    expect_refused(path, 7, "8 bytes, more than the 7 allowed"); /* fstat's size, before reading */
    remove(path);
}

static void test_not_regular(void **state) {
    (void)state;
    expect_refused("/dev/zero", 1 << 20, "not a regular file (a character device)");
    expect_refused(".", 1 << 20, "not a regular file (a directory)");
    expect_refused("test_read_file.missing", 1 << 20, "cannot read: No such file or directory");
    const char *fifo = "test_read_file.fifo";
    remove(fifo);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    alarm(20); /* an open that waits for a writer fails the test */
    expect_refused(fifo, 1 << 20, "not a regular file (a FIFO)");
    alarm(0);
    remove(fifo);
}

static void test_cap_while_reading(void **state) {
    (void)state;
    /* /proc/self/maps: a regular file of size 0 with a few KB in it */
    expect_refused("/proc/self/maps", 100, "grew past 100 bytes while being read");
    char *buf = NULL;
    size_t n = 0;
    dg_err err = {{0}};
    assert_int_equal(dg_read_file("/proc/self/maps", "--x", 1 << 24, &buf, &n, &err), DG_OK);
    assert_true(n > 100 && strlen(buf) == n);
    dg_free(buf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_regular),
        cmocka_unit_test(test_not_regular),
        cmocka_unit_test(test_cap_while_reading),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
