/* dg_tok_sp.h — internal to the tokenizers: a SentencePiece model
 * (tokenizer.model) through libsentencepiece, for --tokenizer-type
 * SentencePieceTokenizer / Llama2Tokenizer / GPTSentencePieceTokenizer.
 *
 * A C API over the C++ library (dg_tok_sp.cc is the project's only C++
 * file). As Megatron's SentencePiece tokenizer does by default: a document
 * encodes as the processor's plain Encode (no BOS or EOS added), the
 * vocabulary is the model's piece count, and the end-of-document id is the
 * model's eos id.
 */
#ifndef DG_TOK_SP_H
#define DG_TOK_SP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dg_tok_sp dg_tok_sp;

/* Load a model; NULL on failure with a one-line reason in msg[cap]. */
dg_tok_sp *dg_tok_sp_open(const char *path, char *msg, size_t cap);
void dg_tok_sp_close(dg_tok_sp *sp);
int64_t dg_tok_sp_vocab_size(const dg_tok_sp *sp);
int32_t dg_tok_sp_eos(const dg_tok_sp *sp); /* -1 when the model has none */
int32_t dg_tok_sp_bos(const dg_tok_sp *sp); /* -1 when the model has none */

/* Encode text[0, n): writes up to cap ids into ids and returns how many
 * there are (call again with a larger buffer when that exceeds cap);
 * -1 when the library refuses the input. */
int64_t dg_tok_sp_encode(const dg_tok_sp *sp, const uint8_t *text, size_t n, int32_t *ids, int64_t cap);

/* Decode ids[0, n) into out[cap] (NUL-terminated when it fits): returns the
 * length of the text, or -1 for an id outside the vocabulary. */
int64_t dg_tok_sp_decode(const dg_tok_sp *sp, const int32_t *ids, int64_t n, char *out, int64_t cap);

#ifdef __cplusplus
}
#endif

#endif /* DG_TOK_SP_H */
