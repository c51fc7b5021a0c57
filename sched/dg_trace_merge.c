/* dg_trace_merge.c — one trace file for all ranks (see dg_trace.h).
 *
 * Each rank prints its part of the file into memory, the parts are
 * all-gathered as bytes (lengths first, then the parts padded to the
 * longest: a traced step's part is a few hundred KB) and world rank 0 writes
 * them one after the other. The times are moved onto the earliest recorder's
 * origin so that a stage's forward lines up under the send that fed it. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "dg_comm.h"
#include "dg_trace.h"

/* All-gather `n` bytes from every rank into all[size * n]. */
static int gather_bytes(dg_comm *c, const void *mine, void *all, int64_t n, dg_err *err) {
    dg_comm_req req = {0};
    int st = c->ops->all_gather(c, mine, all, n, DG_U8, &req, err);
    return st == DG_OK ? c->ops->wait(c, &req, err) : st;
}

static int write_parts(const char *path, const char *parts, const int64_t *len, int64_t stride, int n,
                       dg_err *err) {
    FILE *f = fopen(path, "w");
    if (!f) return dg_err_set(err, DG_EINPUT, "--trace %s: cannot open for writing: %s", path, strerror(errno));
    fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
    for (int r = 0; r < n; r++) {
        if (r) fprintf(f, ",\n");
        fwrite(parts + (size_t)r * (size_t)stride, 1, (size_t)len[r], f);
    }
    fprintf(f, "\n]}\n");
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return dg_err_set(err, DG_EINPUT, "--trace %s: write failed: %s", path, strerror(errno));
    return DG_OK;
}

int dg_trace_write_merged(const dg_trace *tr, dg_comm *world, const char *path, dg_err *err) {
    if (!world || world->size == 1) return dg_trace_write(tr, path, err);
    int n = world->size;
    double origin = dg_trace_origin(tr);
    double *origins = dg_malloc(sizeof(double) * (size_t)n);
    int st = gather_bytes(world, &origin, origins, (int64_t)sizeof origin, err);
    double base = origin;
    for (int r = 0; st == DG_OK && r < n; r++) base = DG_MIN(base, origins[r]);
    dg_free(origins);
    char *mine = NULL;
    size_t mine_len = 0;
    FILE *mem = open_memstream(&mine, &mine_len);
    if (!mem) return dg_err_set(err, DG_EINTERNAL, "trace merge: open_memstream failed");
    dg_trace_put_events(tr, mem, (int64_t)((origin - base) * 1e9));
    fclose(mem);
    int64_t my_len = (int64_t)mine_len, *len = dg_malloc(sizeof(int64_t) * (size_t)n);
    if (st == DG_OK) st = gather_bytes(world, &my_len, len, (int64_t)sizeof my_len, err);
    int64_t stride = 1;
    for (int r = 0; st == DG_OK && r < n; r++) stride = DG_MAX(stride, len[r]);
    char *padded = NULL, *parts = NULL;
    if (st == DG_OK) {
        padded = dg_calloc((size_t)stride, 1);
        memcpy(padded, mine, mine_len);
        parts = dg_malloc((size_t)stride * (size_t)n);
        st = gather_bytes(world, padded, parts, stride, err);
    }
    if (st == DG_OK && world->rank == 0) st = write_parts(path, parts, len, stride, n, err);
    free(mine); /* open_memstream's buffer comes from malloc */
    dg_free(padded);
    dg_free(parts);
    dg_free(len);
    return st;
}
