/* dg_team.h — how a kernel asks for threads without knowing who owns them.
 *
 * The scheduler owns the cores (pinned with hwloc); a kernel only receives a
 * dg_team and splits its rows over it. dg_team_run() calls fn(arg, begin, end)
 * on contiguous ranges that cover [0, n) exactly once, one range per thread,
 * and returns when all are done. The split depends only on n and nthreads,
 * and kernels never split a reduction across ranges, so results do not
 * depend on the thread count or on timing.
 *
 * A NULL team, or run == NULL, means "this thread alone": fn(arg, 0, n).
 */
#ifndef DG_TEAM_H
#define DG_TEAM_H

#include <stdint.h>

typedef void (*dg_range_fn)(void *arg, int64_t begin, int64_t end);

typedef struct dg_team {
    int nthreads;
    void (*run)(const struct dg_team *team, int64_t n, dg_range_fn fn, void *arg);
    void *impl; /* the scheduler's pool */
} dg_team;

static inline void dg_team_run(const dg_team *team, int64_t n, dg_range_fn fn, void *arg) {
    if (n <= 0) return;
    if (!team || !team->run || team->nthreads <= 1) {
        fn(arg, 0, n);
        return;
    }
    team->run(team, n, fn, arg);
}

/* The range thread `i` of `nth` takes out of [0, n): balanced, contiguous. */
static inline void dg_team_split(int64_t n, int nth, int i, int64_t *begin, int64_t *end) {
    int64_t q = n / nth, r = n % nth;
    *begin = i * q + (i < r ? i : r);
    *end = *begin + q + (i < r ? 1 : 0);
}

#endif /* DG_TEAM_H */
