/* dg_tokenizer_ckpt.h — the tokenizer a checkpoint records (dg_ckpt_tokenizer
 * in its manifest: --tokenizer-type, the files, the vocabulary), reopened
 * through dg_tokenizer.h, and the record that reopens as a NullTokenizer of
 * a given end of document.
 *
 * The one place that reads what a record means, so that a change of
 * convention (NullTokenizer's ids against --vocab-size) is made here and
 * every reader of a checkpoint's tokenizer follows it.
 */
#ifndef DG_TOKENIZER_CKPT_H
#define DG_TOKENIZER_CKPT_H

#include "dg_checkpoint.h"
#include "dg_tokenizer.h"

/* Open the tokenizer m records (no type: ByteLevelTokenizer, dagatron's
 * default). DG_EINPUT naming `where` (the checkpoint) and the reason when it
 * cannot be reopened: a file it names gone or changed, a NullTokenizer
 * without a vocabulary. Close with dg_tokenizer_close. */
int dg_tokenizer_open_ckpt(dg_tokenizer *t, const dg_ckpt_meta *m, const char *where, dg_err *err);

/* The record of a NullTokenizer whose end-of-document id is eod (>= 0) into
 * *rec (type and vocab_size; the file names are cleared). */
int dg_tokenizer_null_record(int32_t eod, dg_ckpt_tokenizer *rec, dg_err *err);

#endif /* DG_TOKENIZER_CKPT_H */
