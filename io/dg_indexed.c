/* dg_indexed.c — reading and writing Megatron's .bin/.idx (see dg_indexed.h). */
#define _POSIX_C_SOURCE 200809L
#include "dg_indexed.h"

#include <inttypes.h>
#include <string.h>

#include "dg_data_map.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "dg_indexed reads and writes little-endian files on a little-endian host only"
#endif

size_t dg_idx_dtype_size(int code) {
    switch (code) {
    case DG_IDX_U8:
    case DG_IDX_I8: return 1;
    case DG_IDX_I16:
    case DG_IDX_U16: return 2;
    case DG_IDX_I32:
    case DG_IDX_F32: return 4;
    case DG_IDX_I64:
    case DG_IDX_F64: return 8;
    default: return 0;
    }
}

const char *dg_idx_dtype_name(int code) {
    switch (code) {
    case DG_IDX_U8: return "uint8";
    case DG_IDX_I8: return "int8";
    case DG_IDX_I16: return "int16";
    case DG_IDX_I32: return "int32";
    case DG_IDX_I64: return "int64";
    case DG_IDX_F64: return "float64";
    case DG_IDX_F32: return "float32";
    case DG_IDX_U16: return "uint16";
    default: return "unknown";
    }
}

int dg_idx_dtype_for_vocab(int64_t vocab_size) { return vocab_size < 65500 ? DG_IDX_U16 : DG_IDX_I32; }

static char *path_with(const char *prefix, const char *ext) {
    size_t n = strlen(prefix), e = strlen(ext);
    char *p = dg_malloc(n + e + 1);
    memcpy(p, prefix, n);
    memcpy(p + n, ext, e + 1);
    return p;
}

static uint64_t rd_u64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* Validate the .idx header and arrays against the .bin size. */
static int validate(dg_indexed *ds, dg_err *err) {
    const char *ip = ds->idx_path;
    if (ds->idx_size < DG_IDX_HEADER_LEN)
        return dg_err_set(err, DG_EINPUT, "%s: truncated index: %zu bytes, the header alone is %d", ip,
                          ds->idx_size, DG_IDX_HEADER_LEN);
    if (memcmp(ds->idx, DG_IDX_MAGIC, DG_IDX_MAGIC_LEN) != 0)
        return dg_err_set(err, DG_EINPUT, "%s: wrong magic (not a Megatron MMIDIDX index file)", ip);
    uint64_t version = rd_u64(ds->idx + 9);
    if (version != 1)
        return dg_err_set(err, DG_EINPUT, "%s: unsupported version %" PRIu64 " (expected 1)", ip, version);
    int code = ds->idx[17];
    if (dg_idx_dtype_size(code) == 0)
        return dg_err_set(err, DG_EINPUT, "%s: unknown dtype code %d (expected 1..8)", ip, code);
    ds->dtype = code;
    ds->itemsize = dg_idx_dtype_size(code);
    uint64_t s = rd_u64(ds->idx + 18), d = rd_u64(ds->idx + 26);
    uint64_t avail = ds->idx_size - DG_IDX_HEADER_LEN;
    if (s > avail / 12 || d > avail / 8 || 12 * s + 8 * d > avail)
        return dg_err_set(err, DG_EINPUT,
                          "%s: truncated index: %" PRIu64 " sequences and %" PRIu64
                          " document indices need %" PRIu64 " bytes after the header, file has %" PRIu64,
                          ip, s, d, (s <= avail && d <= avail) ? 12 * s + 8 * d : UINT64_MAX, avail);
    uint64_t extra = avail - 12 * s - 8 * d;
    /* Megatron's multimodal datasets append int8 sequence modes: allow them. */
    if (extra != 0 && extra != s)
        return dg_err_set(err, DG_EINPUT, "%s: %" PRIu64 " unexpected trailing bytes after the document indices", ip,
                          extra);
    if (d < 1) return dg_err_set(err, DG_EINPUT, "%s: document indices are empty (need at least [0])", ip);
    ds->num_sequences = (int64_t)s;
    ds->num_docs = (int64_t)d - 1;

    /* Lengths, and pointers that follow on from each other: Megatron's writer
     * lays the sequences out back to back from byte 0, so pointer[i+1] =
     * pointer[i] + length[i] * itemsize. A dtype code that disagrees with the
     * data, or an .idx paired with another dataset's .bin, breaks this chain
     * or the total size, and would otherwise train on garbage. */
    int64_t total = 0;
    uint64_t next = 0; /* where sequence i must start */
    for (int64_t i = 0; i < ds->num_sequences; i++) {
        int32_t len = dg_indexed_seq_len(ds, i);
        if (len < 0)
            return dg_err_set(err, DG_EINPUT, "%s: sequence %" PRId64 " has negative length %d", ip, i, len);
        int64_t ptr = dg_indexed_seq_ptr(ds, i);
        if (ptr < 0 || (uint64_t)ptr > ds->bin_size)
            return dg_err_set(err, DG_EINPUT,
                              "%s: sequence %" PRId64 ": byte pointer %" PRId64 " runs past the end of %s (%zu bytes)",
                              ip, i, ptr, ds->bin_path, ds->bin_size);
        if ((uint64_t)ptr != next)
            return dg_err_set(err, DG_EINPUT,
                              "%s: sequence %" PRId64 " starts at byte %" PRId64 ", expected %" PRIu64
                              " (where the previous sequences end, at %d bytes per %s token): the dtype or the "
                              "pointers do not match %s",
                              ip, i, ptr, next, (int)ds->itemsize, dg_idx_dtype_name(code), ds->bin_path);
        next += (uint64_t)len * ds->itemsize;
        total += len;
    }
    ds->num_tokens = total;
    if (next > ds->bin_size)
        return dg_err_set(err, DG_EINPUT,
                          "%s: truncated data file: %zu bytes, the index describes %" PRIu64 " (%" PRId64
                          " tokens of %s)",
                          ds->bin_path, ds->bin_size, next, total, dg_idx_dtype_name(code));
    if (next < ds->bin_size)
        return dg_err_set(err, DG_EINPUT,
                          "%s: %zu bytes, but %s describes %" PRIu64 " (%" PRId64 " tokens of %s): %" PRIu64
                          " trailing bytes, or the two files are not a pair",
                          ds->bin_path, ds->bin_size, ip, next, total, dg_idx_dtype_name(code),
                          (uint64_t)ds->bin_size - next);
    /* Document indices: 0, non-decreasing, ending at S. */
    if (dg_indexed_doc_index(ds, 0) != 0)
        return dg_err_set(err, DG_EINPUT, "%s: document indices out of order: the first is %" PRId64 ", expected 0",
                          ip, dg_indexed_doc_index(ds, 0));
    for (int64_t k = 1; k <= ds->num_docs; k++) {
        int64_t a = dg_indexed_doc_index(ds, k - 1), b = dg_indexed_doc_index(ds, k);
        if (b < a || b > ds->num_sequences)
            return dg_err_set(err, DG_EINPUT,
                              "%s: document indices out of order at entry %" PRId64 ": %" PRId64 " after %" PRId64
                              " (sequence count %" PRId64 ")",
                              ip, k, b, a, ds->num_sequences);
    }
    int64_t last = dg_indexed_doc_index(ds, ds->num_docs);
    if (last != ds->num_sequences)
        return dg_err_set(err, DG_EINPUT,
                          "%s: document indices out of order: the last is %" PRId64 ", expected the sequence count %" PRId64,
                          ip, last, ds->num_sequences);
    return DG_OK;
}

int dg_indexed_open(dg_indexed *ds, const char *prefix, dg_err *err) {
    memset(ds, 0, sizeof *ds);
    ds->prefix = dg_strdup(prefix);
    ds->idx_path = path_with(prefix, ".idx");
    ds->bin_path = path_with(prefix, ".bin");
    dg_map mi, mb;
    int st = dg_map_file(&mi, ds->idx_path, err);
    if (st == DG_OK) {
        st = dg_map_file(&mb, ds->bin_path, err);
        if (st != DG_OK) dg_unmap(&mi);
    }
    if (st == DG_OK) {
        ds->idx = mi.p;
        ds->idx_size = mi.n;
        ds->bin = mb.p;
        ds->bin_size = mb.n;
        st = validate(ds, err);
    }
    if (st != DG_OK) dg_indexed_close(ds);
    return st;
}

void dg_indexed_close(dg_indexed *ds) {
    dg_map m = {ds->idx, ds->idx_size};
    dg_unmap(&m);
    m = (dg_map){ds->bin, ds->bin_size};
    dg_unmap(&m);
    dg_free(ds->prefix);
    dg_free(ds->idx_path);
    dg_free(ds->bin_path);
    memset(ds, 0, sizeof *ds);
}

void dg_indexed_read(const dg_indexed *ds, int64_t seq, int64_t offset, int64_t n, int32_t *out) {
    DG_ASSERT(seq >= 0 && seq < ds->num_sequences);
    DG_ASSERT(offset >= 0 && n >= 0 && offset + n <= dg_indexed_seq_len(ds, seq));
    const uint8_t *p = ds->bin + dg_indexed_seq_ptr(ds, seq) + (size_t)offset * ds->itemsize;
    switch (ds->dtype) {
    case DG_IDX_U8:
        for (int64_t i = 0; i < n; i++) out[i] = p[i];
        break;
    case DG_IDX_I8:
        for (int64_t i = 0; i < n; i++) out[i] = (int8_t)p[i];
        break;
    case DG_IDX_U16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t v;
            memcpy(&v, p + 2 * i, 2);
            out[i] = v;
        }
        break;
    case DG_IDX_I16:
        for (int64_t i = 0; i < n; i++) {
            int16_t v;
            memcpy(&v, p + 2 * i, 2);
            out[i] = v;
        }
        break;
    case DG_IDX_I32: memcpy(out, p, (size_t)n * 4); break;
    case DG_IDX_I64:
        for (int64_t i = 0; i < n; i++) {
            int64_t v;
            memcpy(&v, p + 8 * i, 8);
            out[i] = (int32_t)v;
        }
        break;
    case DG_IDX_F32:
        for (int64_t i = 0; i < n; i++) {
            float v;
            memcpy(&v, p + 4 * i, 4);
            out[i] = (int32_t)v;
        }
        break;
    case DG_IDX_F64:
        for (int64_t i = 0; i < n; i++) {
            double v;
            memcpy(&v, p + 8 * i, 8);
            out[i] = (int32_t)v;
        }
        break;
    default: DG_FATAL("bad dtype %d", ds->dtype);
    }
}

/* ------------------------------------------------------------------------- */

int dg_indexed_writer_open(dg_indexed_writer *w, const char *prefix, int dtype, dg_err *err) {
    memset(w, 0, sizeof *w);
    if (dg_idx_dtype_size(dtype) == 0) return dg_err_set(err, DG_EINPUT, "unknown dtype code %d", dtype);
    w->dtype = dtype;
    w->itemsize = dg_idx_dtype_size(dtype);
    w->idx_path = path_with(prefix, ".idx");
    w->bin_path = path_with(prefix, ".bin");
    int st = dg_file_out_open(&w->bin, w->bin_path, NULL, err);
    if (st != DG_OK) {
        dg_free(w->idx_path);
        dg_free(w->bin_path);
        memset(w, 0, sizeof *w);
        return st;
    }
    w->cap_docs = 64;
    w->docs = dg_malloc(sizeof(int64_t) * (size_t)w->cap_docs);
    w->docs[0] = 0;
    w->num_doc_entries = 1;
    return DG_OK;
}

static int fits(int dtype, int32_t t) {
    switch (dtype) {
    case DG_IDX_U8: return t >= 0 && t <= 255;
    case DG_IDX_I8: return t >= -128 && t <= 127;
    case DG_IDX_U16: return t >= 0 && t <= 65535;
    case DG_IDX_I16: return t >= -32768 && t <= 32767;
    default: return 1;
    }
}

int dg_indexed_writer_add(dg_indexed_writer *w, const int32_t *tokens, int64_t n, dg_err *err) {
    if (n > INT32_MAX) return dg_err_set(err, DG_EINPUT, "%s: sequence of %" PRId64 " tokens exceeds int32", w->bin_path, n);
    size_t bytes = (size_t)n * w->itemsize;
    if (bytes > w->scratch_cap) {
        w->scratch_cap = bytes * 2;
        w->scratch = dg_realloc(w->scratch, w->scratch_cap);
    }
    uint8_t *s = w->scratch;
    for (int64_t i = 0; i < n; i++) {
        int32_t t = tokens[i];
        if (!fits(w->dtype, t))
            return dg_err_set(err, DG_EINPUT, "%s: token %d does not fit the file's dtype %s", w->bin_path, t,
                              dg_idx_dtype_name(w->dtype));
        switch (w->dtype) {
        case DG_IDX_U8:
        case DG_IDX_I8: s[i] = (uint8_t)t; break;
        case DG_IDX_U16:
        case DG_IDX_I16: {
            uint16_t v = (uint16_t)t;
            memcpy(s + 2 * i, &v, 2);
        } break;
        case DG_IDX_I32: memcpy(s + 4 * i, &t, 4); break;
        case DG_IDX_I64: {
            int64_t v = t;
            memcpy(s + 8 * i, &v, 8);
        } break;
        case DG_IDX_F32: {
            float v = (float)t;
            memcpy(s + 4 * i, &v, 4);
        } break;
        case DG_IDX_F64: {
            double v = t;
            memcpy(s + 8 * i, &v, 8);
        } break;
        }
    }
    DG_TRY(dg_file_out_write(&w->bin, s, bytes, err));
    if (w->num_sequences == w->cap_sequences) {
        w->cap_sequences = w->cap_sequences ? 2 * w->cap_sequences : 1024;
        w->lengths = dg_realloc(w->lengths, sizeof(int32_t) * (size_t)w->cap_sequences);
    }
    w->lengths[w->num_sequences++] = (int32_t)n;
    return DG_OK;
}

void dg_indexed_writer_end_document(dg_indexed_writer *w) {
    if (w->num_doc_entries == w->cap_docs) {
        w->cap_docs *= 2;
        w->docs = dg_realloc(w->docs, sizeof(int64_t) * (size_t)w->cap_docs);
    }
    w->docs[w->num_doc_entries++] = w->num_sequences;
}

static void writer_free(dg_indexed_writer *w) {
    dg_free(w->idx_path);
    dg_free(w->bin_path);
    dg_free(w->lengths);
    dg_free(w->docs);
    dg_free(w->scratch);
    memset(w, 0, sizeof *w);
}

/* P.idx's contents (the layout at the top of dg_indexed.h) into w->idx. */
static int write_idx(dg_indexed_writer *w, dg_err *err) {
    uint8_t hdr[DG_IDX_HEADER_LEN];
    uint64_t version = 1, s = (uint64_t)w->num_sequences, d = (uint64_t)w->num_doc_entries;
    memcpy(hdr, DG_IDX_MAGIC, DG_IDX_MAGIC_LEN);
    memcpy(hdr + 9, &version, 8);
    hdr[17] = (uint8_t)w->dtype;
    memcpy(hdr + 18, &s, 8);
    memcpy(hdr + 26, &d, 8);
    dg_file_out *f = &w->idx;
    int st = dg_file_out_write(f, hdr, sizeof hdr, err);
    if (st == DG_OK) st = dg_file_out_write(f, w->lengths, 4 * (size_t)s, err);
    /* Byte pointers: the running sum of the lengths, in bytes. */
    int64_t ptrbuf[1024], ptr = 0;
    for (uint64_t i = 0; st == DG_OK && i < s;) {
        size_t k = 0;
        for (; k < 1024 && i < s; k++, i++) {
            ptrbuf[k] = ptr;
            ptr += (int64_t)w->lengths[i] * (int64_t)w->itemsize;
        }
        st = dg_file_out_write(f, ptrbuf, 8 * k, err);
    }
    if (st == DG_OK) st = dg_file_out_write(f, w->docs, 8 * (size_t)d, err);
    return st;
}

int dg_indexed_writer_close(dg_indexed_writer *w, dg_err *err) {
    int st = dg_file_out_close(&w->bin, err);
    if (st == DG_OK) st = dg_file_out_open(&w->idx, w->idx_path, NULL, err);
    if (st == DG_OK) st = write_idx(w, err);
    if (st == DG_OK) st = dg_file_out_close(&w->idx, err);
    if (st != DG_OK) dg_indexed_writer_abort(w);
    return st;
}

int dg_indexed_writer_commit(dg_indexed_writer *w, dg_err *err) {
    int st = dg_file_out_commit(&w->bin, err);
    if (st == DG_OK) st = dg_file_out_commit(&w->idx, err);
    dg_indexed_writer_abort(w); /* the .idx's temporary if the .bin's rename failed; frees the rest */
    return st;
}

int dg_indexed_writer_finish(dg_indexed_writer *w, dg_err *err) {
    DG_TRY(dg_indexed_writer_close(w, err));
    return dg_indexed_writer_commit(w, err);
}

void dg_indexed_writer_abort(dg_indexed_writer *w) {
    dg_file_out_abort(&w->bin);
    dg_file_out_abort(&w->idx);
    writer_free(w);
}
