/* dg_memlimit.c — see dg_memlimit.h. */
#include "dg_memlimit.h"

#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

/* The address space in use now (the first field of /proc/self/statm). */
static int64_t vm_in_use(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    long long pages = 0;
    if (fscanf(f, "%lld", &pages) != 1) pages = 0;
    fclose(f);
    return (int64_t)pages * (int64_t)sysconf(_SC_PAGESIZE);
}

int64_t dg_mem_available_bytes(void) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    int64_t avail = pages > 0 && page > 0 ? (int64_t)pages * page : INT64_MAX;
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)INT64_MAX) {
        int64_t left = (int64_t)rl.rlim_cur - vm_in_use();
        avail = DG_MIN(avail, DG_MAX(left, (int64_t)0));
    }
    return avail;
}

int dg_mem_check(double need, const char *what, dg_err *err) {
    int64_t have = dg_mem_available_bytes();
    if (need <= (double)have) return DG_OK;
    return dg_err_set(err, DG_EINPUT, "%s needs %.2f GB, this rank has %.2f GB", what, need / 1e9, (double)have / 1e9);
}
