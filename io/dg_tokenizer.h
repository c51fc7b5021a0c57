/* dg_tokenizer.h — the tokenizers `dagatron preprocess` and training use,
 * by Megatron's --tokenizer-type name:
 *
 *   ByteLevelTokenizer  (default, needs no files) ids 0..255 are the bytes,
 *                       256 is the end-of-document token; vocabulary 257.
 *   GPT2BPETokenizer    byte-level BPE from --vocab-file vocab.json and
 *                       --merge-file merges.txt (dg_bpe.h); the
 *                       end-of-document token is <|endoftext|>.
 *
 * A dg_tokenizer is read-only once opened and may be shared by threads; each
 * thread encodes with its own dg_tok_state (a memo of encoded pieces).
 */
#ifndef DG_TOKENIZER_H
#define DG_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "dg_base.h"
#include "dg_bpe.h"
#include "dg_data_buf.h"

typedef enum dg_tok_kind { DG_TOK_BYTE = 0, DG_TOK_GPT2BPE = 1 } dg_tok_kind;

#define DG_TOK_BYTE_NAME "ByteLevelTokenizer"
#define DG_TOK_GPT2BPE_NAME "GPT2BPETokenizer"

typedef struct dg_tokenizer {
    dg_tok_kind kind;
    int64_t vocab_size; /* ids are [0, vocab_size) */
    int32_t eod;        /* end-of-document id, -1 when the vocabulary has none */
    dg_bpe bpe;         /* DG_TOK_GPT2BPE only */
} dg_tokenizer;

/* Open by type name (NULL means ByteLevelTokenizer, and then no files may be
 * named: Megatron requires the type); the BPE needs both files. */
int dg_tokenizer_open(dg_tokenizer *t, const char *type, const char *vocab_file, const char *merge_file,
                      dg_err *err);
/* Take over a trained BPE (the tokenizer owns it afterwards). */
void dg_tokenizer_from_bpe(dg_tokenizer *t, dg_bpe *bpe);
void dg_tokenizer_close(dg_tokenizer *t);

typedef struct dg_tok_state {
    dg_bpe_cache cache;
} dg_tok_state;
void dg_tok_state_init(dg_tok_state *s);
void dg_tok_state_free(dg_tok_state *s);

/* Append the ids of text[0, n) to out. */
void dg_tokenizer_encode(const dg_tokenizer *t, dg_tok_state *s, const uint8_t *text, size_t n, dg_i32buf *out);
/* Append the bytes of ids[0, n) to out; unknown ids are DG_EINPUT. */
int dg_tokenizer_decode(const dg_tokenizer *t, const int32_t *ids, int64_t n, dg_bytebuf *out, dg_err *err);

#endif /* DG_TOKENIZER_H */
