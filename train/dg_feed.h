/* dg_feed.h — where training samples come from: the default fortunes corpus,
 * Megatron indexed datasets (--data-path, blended, split; or each split its
 * own: --train-data-path, --valid-data-path, --test-data-path), or generated
 * tokens (--mock-data).
 *
 * A sample is seq_length + 1 tokens; the model reads tokens [0, S) and
 * predicts [1, S + 1). Mock samples are arithmetic progressions modulo the
 * tokenizer's ids (as Megatron's mock data, drawn from the tokenizer's
 * vocabulary: NullTokenizer's N + 1 for --vocab-size N unless another
 * --tokenizer-type is named) with a seeded start and stride, so a model can
 * learn them and the loss falls, which random tokens would not allow.
 */
#ifndef DG_FEED_H
#define DG_FEED_H

#include "dg_blend.h"
#include "dg_train_config.h"

typedef struct dg_feed {
    int mock;
    dg_data data;       /* when !mock */
    int64_t vocab;      /* tokens are in [0, vocab) */
    int32_t eod;        /* the tokenizer's end of document (-1: none), for checkpoints */
    int64_t seq_length;
    uint64_t seed;
    char source[2400];  /* what is being read, for the log */
} dg_feed;

/* Is c's tokenizer NullTokenizer over --vocab-size (named, or mock data
 * naming no other tokenizer)? Its ids are then known from the flags alone. */
int dg_feed_null_tokenizer(const dg_train_config *c);

/* Open the feed c asks for and report the tokenizer's vocabulary (before
 * padding) in f->vocab and its end of document in f->eod. num_samples:
 * wanted per split (train, valid, test). */
int dg_feed_open(dg_feed *f, const dg_train_config *c, const int64_t num_samples[3], dg_err *err);
void dg_feed_close(dg_feed *f);

/* With --train/valid/test-data-path: "train: P; valid: Q" for logs and the
 * checkpoint's record ("" without them). */
void dg_feed_split_paths_describe(const dg_train_config *c, char *out, size_t cap);

/* Micro-batch of `mbs` samples for data shard `shard` of `n_shards`,
 * after `consumed` samples of the split: tokens [mbs][seq_length + 1]. */
int dg_feed_microbatch(const dg_feed *f, int split, int64_t consumed, int shard, int n_shards,
                       int mbs, int32_t *tokens, dg_err *err);

#endif /* DG_FEED_H */
