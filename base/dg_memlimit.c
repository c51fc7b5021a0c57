/* dg_memlimit.c — see dg_memlimit.h. */
#include "dg_memlimit.h"

#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

/* /proc/self/statm: size resident shared text lib data dt, in pages. */
static void statm(int64_t *vsize, int64_t *rss, int64_t *data) {
    long long v = 0, r = 0, sh = 0, tx = 0, lib = 0, d = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%lld %lld %lld %lld %lld %lld", &v, &r, &sh, &tx, &lib, &d) != 6) v = r = d = 0;
        fclose(f);
    }
    int64_t page = (int64_t)sysconf(_SC_PAGESIZE);
    *vsize = v * page;
    *rss = r * page;
    *data = d * page;
}

/* The cgroup's memory limit in bytes, or INT64_MAX when none is set. */
static int64_t cgroup_limit(void) {
    static const char *const paths[] = {"/sys/fs/cgroup/memory.max",
                                        "/sys/fs/cgroup/memory/memory.limit_in_bytes"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        FILE *f = fopen(paths[i], "r");
        if (!f) continue;
        long long v = 0;
        int ok = fscanf(f, "%lld", &v) == 1; /* "max" (no limit) does not scan */
        fclose(f);
        if (ok && v > 0) return v;
    }
    return INT64_MAX;
}

/* What a limit leaves above `used`, never negative. */
static int64_t left(int64_t limit, int64_t used) { return limit > used ? limit - used : 0; }

/* An rlimit's soft value, or INT64_MAX when unlimited. */
static int64_t rlimit(int which) {
    struct rlimit rl;
    if (getrlimit(which, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= (rlim_t)INT64_MAX)
        return INT64_MAX;
    return (int64_t)rl.rlim_cur;
}

int64_t dg_mem_available_bytes(int ranks_on_node) {
    int64_t ranks = ranks_on_node > 0 ? ranks_on_node : 1;
    int64_t vsize, rss, data;
    statm(&vsize, &rss, &data);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    int64_t avail = INT64_MAX;
    if (pages > 0 && page > 0) avail = left((int64_t)pages * page / ranks, rss);
    int64_t cg = cgroup_limit();
    if (cg != INT64_MAX) avail = DG_MIN(avail, left(cg / ranks, rss));
    int64_t as = rlimit(RLIMIT_AS), ds = rlimit(RLIMIT_DATA);
    if (as != INT64_MAX) avail = DG_MIN(avail, left(as, vsize));
    if (ds != INT64_MAX) avail = DG_MIN(avail, left(ds, data));
    return avail;
}

int dg_mem_check(double need, const char *what, dg_err *err) {
    int64_t have = dg_mem_available_bytes(1);
    if (need <= (double)have) return DG_OK;
    return dg_err_set(err, DG_EINPUT, "%s needs %.2f GB, this rank has %.2f GB", what, need / 1e9, (double)have / 1e9);
}
