/* dg_memlimit.c — see dg_memlimit.h. */
#include "dg_memlimit.h"

#include <stdint.h>
#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

/* /proc/self/statm: size resident shared text lib data dt, in pages. */
static void statm(uint64_t *vsize, uint64_t *rss, uint64_t *data) {
    unsigned long long v = 0, r = 0, sh = 0, tx = 0, lib = 0, d = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%llu %llu %llu %llu %llu %llu", &v, &r, &sh, &tx, &lib, &d) != 6) v = r = d = 0;
        fclose(f);
    }
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    *vsize = v * page;
    *rss = r * page;
    *data = d * page;
}

/* The cgroup's memory limit in bytes, or UINT64_MAX when none is set. */
static uint64_t cgroup_limit(void) {
    static const char *const paths[] = {"/sys/fs/cgroup/memory.max",
                                        "/sys/fs/cgroup/memory/memory.limit_in_bytes"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        FILE *f = fopen(paths[i], "r");
        if (!f) continue;
        unsigned long long v = 0;
        int ok = fscanf(f, "%llu", &v) == 1; /* "max" (no limit) does not scan */
        fclose(f);
        if (ok && v > 0) return v;
    }
    return UINT64_MAX;
}

static uint64_t less(uint64_t a, uint64_t used) { return a > used ? a - used : 0; }

size_t dg_mem_available_bytes(int ranks_on_node) {
    uint64_t ranks = ranks_on_node > 0 ? (uint64_t)ranks_on_node : 1;
    uint64_t vsize, rss, data;
    statm(&vsize, &rss, &data);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t avail = UINT64_MAX;
    if (pages > 0 && page > 0) avail = less((uint64_t)pages * (uint64_t)page / ranks, rss);
    uint64_t cg = cgroup_limit();
    if (cg != UINT64_MAX && less(cg / ranks, rss) < avail) avail = less(cg / ranks, rss);
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && less(rl.rlim_cur, vsize) < avail)
        avail = less(rl.rlim_cur, vsize);
    if (getrlimit(RLIMIT_DATA, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && less(rl.rlim_cur, data) < avail)
        avail = less(rl.rlim_cur, data);
    return avail > SIZE_MAX ? SIZE_MAX : (size_t)avail;
}
