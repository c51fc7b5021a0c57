/* dg_base.h — the floor under every room: status codes, error messages,
 * check macros, allocation.
 *
 * Conventions used across dagatron:
 *  - Functions that can fail return an int status: DG_OK (0) on success,
 *    DG_EINPUT (2) when the user's input (a flag, a file, a value) is wrong,
 *    DG_EINTERNAL (1) for everything else. DG_EINPUT is also the process exit
 *    code for bad input, as DEVELOPERS.md asks.
 *  - The reason goes into a caller-owned dg_err (one line, no trailing
 *    newline) so the CLI can print it once and library code never exits.
 *  - Library calls (BLAS, MPI, hwloc, pthreads, stdio) go through DG_CHECK*
 *    macros that report file:line, in the style of llm.c.
 */
#ifndef DG_BASE_H
#define DG_BASE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum { DG_OK = 0, DG_EINTERNAL = 1, DG_EINPUT = 2 };

#define DG_ERR_LEN 512

/* A one-line error message. msg[0] == 0 means "no error recorded". */
typedef struct dg_err {
    char msg[DG_ERR_LEN];
} dg_err;

/* Record a message (printf-style) and return `code`, so callers can write
 * `return dg_err_set(err, DG_EINPUT, "--seq-length: expected > 0, got %d", n);`
 * err may be NULL (the message is then dropped). */
int dg_err_set(dg_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Print "dagatron: <msg>" to stderr for a CLI front end. */
void dg_err_print(const dg_err *err);

/* Fatal internal failure: prints "file:line: what" and aborts. Only for
 * broken invariants and failed library calls, never for user input. */
void dg_fatal_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));
#define DG_FATAL(...) dg_fatal_at(__FILE__, __LINE__, __VA_ARGS__)

/* Assert an invariant in every build type (not compiled out by NDEBUG). */
#define DG_ASSERT(cond)                                                        \
    do {                                                                       \
        if (!(cond)) dg_fatal_at(__FILE__, __LINE__, "assertion failed: %s", #cond); \
    } while (0)

/* Check a call that returns 0 on success (pthreads, MPI_SUCCESS == 0). */
#define DG_CHECK0(call)                                                        \
    do {                                                                       \
        int dg_rc_ = (call);                                                   \
        if (dg_rc_ != 0) dg_fatal_at(__FILE__, __LINE__, "%s returned %d", #call, dg_rc_); \
    } while (0)

/* Propagate a non-zero dagatron status to the caller. */
#define DG_TRY(call)                                                           \
    do {                                                                       \
        int dg_st_ = (call);                                                   \
        if (dg_st_ != DG_OK) return dg_st_;                                    \
    } while (0)

/* Allocation through jemalloc (linked as the process allocator). These never
 * return NULL: running out of host memory is fatal with file:line. */
void *dg_malloc_at(size_t n, const char *file, int line);
void *dg_calloc_at(size_t count, size_t size, const char *file, int line);
void *dg_realloc_at(void *p, size_t n, const char *file, int line);
/* 64-byte aligned (cache line / AVX-512), zeroed. */
void *dg_aligned_alloc_at(size_t n, const char *file, int line);
#define dg_malloc(n) dg_malloc_at((n), __FILE__, __LINE__)
#define dg_calloc(c, s) dg_calloc_at((c), (s), __FILE__, __LINE__)
#define dg_realloc(p, n) dg_realloc_at((p), (n), __FILE__, __LINE__)
#define dg_aligned_alloc(n) dg_aligned_alloc_at((n), __FILE__, __LINE__)
void dg_free(void *p);

/* strdup through dg_malloc. */
char *dg_strdup(const char *s);

/* Monotonic wall clock in seconds. */
double dg_now(void);

/* splitmix64 (Steele, Lea, Flood): advance *state and return the next
 * 64 random bits. Every seeded stream in dagatron (initialisation, mock
 * data, samplers, tests) starts from it, so runs are bitwise reproducible
 * on any platform. */
#ifndef DG_HD /* __host__ __device__ in kernels/cuda: the dropout mask hashes with it */
#define DG_HD
#endif
static inline DG_HD uint64_t dg_splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

#define DG_MIN(a, b) ((a) < (b) ? (a) : (b))
#define DG_MAX(a, b) ((a) > (b) ? (a) : (b))
#define DG_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif /* DG_BASE_H */
