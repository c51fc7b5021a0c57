/* dg_indexed.h — Megatron-Core's indexed dataset (.bin/.idx), byte-compatible
 * with megatron/core/datasets/indexed_dataset.py.
 *
 * A dataset is two files sharing a prefix P:
 *
 *   P.idx  (little-endian)
 *     offset 0   char[9]   magic "MMIDIDX\0\0"
 *     offset 9   uint64    version, always 1
 *     offset 17  uint8     dtype code of the tokens in P.bin (dg_idx_dtype)
 *     offset 18  uint64    S = number of sequences
 *     offset 26  uint64    D = number of document-index entries (documents + 1)
 *     offset 34  int32[S]  sequence lengths, in tokens
 *                int64[S]  byte offset of each sequence in P.bin
 *                int64[D]  document indices: document d is the sequences
 *                          [doc[d], doc[d+1]); doc[0] == 0, doc[D-1] == S,
 *                          non-decreasing (an empty document repeats a value)
 *   P.bin  the token arrays of all sequences concatenated, no header.
 *
 * The header is 34 bytes, so the arrays in P.idx are not aligned: read them
 * through the accessors below (they compile to plain unaligned loads).
 *
 * Reading memory-maps both files and validates every field once at open:
 * a bad file gives DG_EINPUT and a one-line message naming the file and the
 * problem (truncated, wrong magic, version, dtype, pointer past the end of
 * .bin, document indices out of order).
 */
#ifndef DG_INDEXED_H
#define DG_INDEXED_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "dg_base.h"
#include "dg_file_out.h"

/* Megatron's DType codes. */
typedef enum dg_idx_dtype {
    DG_IDX_U8 = 1,
    DG_IDX_I8 = 2,
    DG_IDX_I16 = 3,
    DG_IDX_I32 = 4,
    DG_IDX_I64 = 5,
    DG_IDX_F64 = 6,
    DG_IDX_F32 = 7,
    DG_IDX_U16 = 8,
} dg_idx_dtype;

#define DG_IDX_MAGIC "MMIDIDX\0\0"
#define DG_IDX_MAGIC_LEN 9
#define DG_IDX_HEADER_LEN 34

/* Bytes per element of a dtype code; 0 for an unknown code. */
size_t dg_idx_dtype_size(int code);
/* "uint16", "int32", ...; "unknown" for an unknown code. */
const char *dg_idx_dtype_name(int code);
/* The dtype Megatron picks for a vocabulary: uint16 under 65500, else int32. */
int dg_idx_dtype_for_vocab(int64_t vocab_size);

/* An open, validated, memory-mapped dataset. All fields are read-only. */
typedef struct dg_indexed {
    char *prefix;   /* P */
    char *idx_path; /* P.idx */
    char *bin_path; /* P.bin */
    int dtype;      /* dg_idx_dtype code */
    size_t itemsize;
    int64_t num_sequences; /* S */
    int64_t num_docs;      /* D - 1 documents */
    int64_t num_tokens;    /* sum of the sequence lengths */
    const uint8_t *idx;    /* mapping of P.idx, idx_size bytes */
    size_t idx_size;
    const uint8_t *bin; /* mapping of P.bin, bin_size bytes (NULL when 0) */
    size_t bin_size;
} dg_indexed;

/* Open prefix.idx / prefix.bin and validate them. On failure *ds is left
 * zeroed and err names the file and the problem. */
int dg_indexed_open(dg_indexed *ds, const char *prefix, dg_err *err);
void dg_indexed_close(dg_indexed *ds);

/* Field accessors (i in [0, S) for sequences, d in [0, D) for doc indices). */
static inline int32_t dg_indexed_seq_len(const dg_indexed *ds, int64_t i) {
    int32_t v;
    memcpy(&v, ds->idx + DG_IDX_HEADER_LEN + 4 * i, 4);
    return v;
}
static inline int64_t dg_indexed_seq_ptr(const dg_indexed *ds, int64_t i) {
    int64_t v;
    memcpy(&v, ds->idx + DG_IDX_HEADER_LEN + 4 * ds->num_sequences + 8 * i, 8);
    return v;
}
static inline int64_t dg_indexed_doc_index(const dg_indexed *ds, int64_t d) {
    int64_t v;
    memcpy(&v, ds->idx + DG_IDX_HEADER_LEN + 12 * ds->num_sequences + 8 * d, 8);
    return v;
}

/* Copy tokens [offset, offset + n) of sequence `seq` into out[n], converted
 * to int32 (integer dtypes; float dtypes are truncated). The range must lie
 * inside the sequence (checked with DG_ASSERT: callers compute it). */
void dg_indexed_read(const dg_indexed *ds, int64_t seq, int64_t offset, int64_t n, int32_t *out);

/* ---------------------------------------------------------------------------
 * Writing, like Megatron's IndexedDatasetBuilder: tokens stream into P.bin as
 * sequences are added; P.idx is written by dg_indexed_writer_close. Both go
 * to temporary files beside P.bin and P.idx (base/dg_file_out.h), renamed
 * over them only once both are complete: a failed run leaves an existing
 * dataset at P as it was.
 * ------------------------------------------------------------------------- */
typedef struct dg_indexed_writer {
    dg_file_out bin, idx;
    char *idx_path, *bin_path;
    int dtype;
    size_t itemsize;
    int32_t *lengths; /* [num_sequences] */
    int64_t num_sequences, cap_sequences;
    int64_t *docs; /* [num_doc_entries], docs[0] == 0 */
    int64_t num_doc_entries, cap_docs;
    uint8_t *scratch; /* conversion buffer */
    size_t scratch_cap;
} dg_indexed_writer;

/* Start prefix.bin (its temporary) for tokens of `dtype`. */
int dg_indexed_writer_open(dg_indexed_writer *w, const char *prefix, int dtype, dg_err *err);
/* Append one sequence of n tokens (n may be 0). A token that does not fit
 * the dtype is DG_EINPUT. */
int dg_indexed_writer_add(dg_indexed_writer *w, const int32_t *tokens, int64_t n, dg_err *err);
/* Close the current document (the sequences added since the last call). */
void dg_indexed_writer_end_document(dg_indexed_writer *w);
/* Write prefix.idx's temporary and make both temporaries complete on disk,
 * not yet in place. On failure the writer is aborted. */
int dg_indexed_writer_close(dg_indexed_writer *w, dg_err *err);
/* After dg_indexed_writer_close: rename .bin, then .idx, into place. The
 * writer is unusable afterwards. */
int dg_indexed_writer_commit(dg_indexed_writer *w, dg_err *err);
/* close + commit. The writer is unusable afterwards. */
int dg_indexed_writer_finish(dg_indexed_writer *w, dg_err *err);
/* Remove the temporaries (after an error): an old dataset at the prefix is
 * left as it was. A no-op on a finished or aborted writer. */
void dg_indexed_writer_abort(dg_indexed_writer *w);

#endif /* DG_INDEXED_H */
