/* dg_train_trace.c — the trace's process names and the start-up check of
 * its path (see dg_train_trace.h). */
#include "dg_train_trace.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void dg_train_trace_name(dg_trace *tr, const dg_grid *g) {
    char name[96];
    const dg_grid_coord *c = &g->coord;
    const dg_grid_sizes *s = &g->sizes;
    int n = snprintf(name, sizeof name, "rank %d (pp %d, tp %d", g->rank, c->pp, c->tp);
    if (s->cp > 1 && n < (int)sizeof name) n += snprintf(name + n, sizeof name - (size_t)n, ", cp %d", c->cp);
    if (s->ep > 1 && n < (int)sizeof name) n += snprintf(name + n, sizeof name - (size_t)n, ", ep %d", c->ep);
    if (s->dp > 1 && n < (int)sizeof name) n += snprintf(name + n, sizeof name - (size_t)n, ", dp %d", c->dp);
    if (n < (int)sizeof name) snprintf(name + n, sizeof name - (size_t)n, ")");
    dg_trace_set_name(tr, name);
}

/* A file can be created in dir: create one with O_EXCL (so it is ours) and
 * remove it. */
static int probe_dir(const char *path, const char *dir, dg_err *err) {
    char probe[PATH_MAX + 64];
    if ((size_t)snprintf(probe, sizeof probe, "%s/.dagatron-trace-check.tmp-%ld", dir, (long)getpid()) >= sizeof probe)
        return dg_err_set(err, DG_EINPUT, "--trace %s: path too long", path);
    int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return dg_err_set(err, DG_EINPUT, "--trace %s: cannot write in %s: %s", path, dir, strerror(errno));
    close(fd);
    unlink(probe);
    return DG_OK;
}

int dg_train_trace_check_path(const char *path, dg_err *err) {
    struct stat sb;
    int exists = stat(path, &sb) == 0;
    if (!exists && errno != ENOENT && errno != ENOTDIR)
        return dg_err_set(err, DG_EINPUT, "--trace %s: %s", path, strerror(errno));
    if (exists && S_ISDIR(sb.st_mode))
        return dg_err_set(err, DG_EINPUT, "--trace %s: is a directory (expected the file to write the trace to)",
                          path);
    if (exists && !S_ISREG(sb.st_mode)) { /* a device or a FIFO: written in place */
        if (access(path, W_OK) != 0)
            return dg_err_set(err, DG_EINPUT, "--trace %s: cannot write there: %s", path, strerror(errno));
        return DG_OK;
    }
    if (exists && access(path, W_OK) != 0)
        return dg_err_set(err, DG_EINPUT, "--trace %s: cannot write there: %s", path, strerror(errno));
    /* The directory the file goes in (and its temporary beside it). */
    char dir[PATH_MAX];
    if ((size_t)snprintf(dir, sizeof dir, "%s", path) >= sizeof dir)
        return dg_err_set(err, DG_EINPUT, "--trace %s: path too long", path);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) dir[1] = 0; /* "/name": the root */
    else *slash = 0;
    if (stat(dir, &sb) != 0)
        return dg_err_set(err, DG_EINPUT, "--trace %s: directory %s: %s (it is not created)", path, dir,
                          strerror(errno));
    if (!S_ISDIR(sb.st_mode)) return dg_err_set(err, DG_EINPUT, "--trace %s: %s is not a directory", path, dir);
    return probe_dir(path, dir, err);
}
