/* dg_ckpt_fs.h — internal to the checkpoint code: the file-system steps of
 * a crash-safe save (write fully, fsync files and directories, rename) and
 * the manifest's JSON form. Not part of the public API (dg_checkpoint.h).
 *
 * Every function that can fail returns DG_OK or DG_EINPUT with a one-line
 * message naming the path and strerror(errno).
 */
#ifndef DG_CKPT_FS_H
#define DG_CKPT_FS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dg_checkpoint.h"

/* ---- files and directories ---------------------------------------------- */

/* write(2) until all n bytes are out (retrying short writes and EINTR). */
int dg_ckpt_write_all(int fd, const void *buf, size_t n, const char *path, dg_err *err);

/* pread(2) exactly n bytes at off; a short read is "truncated". */
int dg_ckpt_read_at(int fd, void *buf, size_t n, int64_t off, const char *path, dg_err *err);

/* Create a file with `n` bytes of `buf`, fsync it, close it. */
int dg_ckpt_write_file(const char *path, const void *buf, size_t n, dg_err *err);

/* Read a whole (small) file, NUL-terminated. *buf is dg_malloc'd. A missing
 * file is DG_EINPUT "<path>: No such file or directory". */
int dg_ckpt_read_file(const char *path, char **buf, size_t *n, dg_err *err);

/* fsync a directory so the entries created or renamed in it are durable. */
int dg_ckpt_fsync_dir(const char *path, dg_err *err);

/* mkdir -p (mode 0777 & ~umask). */
int dg_ckpt_mkdirs(const char *path, dg_err *err);

/* rm -rf, best effort: checkpoints are plain files and directories. */
void dg_ckpt_remove_tree(const char *path);

/* Is this a finished checkpoint's name, exactly "iter_" and >= 7 digits?
 * (So "iter_0000010.tmp-123" and anything else a reader must ignore is not.) */
bool dg_ckpt_parse_iter_name(const char *name, int64_t *iteration);

/* Is this a temporary directory name "<anything>.tmp-<pid>[-suffix]"? */
bool dg_ckpt_parse_tmp_name(const char *name, long *pid);

/* ---- boxes (dg_ckpt_plan.c) ------------------------------------------------ */

/* Copy a box of `shape` between two strided layouts (strides in elements of
 * elem bytes; dst and src point at the box's first element). */
void dg_ckpt_box_copy(void *dst, const int64_t *dst_stride, const void *src, const int64_t *src_stride,
                      const int64_t *shape, int ndim, size_t elem);

/* Row-major strides of shape. */
void dg_ckpt_row_major(const int64_t *shape, int ndim, int64_t *stride);

/* ---- the manifest (dg_ckpt_manifest.c) ------------------------------------ */

/* The manifest of meta and entries as JSON text (dg_malloc'd, NUL-terminated). */
char *dg_ckpt_manifest_to_json(const dg_ckpt_meta *m, const dg_ckpt_entry *e, int n);

/* Parse and validate JSON text read from man->path into man->meta and
 * man->tensors. DG_EINPUT naming man->path and the bad field. */
int dg_ckpt_manifest_parse(dg_ckpt_manifest *man, const char *text, dg_err *err);

#endif /* DG_CKPT_FS_H */
