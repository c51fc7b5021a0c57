/* dg_file_out.h — write an output file without ever losing what was there.
 *
 * Every writer of a file the user names (-o, --trace, --output-prefix, a
 * tokenizer's files, a cache) goes through this, so a failed write leaves
 * the old file as it was and removes nothing the command did not create:
 *
 *  - a regular file (or a path that does not exist yet) is written to a
 *    temporary file beside it, "<target>.tmp-<pid>", and renamed over it
 *    only once all of it is written and fsynced (dg_file_out_commit). A
 *    symbolic link to a regular file is followed: the file it names is
 *    replaced and the link stays;
 *  - anything else (a device such as /dev/full or /dev/stdout, a FIFO, a
 *    socket, a dangling link, or a regular file this process already has
 *    open as standard input, output or error, as `-o /dev/stdout > f` gives)
 *    is written directly: a failure is reported, nothing is removed;
 *  - standard output (dg_file_out_stdout, for "-o -") is flushed and
 *    checked, never closed.
 *
 * A failure is one line "<flag> <name>: <what failed>: <strerror>", the
 * name being the path as given or "standard output", and DG_EINPUT: the
 * user's output is what cannot be written. dg_file_out_commit and
 * dg_file_out_abort release the handle, whatever happens.
 */
#ifndef DG_FILE_OUT_H
#define DG_FILE_OUT_H

#include <stddef.h>
#include <stdio.h>

#include "dg_base.h"

struct dg_file_sink; /* private to dg_file_out.c */

typedef struct dg_file_out {
    FILE *f;          /* write through this */
    char *name;       /* for messages: the path as given, or "standard output" */
    const char *flag; /* the flag that named the file ("-o"), or NULL */
    char *target;     /* the file renamed over (symbolic links followed) */
    char *tmp;        /* the temporary beside it; NULL when written directly */
    struct dg_file_sink *sink; /* f's descriptor and first error; NULL for standard output */
    int closed;                /* dg_file_out_close ran: f is gone, tmp complete */
} dg_file_out;

/* Open `path` for writing as above. `flag` (may be NULL) prefixes messages. */
int dg_file_out_open(dg_file_out *o, const char *path, const char *flag, dg_err *err);

/* Wrap standard output ("-"), to be flushed and checked by commit. */
void dg_file_out_stdout(dg_file_out *o);

/* fwrite all n bytes; a short write is reported now. */
int dg_file_out_write(dg_file_out *o, const void *buf, size_t n, dg_err *err);

/* Flush and check everything written, fsync and close the temporary: the
 * data is complete on disk but not yet in place. For writers that put two
 * files in place together (an indexed dataset's .bin and .idx): close
 * both, then commit both. On failure the handle is released (as abort). */
int dg_file_out_close(dg_file_out *o, dg_err *err);

/* Close (if not yet) and put the file in place: rename the temporary over
 * the target and fsync its directory. Releases o. */
int dg_file_out_commit(dg_file_out *o, dg_err *err);

/* Give up: close, remove the temporary (only it). Releases o; a no-op on a
 * released or zeroed handle. */
void dg_file_out_abort(dg_file_out *o);

/* Write n bytes of buf to `path` as one file, all or nothing. */
int dg_file_out_replace(const char *path, const void *buf, size_t n, const char *flag, dg_err *err);

/* Flush standard output and report a write to it that failed, now or
 * earlier (its error flag): "standard output: write failed: <why>". */
int dg_stdout_flush(dg_err *err);

#endif /* DG_FILE_OUT_H */
