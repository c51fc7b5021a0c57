/* dg_checkpoint.c — see dg_checkpoint.h. The file-system primitives and the
 * manifest's JSON live in dg_ckpt_fs.c and dg_ckpt_manifest.c. */
#include "dg_checkpoint.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dg_ckpt_fs.h"

#define ALIGN 64 /* tensor start alignment in the .bin: cache lines, AVX-512, mmap-friendly */

/* ---- small pieces ------------------------------------------------------------- */

void dg_ckpt_meta_init(dg_ckpt_meta *m) { memset(m, 0, sizeof *m); }

int dg_ckpt_config_set(dg_ckpt_config *c, const char *key, double value, dg_err *err) {
    size_t len = strlen(key);
    if (len == 0 || len >= DG_CKPT_KEY_LEN)
        return dg_err_set(err, DG_EINTERNAL, "checkpoint config: key '%s' is empty or longer than %d bytes", key,
                          DG_CKPT_KEY_LEN - 1);
    if (!isfinite(value))
        return dg_err_set(err, DG_EINTERNAL, "checkpoint config: '%s' = %g is not a finite number", key, value);
    int i = 0;
    while (i < c->n && strcmp(c->key[i], key) != 0) i++;
    if (i == DG_CKPT_CONFIG_MAX)
        return dg_err_set(err, DG_EINTERNAL, "checkpoint config: more than %d keys (at '%s')", DG_CKPT_CONFIG_MAX, key);
    if (i == c->n) memcpy(c->key[c->n++], key, len + 1);
    c->value[i] = value;
    return DG_OK;
}

const double *dg_ckpt_config_get(const dg_ckpt_config *c, const char *key) {
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->key[i], key)) return &c->value[i];
    return NULL;
}

size_t dg_ckpt_tensor_bytes(const dg_ckpt_tensor *t) {
    size_t n = dg_dtype_size(t->dtype);
    for (int d = 0; d < t->ndim; d++) n *= (size_t)t->shape[d];
    return n;
}

int dg_ckpt_tensor_from(dg_ckpt_tensor *t, const char *prefix, const dg_tensor *g, void *data, dg_err *err) {
    memset(t, 0, sizeof *t);
    if ((size_t)snprintf(t->name, sizeof t->name, "%s%s", prefix, g->name) >= sizeof t->name)
        return dg_err_set(err, DG_EINTERNAL, "checkpoint tensor name '%s%s' is longer than %d bytes", prefix, g->name,
                          DG_CKPT_NAME_LEN - 1);
    t->dtype = g->dtype;
    t->ndim = g->ndim;
    memcpy(t->shape, g->shape, sizeof t->shape);
    t->data = data;
    return DG_OK;
}

int dg_ckpt_iter_dir(char *buf, size_t len, const char *dir, int64_t iteration, dg_err *err) {
    if ((size_t)snprintf(buf, len, "%s/iter_%07" PRId64, dir, iteration) >= len)
        return dg_err_set(err, DG_EINPUT, "%s: checkpoint path too long", dir);
    return DG_OK;
}

const dg_ckpt_entry *dg_ckpt_find(const dg_ckpt_manifest *man, const char *name) {
    for (int i = 0; i < man->n_tensors; i++)
        if (!strcmp(man->tensors[i].name, name)) return &man->tensors[i];
    return NULL;
}

static const char *shape_str(const int64_t *s, int ndim, char *buf, size_t len) {
    size_t k = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < ndim && k < len; d++)
        k += (size_t)snprintf(buf + k, len - k, "%s%" PRId64, d ? "," : "", s[d]);
    if (k < len) snprintf(buf + k, len - k, "]");
    return buf;
}

/* ---- save --------------------------------------------------------------------- */

/* Check the caller's table before touching the disk: a bad table is a bug
 * in the caller, so DG_EINTERNAL. */
static int check_table(const dg_ckpt_meta *m, const dg_ckpt_tensor *t, int n, dg_err *err) {
    if (m->iteration < 0 || n < 0)
        return dg_err_set(err, DG_EINTERNAL, "dg_ckpt_save: iteration %" PRId64 ", %d tensors", m->iteration, n);
    for (int i = 0; i < n; i++) {
        if (!t[i].name[0] || memchr(t[i].name, 0, sizeof t[i].name) == NULL)
            return dg_err_set(err, DG_EINTERNAL, "dg_ckpt_save: tensor %d has no name", i);
        if ((unsigned)t[i].dtype >= DG_DTYPE_COUNT || t[i].ndim < 0 || t[i].ndim > DG_MAX_DIMS)
            return dg_err_set(err, DG_EINTERNAL, "dg_ckpt_save: tensor '%s': bad dtype or rank", t[i].name);
        for (int d = 0; d < t[i].ndim; d++)
            if (t[i].shape[d] < 0)
                return dg_err_set(err, DG_EINTERNAL, "dg_ckpt_save: tensor '%s': negative size", t[i].name);
        if (!t[i].data && dg_ckpt_tensor_bytes(&t[i]) > 0)
            return dg_err_set(err, DG_EINTERNAL, "dg_ckpt_save: tensor '%s' has no data", t[i].name);
        for (int j = 0; j < i; j++)
            if (!strcmp(t[i].name, t[j].name))
                return dg_err_set(err, DG_EINTERNAL, "dg_ckpt_save: tensor '%s' appears twice", t[i].name);
    }
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

/* Write the tensors into <tmp>/model_optim_rng.bin, filling the entries. */
static int write_bin(const char *tmp, const dg_ckpt_tensor *t, int n, dg_ckpt_entry *e,
                     const dg_ckpt_save_opts *o, dg_err *err) {
    char path[DG_CKPT_STR_LEN + 128];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", tmp, DG_CKPT_BIN) >= sizeof path)
        return dg_err_set(err, DG_EINPUT, "%s: checkpoint path too long", tmp);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) return dg_err_set(err, DG_EINPUT, "%s: cannot create: %s", path, strerror(errno));
    static const char zeros[ALIGN] = {0};
    int64_t off = 0;
    int st = DG_OK;
    for (int i = 0; i < n && st == DG_OK; i++) {
        int64_t pad = (ALIGN - off % ALIGN) % ALIGN;
        st = dg_ckpt_write_all(fd, zeros, (size_t)pad, path, err);
        off += pad;
        size_t bytes = dg_ckpt_tensor_bytes(&t[i]);
        dg_ckpt_entry *x = &e[i];
        memcpy(x->name, t[i].name, sizeof x->name);
        x->dtype = t[i].dtype;
        x->ndim = t[i].ndim;
        memcpy(x->global_shape, t[i].shape, sizeof x->global_shape);
        memcpy(x->shape, t[i].shape, sizeof x->shape);
        snprintf(x->file, sizeof x->file, "%s", DG_CKPT_BIN);
        x->offset = off;
        x->nbytes = (int64_t)bytes;
        x->crc32 = dg_crc32(0, t[i].data, bytes);
        if (st == DG_OK) st = dg_ckpt_write_all(fd, t[i].data, bytes, path, err);
        off += (int64_t)bytes;
        if (st == DG_OK) reached(o, DG_CKPT_AT_TENSOR, i);
    }
    if (st == DG_OK && fsync(fd) != 0) st = dg_err_set(err, DG_EINPUT, "%s: fsync failed: %s", path, strerror(errno));
    if (close(fd) != 0 && st == DG_OK) st = dg_err_set(err, DG_EINPUT, "%s: close failed: %s", path, strerror(errno));
    return st;
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

int dg_ckpt_save(const char *dir, const dg_ckpt_meta *m, const dg_ckpt_tensor *t, int n,
                 const dg_ckpt_save_opts *opts, dg_err *err) {
    const dg_ckpt_save_opts none = {0, NULL, NULL}, *o = opts ? opts : &none;
    DG_TRY(check_table(m, t, n, err));
    DG_TRY(dg_ckpt_mkdirs(dir, err));
    remove_stale(dir);
    char final[DG_CKPT_STR_LEN + 32], tmp[DG_CKPT_STR_LEN + 64];
    DG_TRY(dg_ckpt_iter_dir(final, sizeof final, dir, m->iteration, err));
    snprintf(tmp, sizeof tmp, "%s.tmp-%ld", final, (long)getpid());
    if (mkdir(tmp, 0777) != 0)
        return dg_err_set(err, DG_EINPUT, "%s: cannot create directory: %s", tmp, strerror(errno));

    dg_ckpt_entry *e = dg_calloc((size_t)(n > 0 ? n : 1), sizeof *e);
    int st = write_bin(tmp, t, n, e, o, err);
    if (st == DG_OK) {
        char *json = dg_ckpt_manifest_to_json(m, e, n);
        char mp[DG_CKPT_STR_LEN + 96];
        snprintf(mp, sizeof mp, "%s/%s", tmp, DG_CKPT_MANIFEST);
        st = dg_ckpt_write_file(mp, json, strlen(json), err);
        dg_free(json);
    }
    dg_free(e);
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
    DG_TRY(dg_ckpt_replace_file(dir, tracker, num, (size_t)len, err));
    reached(o, DG_CKPT_AT_TRACKED, -1);
    return prune(dir, o->keep_last, m->iteration, err);
}

/* ---- find ---------------------------------------------------------------------- */

bool dg_ckpt_has_tracker(const char *dir) {
    char p[DG_CKPT_STR_LEN + 64];
    snprintf(p, sizeof p, "%s/%s", dir, DG_CKPT_TRACKER);
    return access(p, F_OK) == 0;
}

int dg_ckpt_latest(const char *dir, int64_t *iteration, dg_err *err) {
    char p[DG_CKPT_STR_LEN + 64];
    if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, DG_CKPT_TRACKER) >= sizeof p)
        return dg_err_set(err, DG_EINPUT, "%s: checkpoint path too long", dir);
    struct stat sb;
    if (stat(p, &sb) != 0 && errno == ENOENT)
        return dg_err_set(err, DG_EINPUT, "%s: no checkpoint tracker; was anything saved in %s?", p, dir);
    char *text;
    size_t n;
    DG_TRY(dg_ckpt_read_file(p, &text, &n, err));
    /* Accept surrounding whitespace (hand-edited trackers), nothing else. */
    char *s = text, *end = text + n;
    while (s < end && isspace((unsigned char)*s)) s++;
    while (end > s && isspace((unsigned char)end[-1])) end--;
    int64_t v = 0;
    bool ok = s < end && end - s <= 18;
    for (char *c = s; ok && c < end; c++) {
        ok = isdigit((unsigned char)*c);
        v = v * 10 + (*c - '0');
    }
    if (!ok) {
        char shown[41];
        size_t k = 0;
        for (char *c = s; c < end && k < sizeof shown - 1; c++) shown[k++] = isprint((unsigned char)*c) ? *c : '?';
        shown[k] = 0;
        int st = dg_err_set(err, DG_EINPUT, "%s: expected an iteration number, got '%s'%s", p, shown,
                            !strcmp(shown, "release") ? " (Megatron release checkpoints are not supported)" : "");
        dg_free(text);
        return st;
    }
    dg_free(text);
    char it_dir[DG_CKPT_STR_LEN + 32];
    DG_TRY(dg_ckpt_iter_dir(it_dir, sizeof it_dir, dir, v, err));
    if (stat(it_dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return dg_err_set(err, DG_EINPUT, "%s names iteration %" PRId64 ", but %s does not exist", p, v, it_dir);
    *iteration = v;
    return DG_OK;
}

/* ---- read ---------------------------------------------------------------------- */

int dg_ckpt_read_manifest(const char *dir, int64_t iteration, dg_ckpt_manifest *man, dg_err *err) {
    memset(man, 0, sizeof *man);
    if (iteration == DG_CKPT_LATEST) DG_TRY(dg_ckpt_latest(dir, &iteration, err));
    if (iteration < 0) return dg_err_set(err, DG_EINPUT, "%s: no checkpoint iteration %" PRId64, dir, iteration);
    DG_TRY(dg_ckpt_iter_dir(man->dir, sizeof man->dir, dir, iteration, err));
    if ((size_t)snprintf(man->path, sizeof man->path, "%s/%s", man->dir, DG_CKPT_MANIFEST) >= sizeof man->path)
        return dg_err_set(err, DG_EINPUT, "%s: checkpoint path too long", dir);
    char *text;
    size_t n;
    int st = dg_ckpt_read_file(man->path, &text, &n, err);
    if (st != DG_OK) return st;
    if (strlen(text) != n) st = dg_err_set(err, DG_EINPUT, "%s: contains a NUL byte (not JSON)", man->path);
    if (st == DG_OK) st = dg_ckpt_manifest_parse(man, text, err);
    dg_free(text);
    if (st == DG_OK && man->meta.iteration != iteration)
        st = dg_err_set(err, DG_EINPUT, "%s: says iteration %" PRId64 " but sits in iter_%07" PRId64, man->path,
                        man->meta.iteration, iteration);
    if (st != DG_OK) dg_ckpt_manifest_free(man);
    return st;
}

void dg_ckpt_manifest_free(dg_ckpt_manifest *man) {
    dg_free(man->tensors);
    man->tensors = NULL;
    man->n_tensors = 0;
}

/* The data files a load touches, opened once each. */
typedef struct open_file {
    const char *rel; /* entry->file */
    char path[DG_CKPT_STR_LEN * 2 + 2];
    int fd;
    int64_t size;
} open_file;

static int open_data(const dg_ckpt_manifest *man, const dg_ckpt_entry *e, open_file *files, int *n_files,
                     open_file **out, dg_err *err) {
    for (int i = 0; i < *n_files; i++)
        if (!strcmp(files[i].rel, e->file)) {
            *out = &files[i];
            return DG_OK;
        }
    open_file *f = &files[*n_files];
    f->rel = e->file;
    snprintf(f->path, sizeof f->path, "%s/%s", man->dir, e->file);
    f->fd = open(f->path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0) return dg_err_set(err, DG_EINPUT, "%s: %s (tensor '%s')", f->path, strerror(errno), e->name);
    struct stat sb;
    fstat(f->fd, &sb);
    f->size = (int64_t)sb.st_size;
    ++*n_files;
    *out = f;
    return DG_OK;
}

/* Check every requested tensor against the manifest and the files, then read
 * them: bad names, shapes and sizes are found before any buffer is written. */
static int load_tensors(const dg_ckpt_manifest *man, const dg_ckpt_tensor *t, int n, dg_err *err) {
    open_file *files = dg_calloc((size_t)(n > 0 ? n : 1), sizeof *files);
    const dg_ckpt_entry **ent = dg_calloc((size_t)(n > 0 ? n : 1), sizeof *ent);
    open_file **fof = dg_calloc((size_t)(n > 0 ? n : 1), sizeof *fof);
    int n_files = 0, st = DG_OK;
    for (int i = 0; i < n && st == DG_OK; i++) {
        const dg_ckpt_entry *e = ent[i] = dg_ckpt_find(man, t[i].name);
        char a[96], b[96];
        if (!e) {
            st = dg_err_set(err, DG_EINPUT, "%s: no tensor '%s' in the checkpoint", man->path, t[i].name);
        } else if (e->dtype != t[i].dtype) {
            st = dg_err_set(err, DG_EINPUT, "%s: tensor '%s' is %s in the checkpoint, this run expects %s", man->path,
                            e->name, dg_dtype_name(e->dtype), dg_dtype_name(t[i].dtype));
        } else if (e->ndim != t[i].ndim || memcmp(e->global_shape, t[i].shape, sizeof(int64_t) * (size_t)e->ndim)) {
            st = dg_err_set(err, DG_EINPUT, "%s: tensor '%s' has shape %s in the checkpoint, this run expects %s",
                            man->path, e->name, shape_str(e->global_shape, e->ndim, a, sizeof a),
                            shape_str(t[i].shape, t[i].ndim, b, sizeof b));
        } else if (memcmp(e->shape, e->global_shape, sizeof(int64_t) * (size_t)e->ndim)) {
            st = dg_err_set(err, DG_EINPUT, "%s: tensor '%s' is stored as a slice; loading sharded checkpoints is not supported yet",
                            man->path, e->name);
        } else {
            st = open_data(man, e, files, &n_files, &fof[i], err);
            if (st == DG_OK && e->offset + e->nbytes > fof[i]->size)
                st = dg_err_set(err, DG_EINPUT,
                                "%s: truncated: tensor '%s' needs bytes [%" PRId64 ", %" PRId64 "), the file has %" PRId64,
                                fof[i]->path, e->name, e->offset, e->offset + e->nbytes, fof[i]->size);
        }
    }
    for (int i = 0; i < n && st == DG_OK; i++) {
        const dg_ckpt_entry *e = ent[i];
        st = dg_ckpt_read_at(fof[i]->fd, t[i].data, (size_t)e->nbytes, e->offset, fof[i]->path, err);
        uint32_t crc = st == DG_OK ? dg_crc32(0, t[i].data, (size_t)e->nbytes) : 0;
        if (st == DG_OK && crc != e->crc32)
            st = dg_err_set(err, DG_EINPUT, "%s: checksum mismatch in tensor '%s' (crc32 %08" PRIx32 ", manifest says %08" PRIx32 ")",
                            fof[i]->path, e->name, crc, e->crc32);
    }
    for (int i = 0; i < n_files; i++) close(files[i].fd);
    dg_free(files);
    dg_free(ent);
    dg_free(fof);
    return st;
}

int dg_ckpt_load(const char *dir, int64_t iteration, const dg_ckpt_expect *expect, dg_ckpt_meta *m,
                 const dg_ckpt_tensor *t, int n, dg_err *err) {
    dg_ckpt_manifest man;
    DG_TRY(dg_ckpt_read_manifest(dir, iteration, &man, err));
    int st = expect && expect->check ? expect->check(&man.meta.config, expect->ctx, man.path, err) : DG_OK;
    if (st == DG_OK) st = load_tensors(&man, t, n, err);
    if (st == DG_OK && m) *m = man.meta;
    dg_ckpt_manifest_free(&man);
    return st;
}
