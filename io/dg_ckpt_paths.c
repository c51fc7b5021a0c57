/* dg_ckpt_paths.c — see dg_ckpt_paths.h. */
#include "dg_ckpt_paths.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "dg_checkpoint.h"
#include "dg_ckpt_fs.h"

/* Drop the last component of p in place ("a/b" -> "a", "a" -> ".",
 * "/a" -> "/"). Returns false when there is nothing left to drop. */
static bool drop_last(char *p) {
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/') p[--n] = 0;
    char *slash = strrchr(p, '/');
    if (!slash) {
        if (!strcmp(p, ".")) return false;
        strcpy(p, ".");
    } else if (slash == p) {
        if (p[1] == 0) return false;
        p[1] = 0;
    } else {
        *slash = 0;
    }
    return true;
}

/* The absolute form of a path that may not exist yet: the realpath of its
 * longest existing prefix, then the rest as written. False if it does not
 * fit in len bytes. */
static bool canonical(const char *path, char *out, size_t len) {
    char abs[PATH_MAX], head[PATH_MAX], real[PATH_MAX], cwd[PATH_MAX];
    int n = path[0] != '/' && getcwd(cwd, sizeof cwd) ? snprintf(abs, sizeof abs, "%s/%s", cwd, path)
                                                      : snprintf(abs, sizeof abs, "%s", path);
    if (n < 0 || (size_t)n >= sizeof abs) return false;
    memcpy(head, abs, (size_t)n + 1);
    while (!realpath(head, real))
        if (!drop_last(head)) return false;
    const char *rest = abs + strlen(head);
    while (*rest == '/') rest++;
    n = snprintf(out, len, "%s%s%s", real, *rest && strcmp(real, "/") ? "/" : "", rest);
    if (n < 0 || (size_t)n >= len) return false;
    while (n > 1 && out[n - 1] == '/') out[--n] = 0;
    return true;
}

/* Do a and b name the same directory? By device and inode when both exist
 * (links and other spellings included); by absolute path while neither does. */
static bool same_place(const char *a, const char *b) {
    struct stat sa, sb;
    int ea = stat(a, &sa), eb = stat(b, &sb);
    if (ea == 0 && eb == 0) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    if (ea == 0 || eb == 0) return false;
    char ca[PATH_MAX], cb[PATH_MAX];
    return canonical(a, ca, sizeof ca) && canonical(b, cb, sizeof cb) && !strcmp(ca, cb);
}

bool dg_ckpt_newest_iter_dir(const char *dir, int64_t *iteration) {
    DIR *d = opendir(dir);
    if (!d) return false;
    bool found = false;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        int64_t it;
        if (!dg_ckpt_parse_iter_name(de->d_name, &it)) continue;
        if (!found || it > *iteration) *iteration = it;
        found = true;
    }
    closedir(d);
    return found;
}

int dg_ckpt_plan_load(const char *load, const char *save, dg_ckpt_load_plan *plan, dg_err *err) {
    *plan = DG_CKPT_LOAD_NONE;
    if (!load[0]) return DG_OK;
    bool is_save = save[0] && same_place(load, save);
    struct stat sb;
    if (stat(load, &sb) != 0) {
        if (errno == ENOENT && is_save) {
            *plan = DG_CKPT_LOAD_FRESH;
            return DG_OK;
        }
        return dg_err_set(err, DG_EINPUT,
                          "--load %s: %s (expected a checkpoint directory; leave --load out to start from scratch)",
                          load, strerror(errno));
    }
    if (!S_ISDIR(sb.st_mode))
        return dg_err_set(err, DG_EINPUT,
                          "--load %s: not a directory (expected the checkpoint directory that holds %s)", load,
                          DG_CKPT_TRACKER);
    if (dg_ckpt_has_tracker(load)) {
        int64_t it;
        DG_TRY(dg_ckpt_latest(load, &it, err));
        *plan = DG_CKPT_LOAD_RESUME;
        return DG_OK;
    }
    int64_t it;
    if (dg_ckpt_newest_iter_dir(load, &it))
        return dg_err_set(err, DG_EINPUT,
                          "--load %s: holds iter_%07" PRId64 " but no %s (write the iteration to resume from into it)",
                          load, it, DG_CKPT_TRACKER);
    if (is_save) {
        *plan = DG_CKPT_LOAD_FRESH;
        return DG_OK;
    }
    return dg_err_set(err, DG_EINPUT,
                      "--load %s: no checkpoint there (no %s); leave --load out to start from scratch, or give "
                      "--load the --save directory",
                      load, DG_CKPT_TRACKER);
}

/* Bytes as "1.23 GB" / "4.56 MB" / "789 bytes". */
static const char *size_str(uint64_t n, char *buf, size_t len) {
    if (n >= 1000000000ull) snprintf(buf, len, "%.2f GB", n / 1e9);
    else if (n >= 1000000ull) snprintf(buf, len, "%.2f MB", n / 1e6);
    else snprintf(buf, len, "%" PRIu64 " bytes", n);
    return buf;
}

int dg_ckpt_check_save_dir(const char *dir, uint64_t bytes, dg_err *err) {
    /* The nearest existing ancestor: dir itself, or where mkdir -p starts. */
    char at[PATH_MAX];
    if ((size_t)snprintf(at, sizeof at, "%s", dir) >= sizeof at)
        return dg_err_set(err, DG_EINPUT, "--save %s: path too long", dir);
    struct stat sb;
    while (stat(at, &sb) != 0) {
        if (errno != ENOENT && errno != ENOTDIR)
            return dg_err_set(err, DG_EINPUT, "--save %s: %s: %s", dir, at, strerror(errno));
        if (!drop_last(at)) return dg_err_set(err, DG_EINPUT, "--save %s: no existing parent directory", dir);
    }
    if (!S_ISDIR(sb.st_mode)) {
        if (!strcmp(at, dir))
            return dg_err_set(err, DG_EINPUT, "--save %s: exists and is not a directory", dir);
        return dg_err_set(err, DG_EINPUT, "--save %s: cannot be created: %s is not a directory", dir, at);
    }
    /* Writable: try it (root passes permission checks, not read-only mounts). */
    char probe[PATH_MAX + 64];
    snprintf(probe, sizeof probe, "%s/.dagatron-save-check.tmp-%ld", at, (long)getpid());
    int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        if (!strcmp(at, dir))
            return dg_err_set(err, DG_EINPUT, "--save %s: cannot write there: %s", dir, strerror(errno));
        return dg_err_set(err, DG_EINPUT, "--save %s: cannot be created in %s: %s", dir, at, strerror(errno));
    }
    close(fd);
    unlink(probe);
    struct statvfs vs;
    if (statvfs(at, &vs) != 0)
        return dg_err_set(err, DG_EINPUT, "--save %s: cannot read the free space of %s: %s", dir, at,
                          strerror(errno));
    uint64_t avail = (uint64_t)vs.f_bavail * (uint64_t)vs.f_frsize;
    if (avail < bytes) {
        char a[32], b[32];
        return dg_err_set(err, DG_EINPUT, "--save %s: a checkpoint needs %s, the file system of %s has %s free",
                          dir, size_str(bytes, a, sizeof a), at, size_str(avail, b, sizeof b));
    }
    return DG_OK;
}
