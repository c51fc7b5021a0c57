/* dg_read_file.h — a whole input file read into memory, within a stated
 * bound, for the readers of JSON documents (traces, graph dumps, device
 * profiles).
 *
 * What the bound is for: a path naming /dev/zero, a FIFO or a directory, or a
 * file that keeps growing while it is read, would otherwise be read until
 * memory runs out (an abort inside the allocator). So only a regular file is
 * read, its size (fstat) must be within max_bytes before any is read, and
 * reading stops with a refusal once more than max_bytes came (a file that
 * grew; a /proc file whose fstat size is 0). The open does not block on a
 * FIFO. An allocation failure is a refusal too, never an abort.
 */
#ifndef DG_READ_FILE_H
#define DG_READ_FILE_H

#include "dg_base.h"

/* Read `path` whole, NUL-terminated, into *buf (dg_free it) and its length
 * into *n (NULL: not wanted). `what` opens every message, e.g. "--trace
 * t.json": "<what>: cannot read: No such file or directory", "<what>: not a
 * regular file (a character device)", "<what>: N bytes, more than the M
 * allowed". DG_OK, or DG_EINPUT with *buf NULL. */
int dg_read_file(const char *path, const char *what, size_t max_bytes, char **buf, size_t *n, dg_err *err);

#endif /* DG_READ_FILE_H */
