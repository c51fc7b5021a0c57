/* dg_ckpt_read.c — filling pieces from a checkpoint's stored slices
 * (dg_ckpt_load_pieces, dg_ckpt_shards.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dg_ckpt_fs.h"
#include "dg_ckpt_shards.h"

static const char *shape_str(const int64_t *s, int ndim, char *buf, size_t len) {
    size_t k = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < ndim && k < len; d++)
        k += (size_t)snprintf(buf + k, len - k, "%s%" PRId64, d ? "," : "", s[d]);
    if (k < len) snprintf(buf + k, len - k, "]");
    return buf;
}

/* The overlap of entry e and piece p: [lo, lo + shape) per dim; its
 * element count (0: none; a scalar overlaps in its one element). */
static int64_t overlap(const dg_ckpt_entry *e, const dg_ckpt_piece *p, int64_t *lo, int64_t *shape) {
    int64_t n = 1;
    for (int d = 0; d < p->ndim; d++) {
        int64_t a = DG_MAX(e->slice_start[d], p->start[d]);
        int64_t b = DG_MIN(e->slice_start[d] + e->shape[d], p->start[d] + p->shape[d]);
        lo[d] = a;
        shape[d] = b > a ? b - a : 0;
        n *= shape[d];
    }
    return n;
}

/* A data file a load touches, opened once. */
typedef struct open_file {
    const char *rel;
    char path[DG_CKPT_STR_LEN * 2 + 2];
    int fd;
    int64_t size;
} open_file;

typedef struct files {
    int n;
    open_file *f;
} files;

static int open_data(const dg_ckpt_manifest *man, const dg_ckpt_entry *e, files *fs, open_file **out, dg_err *err) {
    for (int i = 0; i < fs->n; i++)
        if (!strcmp(fs->f[i].rel, e->file)) {
            *out = &fs->f[i];
            return DG_OK;
        }
    open_file *f = &fs->f[fs->n];
    f->rel = e->file;
    snprintf(f->path, sizeof f->path, "%s/%s", man->dir, e->file);
    f->fd = open(f->path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0) return dg_err_set(err, DG_EINPUT, "%s: %s (tensor '%s')", f->path, strerror(errno), e->name);
    struct stat sb;
    fstat(f->fd, &sb);
    f->size = (int64_t)sb.st_size;
    fs->n++;
    *out = f;
    return DG_OK;
}

/* Piece p against the table: its tensor is there with its dtype and global
 * shape, and the stored slices hold each of its elements once. Marks the
 * entries it overlaps in need[]. */
static int check_piece(const dg_ckpt_manifest *man, const dg_ckpt_piece *p, char *need, dg_err *err) {
    const dg_ckpt_entry *first = NULL;
    int64_t covered = 0, lo[DG_MAX_DIMS], sh[DG_MAX_DIMS];
    char a[96], b[96];
    for (int i = 0; i < man->n_tensors; i++) {
        const dg_ckpt_entry *e = &man->tensors[i];
        if (strcmp(e->name, p->name)) continue;
        if (!first) {
            first = e;
            if (e->dtype != p->dtype)
                return dg_err_set(err, DG_EINPUT, "%s: tensor '%s' is %s in the checkpoint, this run expects %s",
                                  man->path, e->name, dg_dtype_name(e->dtype), dg_dtype_name(p->dtype));
            if (e->ndim != p->ndim || memcmp(e->global_shape, p->global_shape, sizeof(int64_t) * (size_t)e->ndim))
                return dg_err_set(err, DG_EINPUT, "%s: tensor '%s' has shape %s in the checkpoint, this run expects %s",
                                  man->path, e->name, shape_str(e->global_shape, e->ndim, a, sizeof a),
                                  shape_str(p->global_shape, p->ndim, b, sizeof b));
        }
        int64_t n = overlap(e, p, lo, sh);
        covered += n;
        if (n > 0) need[i] = 1;
    }
    if (!first) return dg_err_set(err, DG_EINPUT, "%s: no tensor '%s' in the checkpoint", man->path, p->name);
    if (covered != dg_ckpt_piece_numel(p))
        return dg_err_set(err, DG_EINPUT,
                          "%s: tensor '%s': the stored slices hold %" PRId64 " of the %" PRId64
                          " elements of the box at %s this run needs (slices missing or overlapping)",
                          man->path, p->name, covered, dg_ckpt_piece_numel(p),
                          shape_str(p->start, p->ndim, a, sizeof a));
    return DG_OK;
}

static bool box_equal(const dg_ckpt_entry *e, const dg_ckpt_piece *p) {
    return !memcmp(e->slice_start, p->start, sizeof(int64_t) * (size_t)p->ndim) &&
           !memcmp(e->shape, p->shape, sizeof(int64_t) * (size_t)p->ndim);
}

/* Read entry e (whole: its CRC covers it) and copy its overlap with every
 * piece of its tensor. A piece that is exactly e, contiguous, is read into
 * directly. */
static int read_entry(const dg_ckpt_entry *e, const open_file *f, const dg_ckpt_piece *p, int n, dg_err *err) {
    void *buf = NULL, *into = NULL;
    for (int i = 0; i < n && !into; i++)
        if (!strcmp(p[i].name, e->name) && box_equal(e, &p[i]) && dg_ckpt_piece_contiguous(&p[i])) into = p[i].data;
    if (!into) into = buf = dg_malloc((size_t)DG_MAX(e->nbytes, 1));
    int st = dg_ckpt_read_at(f->fd, into, (size_t)e->nbytes, e->offset, f->path, err);
    uint32_t crc = st == DG_OK ? dg_crc32(0, into, (size_t)e->nbytes) : 0;
    if (st == DG_OK && crc != e->crc32)
        st = dg_err_set(err, DG_EINPUT, "%s: checksum mismatch in tensor '%s' (crc32 %08" PRIx32 ", manifest says %08" PRIx32 ")",
                        f->path, e->name, crc, e->crc32);
    size_t elem = dg_dtype_size(e->dtype);
    int64_t rm[DG_MAX_DIMS], lo[DG_MAX_DIMS], sh[DG_MAX_DIMS];
    dg_ckpt_row_major(e->shape, e->ndim, rm);
    for (int i = 0; i < n && st == DG_OK && buf; i++) {
        if (strcmp(p[i].name, e->name) || overlap(e, &p[i], lo, sh) == 0) continue;
        int64_t so = 0, dof = 0;
        for (int d = 0; d < e->ndim; d++) {
            so += (lo[d] - e->slice_start[d]) * rm[d];
            dof += (lo[d] - p[i].start[d]) * p[i].stride[d];
        }
        dg_ckpt_box_copy((char *)p[i].data + (size_t)dof * elem, p[i].stride, (char *)buf + (size_t)so * elem, rm, sh,
                         e->ndim, elem);
    }
    dg_free(buf);
    return st;
}

int dg_ckpt_load_pieces(const dg_ckpt_manifest *man, const dg_ckpt_piece *p, int n, dg_err *err) {
    char *need = dg_calloc((size_t)DG_MAX(man->n_tensors, 1), 1);
    files fs = {0, dg_calloc((size_t)DG_MAX(man->n_tensors, 1), sizeof(open_file))};
    open_file **fof = dg_calloc((size_t)DG_MAX(man->n_tensors, 1), sizeof *fof);
    int st = DG_OK;
    for (int i = 0; i < n && st == DG_OK; i++) st = check_piece(man, &p[i], need, err);
    for (int i = 0; i < man->n_tensors && st == DG_OK; i++) {
        if (!need[i]) continue;
        const dg_ckpt_entry *e = &man->tensors[i];
        st = open_data(man, e, &fs, &fof[i], err);
        if (st == DG_OK && e->offset + e->nbytes > fof[i]->size)
            st = dg_err_set(err, DG_EINPUT,
                            "%s: truncated: tensor '%s' needs bytes [%" PRId64 ", %" PRId64 "), the file has %" PRId64,
                            fof[i]->path, e->name, e->offset, e->offset + e->nbytes, fof[i]->size);
    }
    for (int i = 0; i < man->n_tensors && st == DG_OK; i++)
        if (need[i]) st = read_entry(&man->tensors[i], fof[i], p, n, err);
    for (int i = 0; i < fs.n; i++) close(fs.f[i].fd);
    dg_free(fs.f);
    dg_free(fof);
    dg_free(need);
    return st;
}
