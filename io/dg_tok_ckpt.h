/* dg_tok_ckpt.h — the tokenizer a checkpoint was trained with, reopened from
 * its manifest's "tokenizer" object (io/dg_checkpoint.h): its ids and its
 * end of document as that run had them. `dagatron generate` and `convert
 * --to hf` ask this, so a checkpoint's end of document has one answer.
 *
 *   NullTokenizer   the recorded vocab_size ids. The end of document is the
 *                   recorded "eod" (Megatron's rule, dg_tok_null_*: the last
 *                   id). A checkpoint written before "eod" was recorded
 *                   followed the older rule: --vocab-size N gave N ids with
 *                   N - 1 the end of document, and none on mock data (whose
 *                   tokens never ended a document); it reads as it did then.
 *   the others      reopened from the files the manifest names (no files for
 *                   ByteLevelTokenizer, the type of an empty "type"); a
 *                   recorded "eod" must be the reopened tokenizer's, else
 *                   the files changed since the run.
 */
#ifndef DG_TOK_CKPT_H
#define DG_TOK_CKPT_H

#include "dg_checkpoint.h"
#include "dg_tokenizer.h"

/* Open m's tokenizer into *t (close it with dg_tokenizer_close). DG_EINPUT
 * with one line starting with `where` (the manifest's path) when its files
 * cannot be reopened or disagree with the record. */
int dg_tokenizer_open_ckpt(dg_tokenizer *t, const dg_ckpt_meta *m, const char *where, dg_err *err);

#endif /* DG_TOK_CKPT_H */
