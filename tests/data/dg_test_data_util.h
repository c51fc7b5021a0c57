/* dg_test_data_util.h — helpers shared by the data pipeline's C tests:
 * a scratch directory and small file patches. */
#ifndef DG_TEST_DATA_UTIL_H
#define DG_TEST_DATA_UTIL_H

#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A fresh directory under /tmp, removed by tdir_remove. */
static inline void tdir_make(char *out, size_t cap, const char *tag) {
    snprintf(out, cap, "/tmp/dg_%s_XXXXXX", tag);
    if (!mkdtemp(out)) {
        perror("mkdtemp");
        exit(1);
    }
}

static inline void tdir_remove(const char *dir) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", dir);
}

/* Overwrite n bytes of `path` at `off`. */
static inline void patch_file(const char *path, long off, const void *bytes, size_t n) {
    FILE *f = fopen(path, "r+b");
    if (!f || fseek(f, off, SEEK_SET) != 0 || fwrite(bytes, 1, n, f) != n) {
        perror(path);
        exit(1);
    }
    fclose(f);
}

static inline void shrink_file(const char *path, long by) {
    FILE *f = fopen(path, "rb");
    if (!f) exit(1);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    if (truncate(path, n - by) != 0) exit(1);
}

#endif /* DG_TEST_DATA_UTIL_H */
