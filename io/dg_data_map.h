/* dg_data_map.h — read-only memory mapping of a whole file, for the data
 * pipeline (indexed datasets, input corpora, cached .npy indices). */
#ifndef DG_DATA_MAP_H
#define DG_DATA_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "dg_base.h"

typedef struct dg_map {
    const uint8_t *p; /* n bytes of the file; NULL when the file is empty */
    size_t n;
} dg_map;

/* Map `path` read-only. A missing or unreadable file is DG_EINPUT with a
 * message naming it. */
int dg_map_file(dg_map *m, const char *path, dg_err *err);
void dg_unmap(dg_map *m);

/* Whether `path` exists as a regular file. */
int dg_file_exists(const char *path);
/* mkdir -p. DG_EINPUT with the path on failure. */
int dg_mkdirs(const char *path, dg_err *err);

#endif /* DG_DATA_MAP_H */
