/* dg_file_out.c — see dg_file_out.h. */
#include "dg_file_out.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Record "<flag> <name>: <what>[: <strerror(e)>]" (e == 0: no reason known). */
static int fail(const dg_file_out *o, dg_err *err, const char *what, int e) {
    return dg_err_set(err, DG_EINPUT, "%s%s%s: %s%s%s", o->flag ? o->flag : "", o->flag ? " " : "", o->name, what,
                      e ? ": " : "", e ? strerror(e) : "");
}

static void release(dg_file_out *o) {
    dg_free(o->name);
    dg_free(o->target);
    dg_free(o->tmp);
    memset(o, 0, sizeof *o);
}

/* Is this file open as our standard input, output or error? A shell
 * redirection made it, and `-o /dev/stdout` names it: write into it. */
static int is_std_stream(const struct stat *sb) {
    for (int fd = 0; fd <= 2; fd++) {
        struct stat s;
        if (fstat(fd, &s) == 0 && s.st_dev == sb->st_dev && s.st_ino == sb->st_ino) return 1;
    }
    return 0;
}

/* Where the data goes: *target (dg_malloc'd) to replace through a
 * temporary, or NULL to write `path` directly. *mode: the existing file's
 * permissions to keep, or -1 for a new file. */
static int pick_target(dg_file_out *o, const char *path, char **target, int *mode, dg_err *err) {
    *target = NULL;
    *mode = -1;
    struct stat ls, sb;
    if (lstat(path, &ls) != 0) {
        if (errno != ENOENT) return fail(o, err, "cannot open for writing", errno);
        *target = dg_strdup(path); /* a new file (a missing directory fails at the temporary) */
        return DG_OK;
    }
    if (S_ISREG(ls.st_mode)) {
        sb = ls;
    } else if (!S_ISLNK(ls.st_mode) || stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        return DG_OK; /* a device, FIFO, socket, directory or dangling link: directly */
    }
    if (is_std_stream(&sb)) return DG_OK;
    if (S_ISLNK(ls.st_mode)) {
        char *real = realpath(path, NULL);
        if (!real) return fail(o, err, "cannot resolve the symbolic link", errno);
        *target = dg_strdup(real);
        free(real); /* realpath's buffer comes from malloc */
    } else {
        *target = dg_strdup(path);
    }
    *mode = (int)(sb.st_mode & 07777);
    return DG_OK;
}

/* Where a file's bytes go: its descriptor, and the first write error, kept
 * here because stdio's error flag keeps no reason (a large fwrite that
 * fails goes straight to write(2), and errno is gone by the check). */
struct dg_file_sink {
    int fd;
    int err;
};

static ssize_t sink_write(void *cookie, const char *buf, size_t n) {
    struct dg_file_sink *s = cookie;
    size_t done = 0;
    while (done < n) {
        /* Linux caps one write at ~2 GiB; stay well below it. */
        ssize_t w = write(s->fd, buf + done, DG_MIN(n - done, (size_t)1 << 30));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (!s->err) s->err = w < 0 ? errno : EIO;
            return 0; /* stdio's "error": it sets the stream's error flag */
        }
        done += (size_t)w;
    }
    return (ssize_t)done;
}

static int sink_close(void *cookie) {
    struct dg_file_sink *s = cookie;
    int rc = close(s->fd);
    if (rc != 0 && !s->err) s->err = errno;
    return rc;
}

/* o->f over fd: a stream whose failures keep their reason. */
static int attach(dg_file_out *o, int fd, dg_err *err) {
    o->sink = dg_malloc(sizeof *o->sink);
    o->sink->fd = fd;
    o->sink->err = 0;
    cookie_io_functions_t io = {.write = sink_write, .close = sink_close};
    o->f = fopencookie(o->sink, "w", io);
    if (o->f) return DG_OK;
    int st = fail(o, err, "cannot open for writing", errno);
    close(fd);
    dg_free(o->sink);
    o->sink = NULL;
    dg_file_out_abort(o); /* the temporary */
    return st;
}

int dg_file_out_open(dg_file_out *o, const char *path, const char *flag, dg_err *err) {
    memset(o, 0, sizeof *o);
    o->flag = flag;
    o->name = dg_strdup(path);
    int mode;
    int st = pick_target(o, path, &o->target, &mode, err);
    if (st != DG_OK) {
        release(o);
        return st;
    }
    int fd;
    if (o->target) {
        size_t len = strlen(o->target) + 32;
        o->tmp = dg_malloc(len);
        snprintf(o->tmp, len, "%s.tmp-%ld", o->target, (long)getpid());
        /* O_NOFOLLOW: a link planted at the temporary's name is not followed. */
        fd = open(o->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0666);
        if (fd >= 0 && mode >= 0 && fchmod(fd, (mode_t)mode) != 0) {
            /* keeping the old permissions is a courtesy, not a reason to fail */
        }
    } else {
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    }
    if (fd < 0) {
        st = fail(o, err, "cannot open for writing", errno);
        release(o);
        return st;
    }
    return attach(o, fd, err);
}

void dg_file_out_stdout(dg_file_out *o) {
    memset(o, 0, sizeof *o);
    o->f = stdout;
    o->name = dg_strdup("standard output");
}

/* The reason of the first failed write, or errno's now. */
static int reason(const dg_file_out *o) {
    return o->sink && o->sink->err ? o->sink->err : errno;
}

int dg_file_out_write(dg_file_out *o, const void *buf, size_t n, dg_err *err) {
    if (n == 0 || fwrite(buf, 1, n, o->f) == n) return DG_OK;
    return fail(o, err, "write failed", reason(o));
}

int dg_file_out_close(dg_file_out *o, dg_err *err) {
    if (o->closed) return DG_OK;
    const char *what = NULL;
    int e = 0;
    errno = 0;
    if (fflush(o->f) != 0 || ferror(o->f)) what = "write failed", e = reason(o);
    else if (o->tmp && fsync(o->sink->fd) != 0) what = "fsync failed", e = errno;
    if (o->sink) {
        int rc = fclose(o->f);
        if (rc != 0 && !what) what = "close failed", e = reason(o);
        dg_free(o->sink);
        o->sink = NULL;
    }
    o->f = NULL;
    o->closed = 1;
    if (!what) return DG_OK;
    int st = fail(o, err, what, e);
    dg_file_out_abort(o);
    return st;
}

/* fsync the directory holding `path`, so its rename is durable. Some file
 * systems refuse fsync on a directory (EINVAL): their rename is then as
 * durable as it gets. */
static int fsync_parent(const char *path, int *e) {
    const char *slash = strrchr(path, '/');
    char *dir = slash ? dg_strdup(path) : dg_strdup(".");
    if (slash) dir[slash == path ? 1 : slash - path] = 0;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), ok = fd >= 0;
    if (!ok) *e = errno;
    if (ok && fsync(fd) != 0 && errno != EINVAL) *e = errno, ok = 0;
    if (fd >= 0) close(fd);
    dg_free(dir);
    return ok;
}

int dg_file_out_commit(dg_file_out *o, dg_err *err) {
    DG_TRY(dg_file_out_close(o, err));
    int st = DG_OK, e = 0;
    if (o->tmp && rename(o->tmp, o->target) != 0) {
        st = fail(o, err, "cannot rename the finished temporary file over it", errno);
        dg_file_out_abort(o);
        return st;
    }
    if (o->tmp && !fsync_parent(o->target, &e)) st = fail(o, err, "fsync of its directory failed", e);
    release(o);
    return st;
}

void dg_file_out_abort(dg_file_out *o) {
    if (o->sink) {
        fclose(o->f);
        dg_free(o->sink);
    }
    if (o->tmp) unlink(o->tmp); /* ours alone: the target is never touched */
    release(o);
}

int dg_file_out_replace(const char *path, const void *buf, size_t n, const char *flag, dg_err *err) {
    dg_file_out o;
    DG_TRY(dg_file_out_open(&o, path, flag, err));
    int st = dg_file_out_write(&o, buf, n, err);
    if (st != DG_OK) {
        dg_file_out_abort(&o);
        return st;
    }
    return dg_file_out_commit(&o, err);
}

int dg_stdout_flush(dg_err *err) {
    dg_file_out o;
    dg_file_out_stdout(&o);
    return dg_file_out_commit(&o, err);
}
