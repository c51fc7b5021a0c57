/* dg_data_npy.c — see dg_data_npy.h. */
#define _POSIX_C_SOURCE 200809L
#include "dg_data_npy.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "dg_data_map.h"
#include "dg_file_out.h"

static const char *descr_of(dg_npy_type t) {
    return t == DG_NPY_I32 ? "<i4" : t == DG_NPY_I64 ? "<i8" : "<u4";
}

int dg_npy_write(const char *path, dg_npy_type type, const int64_t *data, int64_t rows, int64_t cols, dg_err *err) {
    char header[256];
    int hl;
    if (cols == 0)
        hl = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': (%" PRId64 ",), }",
                      descr_of(type), rows);
    else
        hl = snprintf(header, sizeof header,
                      "{'descr': '%s', 'fortran_order': False, 'shape': (%" PRId64 ", %" PRId64 "), }",
                      descr_of(type), rows, cols);
    /* Pad with spaces so magic(6)+version(2)+len(2)+header+'\n' is a multiple of 64. */
    int total = 10 + hl + 1;
    int pad = (64 - total % 64) % 64;
    for (int i = 0; i < pad; i++) header[hl++] = ' ';
    header[hl++] = '\n';
    dg_file_out o;
    DG_TRY(dg_file_out_open(&o, path, NULL, err));
    uint8_t pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (uint8_t)(hl & 0xff), (uint8_t)(hl >> 8)};
    int st = dg_file_out_write(&o, pre, 10, err);
    if (st == DG_OK) st = dg_file_out_write(&o, header, (size_t)hl, err);
    int64_t n = rows * (cols ? cols : 1);
    size_t isz = type == DG_NPY_I64 ? 8 : 4;
    uint8_t buf[8192];
    for (int64_t i = 0; st == DG_OK && i < n;) {
        size_t k = 0;
        for (; k + isz <= sizeof buf && i < n; i++, k += isz) {
            if (type == DG_NPY_I64) {
                memcpy(buf + k, &data[i], 8);
            } else if (type == DG_NPY_I32) {
                int32_t v = (int32_t)data[i];
                memcpy(buf + k, &v, 4);
            } else {
                uint32_t v = (uint32_t)data[i];
                memcpy(buf + k, &v, 4);
            }
        }
        st = dg_file_out_write(&o, buf, k, err);
    }
    if (st == DG_OK) return dg_file_out_commit(&o, err);
    dg_file_out_abort(&o);
    return st;
}

int dg_npy_read(const char *path, int64_t **data, int64_t *rows, int64_t *cols, dg_err *err) {
    dg_map m;
    DG_TRY(dg_map_file(&m, path, err));
    int st = DG_OK;
    *data = NULL;
    if (m.n < 10 || memcmp(m.p, "\x93NUMPY", 6) != 0) {
        st = dg_err_set(err, DG_EINPUT, "%s: not a .npy file", path);
        goto out;
    }
    size_t hl, off;
    if (m.p[6] == 1) {
        hl = m.p[8] | ((size_t)m.p[9] << 8);
        off = 10;
    } else if (m.p[6] <= 3 && m.n >= 12) {
        hl = m.p[8] | ((size_t)m.p[9] << 8) | ((size_t)m.p[10] << 16) | ((size_t)m.p[11] << 24);
        off = 12;
    } else {
        st = dg_err_set(err, DG_EINPUT, "%s: unsupported .npy version %d", path, m.p[6]);
        goto out;
    }
    if (off + hl > m.n || hl > 4000) {
        st = dg_err_set(err, DG_EINPUT, "%s: truncated .npy header", path);
        goto out;
    }
    char h[4096];
    memcpy(h, m.p + off, hl);
    h[hl] = 0;
    size_t isz = 0;
    int kind = 0; /* 1 i4, 2 i8, 3 u4 */
    if (strstr(h, "'<i4'")) kind = 1, isz = 4;
    else if (strstr(h, "'<i8'")) kind = 2, isz = 8;
    else if (strstr(h, "'<u4'")) kind = 3, isz = 4;
    const char *sh = strstr(h, "'shape': (");
    if (!kind || !sh || strstr(h, "'fortran_order': True")) {
        st = dg_err_set(err, DG_EINPUT, "%s: unsupported .npy header (need C-order <i4, <i8 or <u4): %s", path, h);
        goto out;
    }
    sh += 10;
    char *end;
    *rows = strtoll(sh, &end, 10);
    *cols = 0;
    while (*end == ',' || *end == ' ') end++;
    if (*end >= '0' && *end <= '9') *cols = strtoll(end, &end, 10);
    int64_t n = *rows * (*cols ? *cols : 1);
    size_t body = off + hl;
    if (n < 0 || (m.n - body) / isz < (size_t)n) {
        st = dg_err_set(err, DG_EINPUT, "%s: truncated .npy data", path);
        goto out;
    }
    int64_t *d = dg_malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    const uint8_t *p = m.p + body;
    for (int64_t i = 0; i < n; i++) {
        if (kind == 1) {
            int32_t v;
            memcpy(&v, p + 4 * i, 4);
            d[i] = v;
        } else if (kind == 2) {
            memcpy(&d[i], p + 8 * i, 8);
        } else {
            uint32_t v;
            memcpy(&v, p + 4 * i, 4);
            d[i] = v;
        }
    }
    *data = d;
out:
    dg_unmap(&m);
    return st;
}
