/* dg_blend.h — the training data feed: --data-path blends, --split, and each
 * data-parallel rank's share of a global batch, with Megatron-Core's
 * semantics (blended_megatron_dataset_builder.py, blended_dataset.py,
 * helpers.cpp build_blending_indices, MegatronPretrainingSampler).
 *
 *  --data-path P                 one dataset
 *  --data-path 0.7 A 0.3 B       a blend: weights are normalized; for a split
 *                                that wants N samples, dataset k is asked for
 *                                ceil(ceil(N * w_k) * 1.005) samples and the
 *                                blend has sum_k ceil(N * w_k) samples, picked
 *                                by the greedy rule of build_blending_indices
 *                                (sample i comes from the dataset whose count
 *                                lags w_k * max(i, 1) the most, lowest k on ties)
 *  --data-path A B               no weights: every dataset is used for one
 *                                epoch, weighted by its number of samples
 *  --split 969,30,1              train/valid/test fractions of each dataset's
 *                                sequences: split k is [round(c_k n), round(c_{k+1} n))
 *                                with c the normalized cumulative fractions
 *                                (round half to even, as Python's round)
 *  --train-data-path, --valid-data-path, --test-data-path
 *                                each split its own blend, written as
 *                                --data-path; every dataset of it is used
 *                                whole (Megatron's blend_per_split: --split
 *                                does not apply); a split without one is
 *                                not built
 */
#ifndef DG_BLEND_H
#define DG_BLEND_H

#include <stdint.h>

#include "dg_base.h"
#include "dg_gpt_dataset.h"
#include "dg_indexed.h"

enum { DG_SPLIT_TRAIN = 0, DG_SPLIT_VALID = 1, DG_SPLIT_TEST = 2, DG_SPLIT_COUNT = 3 };

/* "969,30,1" -> normalized fractions w[3] (missing ones are 0). */
int dg_split_parse(const char *s, double w[DG_SPLIT_COUNT], dg_err *err);
/* Sequence ranges [begin[k], end[k]) of n elements; present[k] = 0 when w[k] == 0. */
void dg_split_bounds(const double w[DG_SPLIT_COUNT], int64_t n, int64_t begin[DG_SPLIT_COUNT],
                     int64_t end[DG_SPLIT_COUNT], int present[DG_SPLIT_COUNT]);

/* A parsed --data-path list. */
typedef struct dg_blend_spec {
    int n;            /* number of datasets */
    char **prefixes;  /* [n] */
    double *weights;  /* [n] normalized, or NULL when no weights were given */
} dg_blend_spec;

/* Parse the words after `flag` (--data-path, --train-data-path, ...) as
 * Megatron's get_blend_from_list does; messages name `flag`. */
int dg_blend_spec_parse(const char *flag, int nwords, char **words, dg_blend_spec *spec, dg_err *err);
void dg_blend_spec_free(dg_blend_spec *spec);

/* build_blending_indices: for i in [0, size): dataset_index[i] in [0, n) and
 * dataset_sample_index[i] = how many earlier samples came from that dataset.
 * weights[n] must be normalized. */
void dg_blending_indices(const double *weights, int n, int64_t size, int16_t *dataset_index,
                         int64_t *dataset_sample_index);

/* A blend and its open datasets. */
typedef struct dg_data_source {
    dg_blend_spec spec;
    dg_indexed *sets;       /* [spec.n] */
} dg_data_source;

/* One split of the feed: one dataset, or several blended. */
typedef struct dg_data_split {
    int present;            /* 0 when the split is empty or not wanted */
    int64_t size;           /* samples in this split */
    int n_parts;            /* datasets of its source */
    dg_gpt_dataset *parts;  /* [n_parts] one per dataset (all share the split's seq_length) */
    int16_t *ds_index;      /* [size] which part, NULL for a single dataset */
    int64_t *ds_sample;     /* [size] sample within that part, NULL for a single dataset */
} dg_data_split;

typedef struct dg_data_config {
    int n_words;            /* the --data-path words: one blend cut by --split */
    char **words;
    /* --train-data-path, --valid-data-path, --test-data-path: each split's own
     * blend (n_words must then be 0, and split is not read); 0 words: none */
    int split_n_words[DG_SPLIT_COUNT];
    char **split_words[DG_SPLIT_COUNT];
    const char *split;      /* --split, e.g. "969,30,1" */
    int64_t num_samples[DG_SPLIT_COUNT]; /* wanted per split; < 0: one epoch; 0: skip the split */
    dg_gpt_config gpt;      /* seq_length, seed, cache dir */
} dg_data_config;

typedef struct dg_data {
    /* --data-path: source[0] feeds every split; per-split paths: source[s]
     * feeds split s (spec.n == 0: that split has none) */
    dg_data_source source[DG_SPLIT_COUNT];
    int64_t seq_length;
    dg_data_split split[DG_SPLIT_COUNT];
} dg_data;

/* Open every dataset, build (or load cached) indices for every split.
 * A split without documents is DG_EINPUT naming the split and the dataset. */
int dg_data_open(dg_data *d, const dg_data_config *cfg, dg_err *err);
void dg_data_close(dg_data *d);

/* Sample i of a split: tokens[seq_length + 1]. */
void dg_data_sample(const dg_data *d, int split, int64_t i, int32_t *tokens);

/* The micro-batch that data shard `shard` of `n_shards` reads once
 * `consumed` samples of the split have been consumed by all ranks together
 * (MegatronPretrainingSampler): samples consumed + shard * mbs + [0, mbs),
 * into tokens[mbs][seq_length + 1]. Consecutive micro-batches advance
 * consumed by mbs * n_shards; a global batch is num_microbatches of them.
 * Running past the end of the split is DG_EINPUT. */
int dg_data_microbatch(const dg_data *d, int split, int64_t consumed, int shard, int n_shards, int mbs,
                       int32_t *tokens, dg_err *err);

#endif /* DG_BLEND_H */
