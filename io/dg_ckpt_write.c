/* dg_ckpt_write.c — the steps of a sharded save (dg_ckpt_shards.h): rank
 * 0's temporary directory, each rank's data file and CRC sidecar, rank 0's
 * manifest, install, tracker and pruning. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dg_ckpt_fs.h"
#include "dg_ckpt_shards.h"
#include "dg_file_out.h"

#define PATH_LEN (DG_CKPT_STR_LEN + 160)

int dg_ckpt_tmp_dir(char *buf, size_t len, const char *dir, int64_t iteration, long pid, dg_err *err) {
    char final[DG_CKPT_STR_LEN + 32];
    DG_TRY(dg_ckpt_iter_dir(final, sizeof final, dir, iteration, err));
    if ((size_t)snprintf(buf, len, "%s.tmp-%ld", final, pid) >= len)
        return dg_err_set(err, DG_EINPUT, "%s: checkpoint path too long", dir);
    return DG_OK;
}

/* Remove what killed saves left behind: "*.tmp-<pid>" entries whose process
 * is gone, and our own (from an earlier failed save of this process). A live
 * process's temporary directory is left alone: it may be saving right now. */
static void remove_stale(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    long me = (long)getpid();
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        long pid;
        if (!dg_ckpt_parse_tmp_name(de->d_name, &pid)) continue;
        if (pid != me && (pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH)) continue;
        char p[DG_CKPT_STR_LEN + 300];
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        dg_ckpt_remove_tree(p);
    }
    closedir(d);
}

static void reached(const dg_ckpt_save_opts *o, dg_ckpt_stage stage, int index) {
    if (o->at) o->at(o->ctx, stage, index);
}

/* Move the finished <tmp> to <final>. If <final> exists (saving an
 * iteration again), swap the two atomically so there is never a moment with
 * no iter_N directory; the old one ends up at <tmp> and is removed. File
 * systems without RENAME_EXCHANGE get a two-step move (the old directory
 * goes to a *.tmp-* name first, which readers ignore). */
static int install_dir(const char *tmp, const char *final, dg_err *err) {
    if (rename(tmp, final) == 0) return DG_OK;
    if (errno != ENOTEMPTY && errno != EEXIST)
        return dg_err_set(err, DG_EINPUT, "%s: cannot rename %s to it: %s", final, tmp, strerror(errno));
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, final, RENAME_EXCHANGE) == 0) {
        dg_ckpt_remove_tree(tmp);
        return DG_OK;
    }
    char old[DG_CKPT_STR_LEN + 128];
    if ((size_t)snprintf(old, sizeof old, "%s-old", tmp) >= sizeof old)
        return dg_err_set(err, DG_EINPUT, "%s: checkpoint path too long", tmp);
    if (rename(final, old) != 0 || rename(tmp, final) != 0)
        return dg_err_set(err, DG_EINPUT, "%s: cannot replace it with %s: %s", final, tmp, strerror(errno));
    dg_ckpt_remove_tree(old);
    return DG_OK;
}

static int cmp_desc(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x < y) - (x > y);
}

/* Delete iter_* directories beyond the newest keep_last, never `keep_it`
 * (just written) nor the tracker's. Each goes to a *.tmp-* name first, so a
 * crash mid-delete leaves no half-deleted directory that looks complete. */
static int prune(const char *dir, int keep_last, int64_t keep_it, dg_err *err) {
    if (keep_last <= 0) return DG_OK;
    int64_t tracked = -1;
    if (dg_ckpt_latest(dir, &tracked, NULL) != DG_OK) tracked = -1;
    DIR *d = opendir(dir);
    if (!d) return dg_err_set(err, DG_EINPUT, "%s: cannot list: %s", dir, strerror(errno));
    int64_t *its = NULL;
    int n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        int64_t it;
        if (!dg_ckpt_parse_iter_name(de->d_name, &it)) continue;
        if (n == cap) its = dg_realloc(its, sizeof *its * (size_t)(cap = cap ? 2 * cap : 16));
        its[n++] = it;
    }
    closedir(d);
    qsort(its, (size_t)n, sizeof *its, cmp_desc);
    int st = DG_OK;
    for (int i = keep_last; i < n && st == DG_OK; i++) {
        if (its[i] == keep_it || its[i] == tracked) continue;
        char p[DG_CKPT_STR_LEN + 32], gone[DG_CKPT_STR_LEN + 96];
        st = dg_ckpt_iter_dir(p, sizeof p, dir, its[i], err);
        if (st != DG_OK) break;
        snprintf(gone, sizeof gone, "%s.tmp-%ld-del", p, (long)getpid());
        if (rename(p, gone) != 0)
            st = dg_err_set(err, DG_EINPUT, "%s: checkpoint saved, but cannot remove this old one: %s", p,
                            strerror(errno));
        else
            dg_ckpt_remove_tree(gone);
    }
    dg_free(its);
    return st;
}


int dg_ckpt_begin(const char *dir, int64_t iteration, long pid, dg_err *err) {
    DG_TRY(dg_ckpt_mkdirs(dir, err));
    remove_stale(dir);
    char tmp[PATH_LEN];
    DG_TRY(dg_ckpt_tmp_dir(tmp, sizeof tmp, dir, iteration, pid, err));
    if (mkdir(tmp, 0777) != 0)
        return dg_err_set(err, DG_EINPUT, "%s: cannot create directory: %s", tmp, strerror(errno));
    return DG_OK;
}

void dg_ckpt_abort(const char *dir, int64_t iteration, long pid) {
    char tmp[PATH_LEN];
    if (dg_ckpt_tmp_dir(tmp, sizeof tmp, dir, iteration, pid, NULL) == DG_OK) dg_ckpt_remove_tree(tmp);
}

/* Append piece p as entry e to fd (padding up to e->offset first); *crc gets
 * its CRC. *pos: the file's size so far. */
static int write_box(int fd, const char *path, const dg_ckpt_piece *p, const dg_ckpt_entry *e, int64_t *pos,
                     uint32_t *crc, dg_err *err) {
    static const char zeros[64] = {0};
    DG_TRY(dg_ckpt_write_all(fd, zeros, (size_t)(e->offset - *pos), path, err));
    const void *src = p->data;
    void *packed = NULL;
    if (!dg_ckpt_piece_contiguous(p) && e->nbytes > 0) {
        int64_t rm[DG_MAX_DIMS];
        dg_ckpt_row_major(p->shape, p->ndim, rm);
        packed = dg_malloc((size_t)e->nbytes);
        dg_ckpt_box_copy(packed, rm, p->data, p->stride, p->shape, p->ndim, dg_dtype_size(p->dtype));
        src = packed;
    }
    *crc = dg_crc32(0, src, (size_t)e->nbytes);
    int st = dg_ckpt_write_all(fd, src, (size_t)e->nbytes, path, err);
    dg_free(packed);
    *pos = e->offset + e->nbytes;
    return st;
}

/* <tmp>/<file><suffix> */
static void side_path(char *buf, size_t len, const char *tmp, int rank, const char *suffix) {
    char f[64];
    dg_ckpt_rank_file(f, sizeof f, rank);
    if ((size_t)snprintf(buf, len, "%s/%s%s", tmp, f, suffix) >= len) buf[0] = 0; /* tmp is far shorter */
}

/* The CRCs of this rank's entries as text, one decimal number a line,
 * written to <file>.crc.part and renamed to <file>.crc: rank 0 never reads a
 * half-written list. */
static int publish_crcs(const char *tmp, int rank, const uint32_t *crc, int n, dg_err *err) {
    size_t cap = 16 + 12 * (size_t)n, k = 0;
    char *text = dg_malloc(cap);
    k += (size_t)snprintf(text, cap, "%d\n", n);
    for (int i = 0; i < n; i++) k += (size_t)snprintf(text + k, cap - k, "%" PRIu32 "\n", crc[i]);
    char part[PATH_LEN], done[PATH_LEN];
    side_path(part, sizeof part, tmp, rank, ".crc.part");
    side_path(done, sizeof done, tmp, rank, ".crc");
    int st = dg_ckpt_write_file(part, text, k, err);
    dg_free(text);
    if (st == DG_OK && rename(part, done) != 0)
        st = dg_err_set(err, DG_EINPUT, "%s: cannot rename %s to it: %s", done, part, strerror(errno));
    return st;
}

int dg_ckpt_write_rank(const char *dir, int64_t iteration, long pid, const dg_ckpt_plan *p, int rank,
                       const dg_ckpt_piece *pieces, const dg_ckpt_save_opts *opts, dg_err *err) {
    const dg_ckpt_save_opts none = {0, NULL, NULL, 0}, *o = opts ? opts : &none;
    char tmp[PATH_LEN], path[PATH_LEN];
    DG_TRY(dg_ckpt_tmp_dir(tmp, sizeof tmp, dir, iteration, pid, err));
    side_path(path, sizeof path, tmp, rank, "");
    int n = p->count[rank], st = DG_OK;
    uint32_t *crc = dg_calloc((size_t)DG_MAX(n, 1), sizeof *crc);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) st = dg_err_set(err, DG_EINPUT, "%s: cannot create: %s", path, strerror(errno));
    int64_t pos = 0;
    for (int i = 0; i < n && st == DG_OK; i++) {
        int e = p->first[rank] + i;
        st = write_box(fd, path, &pieces[p->key[e]], &p->entries[e], &pos, &crc[i], err);
        if (st == DG_OK) reached(o, DG_CKPT_AT_TENSOR, i);
    }
    if (fd >= 0) {
        if (st == DG_OK && fsync(fd) != 0)
            st = dg_err_set(err, DG_EINPUT, "%s: fsync failed: %s", path, strerror(errno));
        if (close(fd) != 0 && st == DG_OK)
            st = dg_err_set(err, DG_EINPUT, "%s: close failed: %s", path, strerror(errno));
    }
    if (st == DG_OK) st = publish_crcs(tmp, rank, crc, n, err);
    dg_free(crc);
    if (st == DG_OK) {
        reached(o, DG_CKPT_AT_RANK_FILE, rank);
        return DG_OK;
    }
    char failed[PATH_LEN];
    side_path(failed, sizeof failed, tmp, rank, ".failed");
    if (err) dg_ckpt_write_file(failed, err->msg, strlen(err->msg), NULL); /* best effort: rank 0 stops waiting */
    else dg_ckpt_write_file(failed, "failed", 6, NULL);
    return st;
}

static void nap(void) {
    struct timespec ts = {0, 2000000}; /* 2 ms */
    nanosleep(&ts, NULL);
}

/* Bytes of the file at path so far (-1: none yet). */
static int64_t file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (int64_t)sb.st_size : -1;
}

/* Wait for rank r's CRC list and fill its entries' crc32. The timeout
 * counts time without progress: a rank whose data file still grows is
 * slow, not gone (an --async-save writer runs on idle cycles only, and a
 * busy machine may leave it few), so the wait restarts whenever it grows. */
static int collect_crcs(const char *tmp, dg_ckpt_plan *p, int r, double timeout_s, dg_err *err) {
    char done[PATH_LEN], failed[PATH_LEN], data[PATH_LEN];
    side_path(done, sizeof done, tmp, r, ".crc");
    side_path(failed, sizeof failed, tmp, r, ".failed");
    side_path(data, sizeof data, tmp, r, "");
    double waited = 0;
    int64_t size = file_size(data);
    while (access(done, F_OK) != 0) {
        char *msg;
        size_t len;
        if (dg_ckpt_read_file(failed, &msg, &len, NULL) == DG_OK) {
            int st = p->world > 1 ? dg_err_set(err, DG_EINPUT, "rank %d: %s", r, msg)
                                  : dg_err_set(err, DG_EINPUT, "%s", msg);
            dg_free(msg);
            return st;
        }
        int64_t now = file_size(data);
        if (now != size) waited = 0, size = now;
        if (waited >= timeout_s)
            return dg_err_set(err, DG_EINPUT, "%s: rank %d did not finish its part of the checkpoint (no progress "
                              "within %g s)", tmp, r, timeout_s);
        nap();
        waited += 0.002;
    }
    char *text;
    size_t len;
    DG_TRY(dg_ckpt_read_file(done, &text, &len, err));
    char *s = text, *end;
    long n = strtol(s, &end, 10);
    int st = n == p->count[r] ? DG_OK : dg_err_set(err, DG_EINPUT, "%s: lists %ld CRCs, expected %d", done, n, p->count[r]);
    for (int i = 0; i < p->count[r] && st == DG_OK; i++) {
        s = end;
        unsigned long v = strtoul(s, &end, 10);
        if (end == s) st = dg_err_set(err, DG_EINPUT, "%s: CRC %d is missing", done, i);
        p->entries[p->first[r] + i].crc32 = (uint32_t)v;
    }
    dg_free(text);
    if (st == DG_OK && unlink(done) != 0)
        st = dg_err_set(err, DG_EINPUT, "%s: cannot remove: %s", done, strerror(errno));
    return st;
}

static int write_manifest(const char *tmp, const dg_ckpt_meta *m, dg_ckpt_plan *p, double timeout_s, dg_err *err) {
    for (int r = 0; r < p->world; r++) DG_TRY(collect_crcs(tmp, p, r, timeout_s, err));
    char *json = dg_ckpt_manifest_to_json(m, p->entries, p->n_entries);
    char mp[PATH_LEN];
    if ((size_t)snprintf(mp, sizeof mp, "%s/%s", tmp, DG_CKPT_MANIFEST) >= sizeof mp)
        return dg_err_set(err, DG_EINPUT, "%s: checkpoint path too long", tmp);
    int st = dg_ckpt_write_file(mp, json, strlen(json), err);
    dg_free(json);
    return st;
}

int dg_ckpt_finish(const char *dir, long pid, const dg_ckpt_meta *m, dg_ckpt_plan *p, double timeout_s,
                   const dg_ckpt_save_opts *opts, dg_err *err) {
    const dg_ckpt_save_opts none = {0, NULL, NULL, 0}, *o = opts ? opts : &none;
    char final[DG_CKPT_STR_LEN + 32], tmp[PATH_LEN];
    DG_TRY(dg_ckpt_iter_dir(final, sizeof final, dir, m->iteration, err));
    DG_TRY(dg_ckpt_tmp_dir(tmp, sizeof tmp, dir, m->iteration, pid, err));
    int st = write_manifest(tmp, m, p, timeout_s, err);
    if (st == DG_OK) st = dg_ckpt_fsync_dir(tmp, err);
    if (st == DG_OK) reached(o, DG_CKPT_AT_FILES, -1);
    if (st == DG_OK) st = install_dir(tmp, final, err);
    if (st != DG_OK) {
        dg_ckpt_remove_tree(tmp);
        return st;
    }
    /* The directory must be durable under its final name before the tracker
     * may name it. */
    DG_TRY(dg_ckpt_fsync_dir(dir, err));
    reached(o, DG_CKPT_AT_INSTALLED, -1);
    char tracker[DG_CKPT_STR_LEN + 64], num[32];
    if ((size_t)snprintf(tracker, sizeof tracker, "%s/%s", dir, DG_CKPT_TRACKER) >= sizeof tracker)
        return dg_err_set(err, DG_EINPUT, "%s: checkpoint path too long", dir);
    int len = snprintf(num, sizeof num, "%" PRId64, m->iteration); /* Megatron writes no newline */
    int64_t tracked;
    /* path.tmp-<pid>, fsynced, renamed over the tracker, the directory
     * fsynced; an import added to a newer checkpoint leaves its tracker be */
    if (!(o->tracker_forward_only && dg_ckpt_has_tracker(dir) && dg_ckpt_latest(dir, &tracked, NULL) == DG_OK &&
          tracked > m->iteration))
        DG_TRY(dg_file_out_replace(tracker, num, (size_t)len, NULL, err));
    reached(o, DG_CKPT_AT_TRACKED, -1);
    return prune(dir, o->keep_last, m->iteration, err);
}
