/* dg_read_file.c — a whole input file read within a bound (see dg_read_file.h). */
#include "dg_read_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *kind_of(mode_t m) {
    return S_ISDIR(m)    ? "a directory"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISSOCK(m) ? "a socket"
                         : "not a file";
}

/* Read fd to its end into a buffer grown as needed, up to max_bytes + 1
 * bytes: one more than the bound shows that the file holds more. */
static int read_all(int fd, const char *what, size_t size_hint, size_t max_bytes, char **buf, size_t *n,
                    dg_err *err) {
    size_t cap = DG_MIN(size_hint, max_bytes) + 1, len = 0;
    char *b = malloc(cap + 1);
    if (!b) return dg_err_set(err, DG_EINPUT, "%s: out of memory reading %zu bytes", what, cap);
    for (;;) {
        if (len == cap) { /* more than fstat said: it grew, or a size-less file */
            if (cap > max_bytes) break;
            size_t want = cap > max_bytes / 2 ? max_bytes + 1 : 2 * cap;
            char *nb = realloc(b, want + 1);
            if (!nb) {
                free(b);
                return dg_err_set(err, DG_EINPUT, "%s: out of memory reading %zu bytes", what, want);
            }
            b = nb;
            cap = want;
        }
        ssize_t got = read(fd, b + len, cap - len);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            int e = errno;
            free(b);
            return dg_err_set(err, DG_EINPUT, "%s: cannot read: %s", what, strerror(e));
        }
        if (got == 0) break;
        len += (size_t)got;
    }
    if (len > max_bytes) {
        free(b);
        return dg_err_set(err, DG_EINPUT, "%s: grew past %zu bytes while being read, the most allowed", what,
                          max_bytes);
    }
    b[len] = 0;
    *buf = b;
    if (n) *n = len;
    return DG_OK;
}

int dg_read_file(const char *path, const char *what, size_t max_bytes, char **buf, size_t *n, dg_err *err) {
    *buf = NULL;
    if (n) *n = 0;
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; fstat refuses it next. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return dg_err_set(err, DG_EINPUT, "%s: cannot read: %s", what, strerror(errno));
    struct stat sb;
    int st = DG_OK;
    if (fstat(fd, &sb) != 0) st = dg_err_set(err, DG_EINPUT, "%s: cannot read: %s", what, strerror(errno));
    else if (!S_ISREG(sb.st_mode))
        st = dg_err_set(err, DG_EINPUT, "%s: not a regular file (%s)", what, kind_of(sb.st_mode));
    else if ((uintmax_t)sb.st_size > max_bytes)
        st = dg_err_set(err, DG_EINPUT, "%s: %jd bytes, more than the %zu allowed", what,
                        (intmax_t)sb.st_size, max_bytes);
    if (st == DG_OK) st = read_all(fd, what, (size_t)sb.st_size, max_bytes, buf, n, err);
    close(fd);
    return st;
}
