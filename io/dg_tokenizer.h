/* dg_tokenizer.h — the tokenizers `dagatron preprocess` and training use,
 * by Megatron's --tokenizer-type name:
 *
 *   ByteLevelTokenizer  (default, needs no files) ids 0..255 are the bytes,
 *                       256 is the end-of-document token; vocabulary 257.
 *   GPT2BPETokenizer    byte-level BPE from --vocab-file vocab.json and
 *                       --merge-file merges.txt (dg_bpe.h); the
 *                       end-of-document token is <|endoftext|>.
 *   HuggingFaceTokenizer (also Megatron's older spelling HFTokenizer)
 *                       --tokenizer-model: a local tokenizer.json, or a
 *                       directory holding one; byte-level BPE with its
 *                       pre-tokenizer regexes and added tokens (dg_tok_hf.h);
 *                       end of document: the tokenizer's eos token.
 *   SentencePieceTokenizer, Llama2Tokenizer, GPTSentencePieceTokenizer
 *                       --tokenizer-model tokenizer.model through
 *                       libsentencepiece (dg_tok_sp.h); end of document: its
 *                       eos id.
 *   NullTokenizer       Megatron's: --vocab-size N is the vocabulary before
 *                       the end-of-document token, so the ids are [0, N]
 *                       (N + 1 of them) and N is the end of document
 *                       (dg_tok_null_*, below); the text is whitespace-
 *                       separated integers.
 *
 * Beginning of sequence (bos): SentencePiece's bos id, a HuggingFace
 * tokenizer's "bos_token"; the others have none (Megatron's GPT-2 BPE,
 * byte-level and null tokenizers mark documents by their end alone). No
 * tokenizer here adds it to documents; it is reported for the generation
 * ids of a Hugging Face export.
 *
 * A dg_tokenizer is read-only once opened and may be shared by threads; each
 * thread encodes with its own dg_tok_state (a memo of encoded pieces and
 * scratch buffers).
 */
#ifndef DG_TOKENIZER_H
#define DG_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "dg_base.h"
#include "dg_bpe.h"
#include "dg_data_buf.h"

typedef enum dg_tok_kind {
    DG_TOK_BYTE = 0,
    DG_TOK_GPT2BPE = 1,
    DG_TOK_NULL = 2,
    DG_TOK_HF = 3,
    DG_TOK_SP = 4
} dg_tok_kind;

#define DG_TOK_BYTE_NAME "ByteLevelTokenizer"
#define DG_TOK_GPT2BPE_NAME "GPT2BPETokenizer"
#define DG_TOK_NULL_NAME "NullTokenizer"
#define DG_TOK_HF_NAME "HuggingFaceTokenizer"
#define DG_TOK_SP_NAME "SentencePieceTokenizer"
/* Every --tokenizer-type name accepted, for flag tables and messages. */
#define DG_TOK_TYPE_NAMES                                                                                       \
    "ByteLevelTokenizer|GPT2BPETokenizer|HuggingFaceTokenizer|HFTokenizer|SentencePieceTokenizer|"           \
    "Llama2Tokenizer|GPTSentencePieceTokenizer|NullTokenizer"

/* Megatron's NullTokenizer over --vocab-size n: n + 1 ids, the last one (n)
 * the end of document. Every place that derives ids from --vocab-size asks
 * these (the tokenizer, mock data, the vocabulary to pad). Checkpoints
 * written before this rule record none (io/dg_tok_ckpt.h reads them). */
static inline int64_t dg_tok_null_vocab_size(int64_t n) { return n + 1; }
static inline int32_t dg_tok_null_eod(int64_t n) { return (int32_t)n; }

typedef struct dg_tok_hf dg_tok_hf;
typedef struct dg_tok_sp dg_tok_sp;

typedef struct dg_tokenizer {
    dg_tok_kind kind;
    int64_t vocab_size; /* ids are [0, vocab_size) */
    int32_t eod;        /* end-of-document id, -1 when the vocabulary has none */
    int32_t bos;        /* beginning-of-sequence id, -1 when the tokenizer has none */
    dg_bpe bpe;         /* DG_TOK_GPT2BPE only */
    dg_tok_hf *hf;      /* DG_TOK_HF only */
    dg_tok_sp *sp;      /* DG_TOK_SP only */
} dg_tokenizer;

/* What names a tokenizer: Megatron's tokenizer flags. */
typedef struct dg_tokenizer_opts {
    const char *type;       /* --tokenizer-type (NULL: ByteLevelTokenizer) */
    const char *vocab_file; /* --vocab-file (GPT2BPETokenizer) */
    const char *merge_file; /* --merge-file (GPT2BPETokenizer) */
    const char *model;      /* --tokenizer-model (HuggingFace, SentencePiece) */
    int64_t vocab_size;     /* --vocab-size (NullTokenizer; 0: not given) */
} dg_tokenizer_opts;

/* Open the tokenizer the flags name; a missing or unreadable file is
 * DG_EINPUT naming the flag and the file. Without a type no files may be
 * named (Megatron requires the type; guessing would ignore them). */
int dg_tokenizer_open_opts(dg_tokenizer *t, const dg_tokenizer_opts *o, dg_err *err);
/* The same for the types that need at most --vocab-file / --merge-file. */
int dg_tokenizer_open(dg_tokenizer *t, const char *type, const char *vocab_file, const char *merge_file,
                      dg_err *err);
/* Take over a trained BPE (the tokenizer owns it afterwards). */
void dg_tokenizer_from_bpe(dg_tokenizer *t, dg_bpe *bpe);
void dg_tokenizer_close(dg_tokenizer *t);

typedef struct dg_tok_state {
    dg_bpe_cache cache;
    void *hf;           /* HuggingFace scratch (dg_tok_hf.h), made on first use */
    dg_i32buf ids;      /* SentencePiece output */
} dg_tok_state;
void dg_tok_state_init(dg_tok_state *s);
void dg_tok_state_free(dg_tok_state *s);

/* Append the ids of text[0, n) to out. s may be NULL (slower: no memo). */
void dg_tokenizer_encode(const dg_tokenizer *t, dg_tok_state *s, const uint8_t *text, size_t n, dg_i32buf *out);
/* Append the bytes of ids[0, n) to out; unknown ids are DG_EINPUT. */
int dg_tokenizer_decode(const dg_tokenizer *t, const int32_t *ids, int64_t n, dg_bytebuf *out, dg_err *err);

#endif /* DG_TOKENIZER_H */
