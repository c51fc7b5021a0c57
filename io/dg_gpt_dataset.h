/* dg_gpt_dataset.h — training samples cut from an indexed dataset with the
 * semantics of Megatron-Core's GPTDataset (megatron/core/datasets/gpt_dataset.py).
 *
 * A split of the dataset is a contiguous range of sequence ids [begin, end)
 * (Megatron calls the sequences "documents" here). Three indices define the
 * sample stream, built exactly as Megatron builds them, so the same data,
 * seed and sizes give the same samples in the same order:
 *
 *  - document index  int32[num_epochs * n_seq]: the split's sequence ids,
 *    repeated once per epoch and shuffled by numpy.random.RandomState(seed).
 *    When more than one epoch is needed and the samples wanted from the last
 *    epoch are fewer than 80% of an epoch, the last epoch is shuffled
 *    separately ("separate final epoch") so it is not mixed into the others.
 *  - sample index    int64[num_samples + 1][2]: (position in the document
 *    index, token offset in that sequence) where each sample starts. Sample s
 *    covers the seq_length + 1 tokens from entry s to entry s+1 inclusive of
 *    the end token: consecutive samples overlap by one token (the last token
 *    of one sample is the first of the next), so each token of the
 *    concatenated stream is a prediction *target* of exactly one sample.
 *    Samples run across sequence boundaries.
 *  - shuffle index   int64[num_samples]: a permutation of the samples, one
 *    shuffle over the full epochs and, with a separate final epoch, another
 *    over the samples of the final epoch, which come last.
 *
 * num_epochs is the smallest count whose tokens cover num_samples *
 * seq_length + 1 tokens; a split with fewer tokens than one sample is built
 * the same way, its sequences repeated over as many epochs as the samples
 * need. The indices are cached as .npy files (Megatron's
 * names: <hash>-GPTDataset-<split>-{document,sample,shuffle}_index.npy plus
 * a -description.txt) beside the data, and re-used when the description
 * matches.
 */
#ifndef DG_GPT_DATASET_H
#define DG_GPT_DATASET_H

#include <stdint.h>

#include "dg_base.h"
#include "dg_indexed.h"

typedef struct dg_gpt_config {
    int64_t seq_length;     /* tokens per training sequence (the sample has one more) */
    uint32_t seed;          /* Megatron's --seed (random_seed) */
    int drop_last_partial;  /* 1 (Megatron's default for train): drop a final short sample */
    int32_t pad_token;      /* fills a short final sample when drop_last_partial == 0 */
    /* Where the .npy indices are cached: NULL means <dir of the prefix>/cache/GPTDataset_indices
     * (silently not cached when that is not writable), "" disables caching; a named
     * directory that cannot be written is DG_EINPUT. */
    const char *cache_dir;
} dg_gpt_config;

typedef struct dg_gpt_dataset {
    const dg_indexed *data; /* not owned; must outlive the dataset */
    int64_t seq_begin, seq_end; /* the split: sequence ids [seq_begin, seq_end) */
    int64_t seq_length;
    int32_t pad_token;
    int64_t tokens_per_epoch;
    int64_t num_epochs;
    int separate_final_epoch;
    int64_t num_samples;       /* samples available (>= requested) */
    int32_t *doc_index;        /* [doc_index_len] sequence ids */
    int64_t doc_index_len;
    int64_t *sample_index;     /* [(num_samples + 1) * 2] (doc-index position, offset) pairs */
    int64_t *shuffle_index;    /* [num_samples] */
    int cache_hit;             /* 1 when the indices were loaded from the cache */
    char cache_base[1024];     /* path prefix of the cache files, "" when not cached */
} dg_gpt_dataset;

/* Build (or load from the cache) the indices for the split [seq_begin,
 * seq_end) of `data`, with at least `num_samples` samples (num_samples < 0:
 * exactly one epoch). `split_name` ("train", "valid", "test") names the
 * cache files. A split without sequences, or with fewer than 2 tokens
 * (Megatron has no indices for those), is DG_EINPUT. */
int dg_gpt_dataset_build(dg_gpt_dataset *ds, const dg_indexed *data, int64_t seq_begin, int64_t seq_end,
                         int64_t num_samples, const dg_gpt_config *cfg, const char *split_name, dg_err *err);
void dg_gpt_dataset_free(dg_gpt_dataset *ds);

/* Sample i (0 <= i < num_samples) of the shuffled stream: tokens[seq_length + 1]. */
void dg_gpt_dataset_sample(const dg_gpt_dataset *ds, int64_t i, int32_t *tokens);
/* Sample j in the unshuffled order (entry j of the sample index). */
void dg_gpt_dataset_sample_unshuffled(const dg_gpt_dataset *ds, int64_t j, int32_t *tokens);

#endif /* DG_GPT_DATASET_H */
