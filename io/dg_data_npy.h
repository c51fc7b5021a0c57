/* dg_data_npy.h — NumPy .npy files (format 1.0) for the cached dataset
 * indices, so `numpy.load` reads what dagatron caches and dagatron reads
 * what numpy.save wrote (little-endian int32, int64 or uint32; C order). */
#ifndef DG_DATA_NPY_H
#define DG_DATA_NPY_H

#include <stdint.h>

#include "dg_base.h"

/* Element types written/read: numpy descr '<i4', '<i8', '<u4'. */
typedef enum dg_npy_type { DG_NPY_I32, DG_NPY_I64, DG_NPY_U32 } dg_npy_type;

/* Write `data` (int64 values, rows*cols of them, row-major) converted to
 * `type`, with shape (rows,) when cols == 0 else (rows, cols). The file is
 * written beside path and renamed over it (base/dg_file_out.h), so readers
 * never see half a file. */
int dg_npy_write(const char *path, dg_npy_type type, const int64_t *data, int64_t rows, int64_t cols, dg_err *err);

/* Read a 1-D or 2-D integer array into a new int64 buffer (*data, free with
 * dg_free); *rows, *cols as in dg_npy_write (cols = 0 for 1-D). */
int dg_npy_read(const char *path, int64_t **data, int64_t *rows, int64_t *cols, dg_err *err);

#endif /* DG_DATA_NPY_H */
