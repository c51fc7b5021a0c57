/* dg_ckpt_fs.c — see dg_ckpt_fs.h; also dg_crc32 (dg_checkpoint.h). */
#include "dg_ckpt_fs.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* ---- CRC-32 ---------------------------------------------------------------
 * zlib's own: the format promises zlib's CRC-32, and zlib's braided
 * implementation is about twice as fast as a portable slicing-by-8, which
 * matters to a background save sharing cores with training. crc32_z takes
 * a size_t length. */

uint32_t dg_crc32(uint32_t crc, const void *data, size_t n) {
    if (n == 0) return crc; /* zlib answers 0 for a NULL buffer, whatever crc: keep the chain */
    return (uint32_t)crc32_z((uLong)crc, data, n);
}

/* ---- files ---------------------------------------------------------------- */

int dg_ckpt_write_all(int fd, const void *buf, size_t n, const char *path, dg_err *err) {
    const char *p = buf;
    while (n > 0) {
        /* Linux caps one write at ~2 GiB; stay well below it. */
        ssize_t w = write(fd, p, n > (1u << 30) ? (1u << 30) : n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return dg_err_set(err, DG_EINPUT, "%s: write failed: %s", path, strerror(errno));
        }
        p += w;
        n -= (size_t)w;
    }
    return DG_OK;
}

int dg_ckpt_read_at(int fd, void *buf, size_t n, int64_t off, const char *path, dg_err *err) {
    char *p = buf;
    while (n > 0) {
        ssize_t r = pread(fd, p, n > (1u << 30) ? (1u << 30) : n, (off_t)off);
        if (r < 0) {
            if (errno == EINTR) continue;
            return dg_err_set(err, DG_EINPUT, "%s: read failed: %s", path, strerror(errno));
        }
        if (r == 0) return dg_err_set(err, DG_EINPUT, "%s: truncated at byte %lld", path, (long long)off);
        p += r;
        n -= (size_t)r;
        off += r;
    }
    return DG_OK;
}

int dg_ckpt_write_file(const char *path, const void *buf, size_t n, dg_err *err) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) return dg_err_set(err, DG_EINPUT, "%s: cannot create: %s", path, strerror(errno));
    int st = dg_ckpt_write_all(fd, buf, n, path, err);
    if (st == DG_OK && fsync(fd) != 0) st = dg_err_set(err, DG_EINPUT, "%s: fsync failed: %s", path, strerror(errno));
    if (close(fd) != 0 && st == DG_OK)
        st = dg_err_set(err, DG_EINPUT, "%s: close failed: %s", path, strerror(errno));
    return st;
}

int dg_ckpt_read_file(const char *path, char **buf, size_t *n, dg_err *err) {
    *buf = NULL;
    *n = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return dg_err_set(err, DG_EINPUT, "%s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return dg_err_set(err, DG_EINPUT, "%s: not a regular file", path);
    }
    char *b = dg_malloc((size_t)sb.st_size + 1);
    int st = dg_ckpt_read_at(fd, b, (size_t)sb.st_size, 0, path, err);
    close(fd);
    if (st != DG_OK) {
        dg_free(b);
        return st;
    }
    b[sb.st_size] = 0;
    *buf = b;
    *n = (size_t)sb.st_size;
    return DG_OK;
}

/* ---- directories ----------------------------------------------------------- */

int dg_ckpt_fsync_dir(const char *path, dg_err *err) {
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return dg_err_set(err, DG_EINPUT, "%s: cannot open directory: %s", path, strerror(errno));
    /* Some file systems refuse fsync on a directory (EINVAL); their rename
     * is then as durable as it gets, so that is not an error. */
    int st = DG_OK;
    if (fsync(fd) != 0 && errno != EINVAL)
        st = dg_err_set(err, DG_EINPUT, "%s: fsync failed: %s", path, strerror(errno));
    close(fd);
    return st;
}

int dg_ckpt_mkdirs(const char *path, dg_err *err) {
    char p[DG_CKPT_STR_LEN];
    if ((size_t)snprintf(p, sizeof p, "%s", path) >= sizeof p)
        return dg_err_set(err, DG_EINPUT, "%s: path too long", path);
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != 0) continue;
        char c = *s;
        *s = 0;
        if (mkdir(p, 0777) != 0 && errno != EEXIST)
            return dg_err_set(err, DG_EINPUT, "%s: cannot create directory: %s", p, strerror(errno));
        *s = c;
        if (c == 0) break;
    }
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return dg_err_set(err, DG_EINPUT, "%s: exists and is not a directory", path);
    return DG_OK;
}

static int remove_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0; /* keep going: best effort */
}

void dg_ckpt_remove_tree(const char *path) {
    nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- names ------------------------------------------------------------------ */

bool dg_ckpt_parse_iter_name(const char *name, int64_t *iteration) {
    if (strncmp(name, "iter_", 5) != 0) return false;
    const char *d = name + 5;
    size_t len = strlen(d);
    if (len < 7 || len > 18) return false;
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (!isdigit((unsigned char)d[i])) return false;
        v = v * 10 + (d[i] - '0');
    }
    *iteration = v;
    return true;
}

bool dg_ckpt_parse_tmp_name(const char *name, long *pid) {
    const char *t = strstr(name, ".tmp-");
    if (!t || !isdigit((unsigned char)t[5])) return false;
    char *end;
    long v = strtol(t + 5, &end, 10);
    if (*end != 0 && *end != '-') return false;
    *pid = v;
    return true;
}
