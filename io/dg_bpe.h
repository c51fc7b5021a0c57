/* dg_bpe.h — GPT-2-style byte-level BPE: vocab.json + merges.txt, encoding
 * and decoding (the algorithm of Megatron's GPT2BPETokenizer / OpenAI's
 * encoder.py, written from its description).
 *
 *  - Text is cut into pieces by the GPT-2 pre-tokenizer (regex
 *    's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+,
 *    implemented by hand in dg_bpe_pretok.c over UTF-8).
 *  - Each piece starts as one token per byte; the adjacent pair with the
 *    lowest merge rank is merged (all its occurrences, left to right) until
 *    no pair has a rank. Pieces over 64 bytes use a heap of pairs (same
 *    result, O(n log n) instead of quadratic), shorter ones are memoized.
 *  - vocab.json maps token strings to ids, where a token's bytes are written
 *    with GPT-2's byte-to-unicode table (printable bytes stand for
 *    themselves, the others for U+0100.. in order; a space is "Ġ").
 *    merges.txt holds "#version: 0.2" and then one "left right" pair per line,
 *    rank = line order.
 *  - Any byte string encodes, and decode(encode(x)) == x for every x.
 */
#ifndef DG_BPE_H
#define DG_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "dg_base.h"
#include "dg_data_buf.h"

#define DG_BPE_EOD_TEXT "<|endoftext|>"

/* ---- pre-tokenizer (dg_bpe_pretok.c) ---------------------------------- */

typedef struct dg_cp_range {
    uint32_t lo, hi; /* inclusive code point range */
} dg_cp_range;
extern const dg_cp_range dg_unicode_letters[]; /* sorted \p{L} ranges */
extern const int dg_unicode_letters_len;
extern const dg_cp_range dg_unicode_numbers[]; /* sorted \p{N} ranges */
extern const int dg_unicode_numbers_len;

/* The end of the pre-token that starts at s[i] (i < n): s[i, end) is one
 * piece. Invalid UTF-8 bytes count as one-byte symbols (neither letter,
 * number nor space). */
size_t dg_bpe_pretok_next(const uint8_t *s, size_t n, size_t i);

/* GPT-2's bytes_to_unicode: the code point that stands for each byte. */
uint32_t dg_bpe_byte_char(uint8_t b);
/* The bytes a vocab.json / merges.txt token string s[0, n) (UTF-8 of byte
 * characters) stands for, into out (room for n bytes): returns their count,
 * or -1 when a character is not a byte character (dg_bpe.c). */
int64_t dg_bpe_unmap_token(const char *s, size_t n, uint8_t *out);

/* ---- vocabulary and merges (dg_bpe.c) ----------------------------------- */

typedef struct dg_bpe {
    int32_t vocab_size;  /* ids are [0, vocab_size) */
    uint8_t **tok_bytes; /* [vocab_size] raw bytes of each token (NULL for an unused id) */
    int32_t *tok_len;    /* [vocab_size] */
    int32_t byte_id[256]; /* the token of each single byte */
    int32_t eod;         /* id of <|endoftext|>, -1 when absent */
    int32_t n_merges;
    int32_t (*merges)[3]; /* [n_merges] (left, right, result) ids, by rank */
    uint64_t *pair_key;   /* open-addressed (left << 32 | right) -> rank */
    int32_t *pair_rank;
    size_t pair_cap;      /* power of two */
} dg_bpe;

/* Read vocab.json + merges.txt. Errors name the file (and line). */
int dg_bpe_load(dg_bpe *b, const char *vocab_json, const char *merges_txt, dg_err *err);
/* Write vocab.json (ids in order) + merges.txt, each through a temporary
 * file renamed into place once both are complete (base/dg_file_out.h): a
 * failure leaves the old files as they were. */
int dg_bpe_save(const dg_bpe *b, const char *vocab_json, const char *merges_txt, dg_err *err);
/* A tokenizer from merges over the 256 byte tokens: ids 0..255 are the bytes
 * in GPT-2's vocabulary order, merge k makes id 256 + k, and <|endoftext|>
 * is the last id (vocab_size = 257 + n_merges). pairs[k] = (left, right). */
void dg_bpe_from_merges(dg_bpe *b, const int32_t (*pairs)[2], int32_t n_merges);
void dg_bpe_free(dg_bpe *b);

/* Merge rank of the pair (left, right), or -1. */
int32_t dg_bpe_rank(const dg_bpe *b, int32_t left, int32_t right);

/* A per-thread memo of encoded pieces (word -> ids); never shared. */
typedef struct dg_bpe_cache {
    uint64_t *hash;  /* [cap] 0 = empty slot */
    int64_t *entry;  /* [cap] offset into pool: [len_bytes, n_ids, bytes..., ids...] as int32 words */
    size_t cap, used;
    dg_i32buf pool;
} dg_bpe_cache;
void dg_bpe_cache_init(dg_bpe_cache *c);
void dg_bpe_cache_free(dg_bpe_cache *c);

/* For tokenizers that fill a dg_bpe themselves (tokenizer.json,
 * dg_tok_hf.c): build the pair -> rank table once merges[] is set. */
void dg_bpe_index_merges(dg_bpe *b);
/* Append the ids of one pre-tokenized piece (no further splitting). */
void dg_bpe_encode_piece(const dg_bpe *b, dg_bpe_cache *cache, const uint8_t *piece, size_t n, dg_i32buf *out);

/* Append the ids of text[0, n) to out. cache may be NULL. */
void dg_bpe_encode(const dg_bpe *b, dg_bpe_cache *cache, const uint8_t *text, size_t n, dg_i32buf *out);
/* Append the bytes of ids[0, n) to out; an id outside the vocabulary is DG_EINPUT. */
int dg_bpe_decode(const dg_bpe *b, const int32_t *ids, int64_t n, dg_bytebuf *out, dg_err *err);

#endif /* DG_BPE_H */
