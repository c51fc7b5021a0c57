/* dg_trace_merge.c — one trace file for all ranks (see dg_trace.h).
 *
 * Each rank prints its part of the file into memory, the parts are
 * all-gathered as bytes (lengths first, then the parts padded to the
 * longest: a traced step's part is a few hundred KB) and world rank 0 writes
 * them one after the other. The times are moved onto the earliest recorder's
 * origin so that a stage's forward lines up under the send that fed it. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>

#include "dg_comm.h"
#include "dg_file_out.h"
#include "dg_trace.h"

/* All-gather `n` bytes from every rank into all[size * n]. */
static int gather_bytes(dg_comm *c, const void *mine, void *all, int64_t n, dg_err *err) {
    dg_comm_req req = {0};
    int st = c->ops->all_gather(c, mine, all, n, DG_U8, &req, err);
    return st == DG_OK ? c->ops->wait(c, &req, err) : st;
}

static int write_parts(const char *path, const char *parts, const int64_t *len, int64_t stride, int n,
                       dg_err *err) {
    dg_file_out o;
    DG_TRY(dg_file_out_open(&o, path, "--trace", err));
    FILE *f = o.f;
    fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
    for (int r = 0; r < n; r++) {
        if (r) fprintf(f, ",\n");
        fwrite(parts + (size_t)r * (size_t)stride, 1, (size_t)len[r], f);
    }
    fprintf(f, "\n]}\n");
    return dg_file_out_commit(&o, err);
}

/* The gathers below are collectives: a rank that failed to make its part
 * and returned would leave the others waiting in them for ever. So every
 * rank first says whether it can print its part, in the same gather as its
 * clock origin, and all stop together when one cannot. */
int dg_trace_write_merged(const dg_trace *tr, dg_comm *world, const char *path, dg_err *err) {
    if (!world || world->size == 1) {
        if (!tr) return dg_err_set(err, DG_EINTERNAL, "trace merge: this rank recorded no trace");
        return dg_trace_write(tr, path, err);
    }
    int n = world->size;
    char *mine = NULL;
    size_t mine_len = 0;
    FILE *mem = tr ? open_memstream(&mine, &mine_len) : NULL;
    double my[2] = {tr ? dg_trace_origin(tr) : 0, mem != NULL}; /* origin, can print */
    double *all = dg_malloc(sizeof my * (size_t)n);
    int st = gather_bytes(world, my, all, (int64_t)sizeof my, err), failed = -1;
    double base = my[0];
    for (int r = 0; st == DG_OK && r < n; r++) {
        if (all[2 * r + 1] == 0 && failed < 0) failed = r;
        if (all[2 * r + 1] != 0) base = DG_MIN(base, all[2 * r]);
    }
    dg_free(all);
    if (st == DG_OK && failed >= 0) {
        if (mem) fclose(mem);
        free(mine); /* open_memstream's buffer comes from malloc */
        if (!mem) return dg_err_set(err, DG_EINTERNAL, "trace merge: cannot print this rank's part (%s)",
                                    tr ? "open_memstream failed" : "no trace recorded");
        return dg_err_set(err, DG_EINTERNAL, "trace merge: rank %d could not print its part", failed);
    }
    if (mem) {
        if (st == DG_OK) dg_trace_put_events(tr, mem, (int64_t)((my[0] - base) * 1e9));
        fclose(mem);
    }
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
    free(mine);
    dg_free(padded);
    dg_free(parts);
    dg_free(len);
    return st;
}
