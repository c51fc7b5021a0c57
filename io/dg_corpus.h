/* dg_corpus.h — where documents come from: splitting input files into
 * records (JSONL lines, or text documents), pulling text out of a JSON
 * record, and the default corpus, Debian's fortunes.
 *
 * Input formats:
 *   JSONL  one JSON object per line; the document is the value of a key
 *          (a string, or a list of strings = the document's sentences).
 *          Blank lines are skipped.
 *   TEXT   with a separator: a line holding exactly the separator (e.g. "%"
 *          in fortune files) ends a document; empty documents are skipped.
 *          Without one: the whole file is one document.
 */
#ifndef DG_CORPUS_H
#define DG_CORPUS_H

#include <stddef.h>
#include <stdint.h>

#include "dg_base.h"
#include "dg_data_buf.h"

#define DG_FORTUNES_DIR "/usr/share/games/fortunes"
#define DG_FORTUNES_SEPARATOR "%"

typedef enum dg_input_format { DG_INPUT_AUTO = 0, DG_INPUT_JSONL = 1, DG_INPUT_TEXT = 2 } dg_input_format;

/* One record of an input file. */
typedef struct dg_record {
    const uint8_t *p; /* bytes of the record inside the mapped file */
    size_t n;
    int64_t line;     /* 1-based line where it starts, for messages */
} dg_record;

/* JSONL for *.json / *.jsonl (and .gz is refused), TEXT otherwise. */
dg_input_format dg_corpus_guess_format(const char *path);

/* Reads the records of p[0, n) a batch at a time (inputs may be far larger
 * than memory for a record array). */
typedef struct dg_record_cursor {
    const uint8_t *p;
    size_t n, pos;         /* next byte to look at */
    int64_t line;          /* its line number */
    dg_input_format fmt;
    const char *separator; /* TEXT only; NULL: the whole file is one document */
} dg_record_cursor;

void dg_record_cursor_init(dg_record_cursor *c, const uint8_t *p, size_t n, dg_input_format fmt,
                           const char *separator);
/* Up to `max` records into out[], stopping early once max_bytes of record
 * bytes are gathered; returns how many (0 at the end). A text document is
 * never split between calls. */
int64_t dg_record_cursor_next(dg_record_cursor *c, dg_record *out, int64_t max, size_t max_bytes);

/* Split p[0, n) into records; *recs (free with dg_free) gets *count of them. */
void dg_corpus_split(const uint8_t *p, size_t n, dg_input_format fmt, const char *separator, dg_record **recs,
                     int64_t *count);

/* The text of `key` in a JSON record: the sentences appended to text, their
 * byte lengths to seg (one per sentence; a string value is one sentence).
 * A record that is not one JSON object (text after it, a raw control byte
 * or an escaped NUL inside a string), lacks the key or holds something else
 * is DG_EINPUT naming path:line. */
int dg_corpus_json_text(const dg_record *r, const char *path, const char *key, dg_bytebuf *text, dg_i32buf *seg,
                        dg_err *err);

/* The fortune files of `dir` (NULL: DG_FORTUNES_DIR): regular files without
 * an extension, sorted by name. *paths[n] is allocated (dg_corpus_free_list). */
int dg_corpus_fortune_files(const char *dir, char ***paths, int *n, dg_err *err);
void dg_corpus_free_list(char **paths, int n);

/* ---- built from corpora (dg_corpus_default.c) --------------------------- */

struct dg_bpe;

/* Train a byte-level BPE of vocab_size tokens on files (records as above;
 * JSONL files use json_key, NULL meaning "text"). */
int dg_corpus_train_bpe(const char *const *files, int n_files, dg_input_format fmt, const char *separator,
                        const char *json_key, int32_t vocab_size, struct dg_bpe *out, dg_err *err);

/* The default training data: the fortunes corpus, one document per fortune,
 * tokenized (with the end-of-document token appended) into an indexed
 * dataset in a cache directory, built once and re-used. */
#define DG_CORPUS_PATH_LEN 1024

typedef struct dg_default_data {
    char dir[DG_CORPUS_PATH_LEN];        /* <cache>/fortunes-byte or <cache>/fortunes-bpe<V> */
    char prefix[DG_CORPUS_PATH_LEN];     /* <dir>/fortunes_text_document: pass to --data-path */
    char vocab_file[DG_CORPUS_PATH_LEN]; /* <dir>/vocab.json, "" for the byte-level tokenizer */
    char merge_file[DG_CORPUS_PATH_LEN]; /* <dir>/merges.txt, "" for the byte-level tokenizer */
    const char *tokenizer_type; /* DG_TOK_BYTE_NAME or DG_TOK_GPT2BPE_NAME */
    int64_t vocab_size;
    int32_t eod;
} dg_default_data;

/* cache_dir NULL: $DG_CACHE_DIR, else $XDG_CACHE_HOME/dagatron, else
 * $HOME/.cache/dagatron. bpe_vocab_size 0 selects the byte-level tokenizer,
 * otherwise a BPE of that size is trained on the corpus first. Safe to call
 * from several processes at once (each builds in a private directory and
 * renames it into place). A cache path too long for DG_CORPUS_PATH_LEN is
 * DG_EINPUT. */
int dg_corpus_default_dataset(const char *cache_dir, int32_t bpe_vocab_size, int workers, dg_default_data *out,
                              dg_err *err);

#endif /* DG_CORPUS_H */
