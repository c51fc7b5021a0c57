/* dg_base.c — errors, fatal checks and allocation (see dg_base.h). */
#define _POSIX_C_SOURCE 200809L
#include "dg_base.h"

#include <stdarg.h>
#include <string.h>
#include <time.h>

int dg_err_set(dg_err *err, int code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        /* Keep the promise of a single line: cut at the first newline. */
        char *nl = strchr(err->msg, '\n');
        if (nl) *nl = 0;
    }
    return code;
}

void dg_err_print(const dg_err *err) {
    fprintf(stderr, "dagatron: %s\n", (err && err->msg[0]) ? err->msg : "unknown error");
}

void dg_fatal_at(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "dagatron: fatal: %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

void *dg_malloc_at(size_t n, const char *file, int line) {
    void *p = malloc(n ? n : 1);
    if (!p) dg_fatal_at(file, line, "out of memory allocating %zu bytes", n);
    return p;
}

void *dg_calloc_at(size_t count, size_t size, const char *file, int line) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) dg_fatal_at(file, line, "out of memory allocating %zu x %zu bytes", count, size);
    return p;
}

void *dg_realloc_at(void *p, size_t n, const char *file, int line) {
    void *q = realloc(p, n ? n : 1);
    if (!q) dg_fatal_at(file, line, "out of memory reallocating %zu bytes", n);
    return q;
}

void *dg_aligned_alloc_at(size_t n, const char *file, int line) {
    size_t rounded = (n + 63) & ~(size_t)63;
    void *p = NULL;
    if (posix_memalign(&p, 64, rounded ? rounded : 64) != 0 || !p)
        dg_fatal_at(file, line, "out of memory allocating %zu aligned bytes", n);
    memset(p, 0, rounded ? rounded : 64);
    return p;
}

void dg_free(void *p) { free(p); }

char *dg_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = dg_malloc(n);
    memcpy(d, s, n);
    return d;
}

double dg_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
