/* dg_bpe_train.h — learn a byte-level BPE (GPT-2 style) from a corpus.
 *
 * The corpus is cut into pieces by the GPT-2 pre-tokenizer and counted
 * (merges never cross pieces). Starting from the 256 byte tokens, each step
 * merges the most frequent adjacent pair (ties: the pair with the smaller
 * (left, right) ids), until the vocabulary holds vocab_size tokens: 256
 * bytes + (vocab_size - 257) merges + <|endoftext|>. Pair counts are
 * updated incrementally (only the pieces that hold the merged pair are
 * revisited), with a lazy max-heap of pair counts, so a 4096-token
 * vocabulary over a few MB trains in about a second.
 */
#ifndef DG_BPE_TRAIN_H
#define DG_BPE_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "dg_base.h"
#include "dg_bpe.h"

typedef struct dg_bpe_trainer dg_bpe_trainer;

dg_bpe_trainer *dg_bpe_trainer_new(void);
/* Count the pieces of one text (a document). */
void dg_bpe_trainer_add(dg_bpe_trainer *t, const uint8_t *text, size_t n);
/* Learn the merges (once per trainer); out gets the tokenizer
 * (dg_bpe_from_merges layout).
 * vocab_size must be >= 257. If the corpus runs out of pairs first, the
 * vocabulary is smaller (out->vocab_size says how large). */
int dg_bpe_trainer_train(dg_bpe_trainer *t, int32_t vocab_size, dg_bpe *out, dg_err *err);
void dg_bpe_trainer_free(dg_bpe_trainer *t);

/* DG_OK when a vocabulary of vocab_size can be trained here: >= 257, and
 * the tables sized by it fit in this rank's memory (else one line, "needs
 * X GB, this rank has Y GB"). dg_bpe_trainer_train checks it first; callers
 * may check before reading a corpus. */
int dg_bpe_train_check_size(int32_t vocab_size, dg_err *err);

#endif /* DG_BPE_TRAIN_H */
