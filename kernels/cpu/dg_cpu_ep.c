/* dg_cpu_ep.c — chunk sorting and row copies for expert parallelism (see dg_cpu_ep.h). */
#include "dg_cpu_ep.h"

#include <string.h>

int dg_cpu_ep_sort_chunks(const void *x, const int32_t *counts, int64_t P, int64_t G, int inverse,
                          int64_t n_rows, size_t row, void *out) {
    /* Offsets of every chunk in rank-major (r, e) order and in expert-major
     * (e, r) order; one walk of each order. */
    int64_t total = 0;
    for (int64_t i = 0; i < P * G; i++) {
        if (counts[i] < 0) return -1;
        total += counts[i];
    }
    if (total > n_rows) return -1;
    const char *src = x;
    char *dst = out;
    int64_t rank_off = 0;
    for (int64_t r = 0; r < P; r++) {
        for (int64_t e = 0; e < G; e++) {
            /* expert-major offset of chunk (r, e): all chunks of experts < e,
             * then those of ranks < r for expert e */
            int64_t exp_off = 0;
            for (int64_t e2 = 0; e2 < e; e2++)
                for (int64_t r2 = 0; r2 < P; r2++) exp_off += counts[r2 * G + e2];
            for (int64_t r2 = 0; r2 < r; r2++) exp_off += counts[r2 * G + e];
            int64_t n = counts[r * G + e];
            int64_t from = inverse ? exp_off : rank_off, to = inverse ? rank_off : exp_off;
            if (n > 0) memcpy(dst + (size_t)to * row, src + (size_t)from * row, (size_t)n * row);
            rank_off += n;
        }
    }
    if (n_rows > total) memset(dst + (size_t)total * row, 0, (size_t)(n_rows - total) * row);
    return 0;
}

void dg_cpu_ep_count_sum(const int32_t *counts, int64_t P, int64_t G, int over_ranks, int32_t *out) {
    int64_t n = over_ranks ? G : P;
    for (int64_t i = 0; i < n; i++) out[i] = 0;
    for (int64_t r = 0; r < P; r++)
        for (int64_t e = 0; e < G; e++) out[over_ranks ? e : r] += counts[r * G + e];
}

void dg_cpu_ep_copy_rows(const void *x, int64_t r0, int64_t n, size_t row, void *out) {
    if (n > 0) memcpy(out, (const char *)x + (size_t)r0 * row, (size_t)n * row);
}

void dg_cpu_ep_transpose(const void *x, int64_t A, int64_t B, int64_t G, size_t elem, void *out) {
    size_t blk = (size_t)G * elem;
    for (int64_t a = 0; a < A; a++)
        for (int64_t b = 0; b < B; b++)
            memcpy((char *)out + (size_t)(b * A + a) * blk, (const char *)x + (size_t)(a * B + b) * blk,
                   blk);
}
