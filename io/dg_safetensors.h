/* dg_safetensors.h — Hugging Face's safetensors files, read and written.
 *
 * A file is: 8 bytes, the little-endian length N of a JSON header; N bytes
 * of JSON (padded with spaces to a multiple of 8, as Hugging Face writes
 * it); then the tensors' raw little-endian bytes. The header maps each
 * tensor's name to { "dtype": "F32"|"BF16"|..., "shape": [...],
 * "data_offsets": [begin, end] } (offsets relative to the end of the
 * header) and may hold a "__metadata__" object of strings.
 *
 * Reading checks everything before a byte of data is used: the header
 * length against the file size, the JSON, each dtype, shape and offset
 * pair (end - begin = elements x dtype size, end within the file), so a
 * corrupted or truncated file is one DG_EINPUT line naming the file.
 * Only F32, BF16 and F16 tensors are understood (the dtypes of trained
 * weights); other dtypes are refused by name.
 */
#ifndef DG_SAFETENSORS_H
#define DG_SAFETENSORS_H

#include <stdint.h>

#include "dg_base.h"
#include "dg_graph.h"

#define DG_ST_NAME_LEN 256
#define DG_ST_MAX_HEADER (100LL << 20) /* Hugging Face's own limit on the JSON header */

/* One tensor of a file: where its bytes are (absolute file offsets). */
typedef struct dg_st_entry {
    char name[DG_ST_NAME_LEN];
    dg_dtype dtype; /* DG_F32, DG_BF16 or DG_F16 */
    int ndim;
    int64_t shape[DG_MAX_DIMS];
    int64_t offset, nbytes;
} dg_st_entry;

/* A parsed file header. */
typedef struct dg_st_file {
    char path[4096];
    int n;
    dg_st_entry *e;
} dg_st_file;

/* Read and validate path's header. Free with dg_st_close. */
int dg_st_open(const char *path, dg_st_file *f, dg_err *err);
void dg_st_close(dg_st_file *f);

/* The entry called name, or NULL. */
const dg_st_entry *dg_st_find(const dg_st_file *f, const char *name);

/* Read entry e's bytes into out (e->nbytes bytes). DG_EINPUT naming the
 * file when it cannot be read in full. */
int dg_st_read(const dg_st_file *f, const dg_st_entry *e, void *out, dg_err *err);

/* One tensor to write: data holds elements x dtype size bytes. */
typedef struct dg_st_tensor {
    const char *name;
    dg_dtype dtype;
    int ndim;
    int64_t shape[DG_MAX_DIMS];
    const void *data;
} dg_st_tensor;

/* Write t[0, n) to path, in order: written beside it, fsynced and renamed
 * over it (base/dg_file_out.h), so a failure leaves an old file as it was.
 * DG_EINPUT naming the path for a file-system failure; DG_EINTERNAL for a
 * dtype safetensors cannot name. */
int dg_st_write(const char *path, const dg_st_tensor *t, int n, dg_err *err);

/* "F32", "BF16", "F16"; NULL for other dtypes. */
const char *dg_st_dtype_name(dg_dtype d);

#endif /* DG_SAFETENSORS_H */
