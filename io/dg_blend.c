/* dg_blend.c — splits, blends and per-rank batches (see dg_blend.h). */
#define _POSIX_C_SOURCE 200809L
#include "dg_blend.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

static const char *split_names[DG_SPLIT_COUNT] = {"train", "valid", "test"};

int dg_split_parse(const char *s, double w[DG_SPLIT_COUNT], dg_err *err) {
    int n = 0;
    const char *p = s;
    for (int k = 0; k < DG_SPLIT_COUNT; k++) w[k] = 0;
    while (*p) {
        if ((*p >= '0' && *p <= '9') || *p == '.') {
            char *end;
            double v = strtod(p, &end);
            if (end == p) return dg_err_set(err, DG_EINPUT, "--split: cannot parse '%s'", s);
            if (n == DG_SPLIT_COUNT) return dg_err_set(err, DG_EINPUT, "--split: more than 3 fractions in '%s'", s);
            w[n++] = v;
            p = end;
        } else if (*p == ',' || *p == '/' || *p == ' ') {
            p++;
        } else {
            return dg_err_set(err, DG_EINPUT, "--split: unexpected '%c' in '%s' (expected e.g. 969,30,1)", *p, s);
        }
    }
    double sum = 0;
    for (int k = 0; k < DG_SPLIT_COUNT; k++) sum += w[k];
    if (n == 0 || !(sum > 0)) return dg_err_set(err, DG_EINPUT, "--split: '%s' has no positive fraction", s);
    for (int k = 0; k < DG_SPLIT_COUNT; k++) w[k] /= sum;
    return DG_OK;
}

void dg_split_bounds(const double w[DG_SPLIT_COUNT], int64_t n, int64_t begin[DG_SPLIT_COUNT],
                     int64_t end[DG_SPLIT_COUNT], int present[DG_SPLIT_COUNT]) {
    double lo = 0;
    for (int k = 0; k < DG_SPLIT_COUNT; k++) {
        double hi = lo + w[k];
        present[k] = w[k] != 0;
        /* nearbyint rounds half to even in the default mode, like Python's round. */
        begin[k] = (int64_t)nearbyint(lo * (double)n);
        end[k] = (int64_t)nearbyint(hi * (double)n);
        lo = hi;
    }
}

static int parse_weight(const char *s, double *w) {
    char *end;
    *w = strtod(s, &end);
    return end != s && *end == 0;
}

int dg_blend_spec_parse(const char *flag, int nwords, char **words, dg_blend_spec *spec, dg_err *err) {
    memset(spec, 0, sizeof *spec);
    if (nwords <= 0) return dg_err_set(err, DG_EINPUT, "%s: expected one or more dataset prefixes", flag);
    int weighted = nwords % 2 == 0;
    for (int i = 0; weighted && i < nwords; i += 2) {
        double w;
        weighted = parse_weight(words[i], &w);
    }
    if (!weighted) {
        /* An odd count cannot be weight/prefix pairs, so a number among the
         * words is a weight without its prefix (or a prefix without its weight). */
        for (int i = 0; nwords % 2 == 1 && i < nwords; i++) {
            double w;
            if (parse_weight(words[i], &w))
                return dg_err_set(err, DG_EINPUT,
                                  "%s: the weights and prefixes do not pair up: '%s' looks like a weight "
                                  "but %d words cannot be weight/prefix pairs (give a weight for every prefix or none)",
                                  flag, words[i], nwords);
        }
        for (int i = 0; nwords % 2 == 0 && i < nwords; i += 2) {
            double w;
            if (parse_weight(words[i], &w))
                return dg_err_set(err, DG_EINPUT,
                                  "%s: '%s' looks like a weight but '%s' does not (give a weight for every "
                                  "prefix or none)",
                                  flag, words[i], words[i == 0 ? 2 : 0]);
        }
        spec->n = nwords;
        spec->prefixes = dg_malloc(sizeof(char *) * (size_t)nwords);
        for (int i = 0; i < nwords; i++) spec->prefixes[i] = dg_strdup(words[i]);
        return DG_OK;
    }
    spec->n = nwords / 2;
    spec->prefixes = dg_malloc(sizeof(char *) * (size_t)spec->n);
    spec->weights = dg_malloc(sizeof(double) * (size_t)spec->n);
    double sum = 0;
    for (int k = 0; k < spec->n; k++) {
        parse_weight(words[2 * k], &spec->weights[k]);
        spec->prefixes[k] = dg_strdup(words[2 * k + 1]);
        if (!(spec->weights[k] >= 0)) {
            dg_blend_spec_free(spec);
            return dg_err_set(err, DG_EINPUT, "%s: weight '%s' is negative", flag, words[2 * k]);
        }
        sum += spec->weights[k];
    }
    if (!(sum > 0)) {
        dg_blend_spec_free(spec);
        return dg_err_set(err, DG_EINPUT, "%s: the weights sum to 0", flag);
    }
    for (int k = 0; k < spec->n; k++) spec->weights[k] /= sum;
    return DG_OK;
}

void dg_blend_spec_free(dg_blend_spec *spec) {
    for (int k = 0; k < spec->n; k++) dg_free(spec->prefixes[k]);
    dg_free(spec->prefixes);
    dg_free(spec->weights);
    memset(spec, 0, sizeof *spec);
}

void dg_blending_indices(const double *weights, int n, int64_t size, int16_t *dataset_index,
                         int64_t *dataset_sample_index) {
    int64_t *current = dg_calloc((size_t)n, sizeof(int64_t));
    for (int64_t i = 0; i < size; i++) {
        double x = DG_MAX((double)i, 1.0);
        int best = -1;
        double best_err = 0;
        for (int k = 0; k < n; k++) {
            if (!(weights[k] > 0)) continue; /* a zero weight is never drawn */
            double e = weights[k] * x - (double)current[k];
            if (best < 0 || e > best_err) {
                best_err = e;
                best = k;
            }
        }
        dataset_index[i] = (int16_t)best;
        dataset_sample_index[i] = current[best]++;
    }
    dg_free(current);
}

/* A split whose range holds no documents, in one line saying what would
 * give it some (Megatron would loop forever on it). */
static int no_documents(const dg_indexed *set, int s, int64_t b, int64_t e, int per_split, dg_err *err) {
    static const char *path_flag[DG_SPLIT_COUNT] = {"--train-data-path", "--valid-data-path", "--test-data-path"};
    if (per_split)
        return dg_err_set(err, DG_EINPUT, "%s: the %s split's dataset (%s) holds no documents", set->prefix,
                          split_names[s], path_flag[s]);
    return dg_err_set(err, DG_EINPUT,
                      "%s: the %s split [%" PRId64 ", %" PRId64 ") of its %" PRId64
                      " sequences holds no documents (give it a larger --split fraction%s)",
                      set->prefix, split_names[s], b, e, set->num_sequences,
                      s == DG_SPLIT_TRAIN ? "" : ", or no samples: --eval-iters 0");
}

/* Split s of the feed from `src`; b/e[k] is dataset k's sequence range. */
static int build_split(dg_data *d, const dg_data_config *cfg, int s, const dg_data_source *src, const int64_t *b,
                       const int64_t *e, int per_split, dg_err *err) {
    dg_data_split *sp = &d->split[s];
    int n = src->spec.n;
    int64_t want = cfg->num_samples[s];
    sp->parts = dg_calloc((size_t)n, sizeof(dg_gpt_dataset));
    sp->n_parts = n;
    sp->present = 1;
    if (n == 1) {
        if (b[0] >= e[0]) return no_documents(&src->sets[0], s, b[0], e[0], per_split, err);
        DG_TRY(dg_gpt_dataset_build(&sp->parts[0], &src->sets[0], b[0], e[0], want, &cfg->gpt, split_names[s], err));
        sp->size = sp->parts[0].num_samples;
        return DG_OK;
    }
    double *w = dg_malloc(sizeof(double) * (size_t)n);
    int st = DG_OK;
    int64_t size = 0;
    for (int k = 0; k < n && st == DG_OK; k++) {
        int64_t ask = -1;
        if (src->spec.weights && want >= 0) {
            int64_t target = (int64_t)ceil((double)want * src->spec.weights[k]);
            ask = (int64_t)ceil((double)target * 1.005);
            size += target;
        }
        if (src->spec.weights && ask == 0) {
            sp->parts[k].num_samples = 0; /* weight 0: never drawn */
            continue;
        }
        if (b[k] >= e[k]) st = no_documents(&src->sets[k], s, b[k], e[k], per_split, err);
        else
            st = dg_gpt_dataset_build(&sp->parts[k], &src->sets[k], b[k], e[k], ask, &cfg->gpt, split_names[s], err);
    }
    if (st == DG_OK) {
        if (src->spec.weights && want >= 0) {
            for (int k = 0; k < n; k++) w[k] = src->spec.weights[k];
        } else {
            /* No weights (or one epoch wanted): weight by dataset size, use them whole. */
            int64_t total = 0;
            for (int k = 0; k < n; k++) total += sp->parts[k].num_samples;
            for (int k = 0; k < n; k++) w[k] = (double)sp->parts[k].num_samples / (double)total;
            size = want >= 0 ? DG_MIN(want, total) : total;
        }
        sp->size = size;
        sp->ds_index = dg_malloc(sizeof(int16_t) * (size_t)(size ? size : 1));
        sp->ds_sample = dg_malloc(sizeof(int64_t) * (size_t)(size ? size : 1));
        dg_blending_indices(w, n, size, sp->ds_index, sp->ds_sample);
    }
    dg_free(w);
    return st;
}

/* Parse a blend's words and open its datasets. */
static int open_source(dg_data_source *src, const char *flag, int n_words, char **words, dg_err *err) {
    DG_TRY(dg_blend_spec_parse(flag, n_words, words, &src->spec, err));
    if (src->spec.n > INT16_MAX) {
        dg_blend_spec_free(&src->spec);
        return dg_err_set(err, DG_EINPUT, "%s: at most %d datasets", flag, INT16_MAX);
    }
    src->sets = dg_calloc((size_t)src->spec.n, sizeof(dg_indexed));
    for (int k = 0; k < src->spec.n; k++) DG_TRY(dg_indexed_open(&src->sets[k], src->spec.prefixes[k], err));
    return DG_OK;
}

/* --data-path: every dataset cut into the --split ranges. */
static int open_shared(dg_data *d, const dg_data_config *cfg, dg_err *err) {
    double w[DG_SPLIT_COUNT];
    DG_TRY(dg_split_parse(cfg->split ? cfg->split : "969,30,1", w, err));
    dg_data_source *src = &d->source[0];
    DG_TRY(open_source(src, "--data-path", cfg->n_words, cfg->words, err));
    int n = src->spec.n, st = DG_OK;
    /* b/e[k + s*n]: dataset k's range for split s. */
    int64_t *b = dg_malloc(sizeof(int64_t) * (size_t)(n * DG_SPLIT_COUNT));
    int64_t *e = dg_malloc(sizeof(int64_t) * (size_t)(n * DG_SPLIT_COUNT));
    int present[DG_SPLIT_COUNT];
    for (int k = 0; k < n; k++) {
        int64_t bk[DG_SPLIT_COUNT], ek[DG_SPLIT_COUNT];
        dg_split_bounds(w, src->sets[k].num_sequences, bk, ek, present);
        for (int s = 0; s < DG_SPLIT_COUNT; s++) {
            b[k + s * n] = bk[s];
            e[k + s * n] = ek[s];
        }
    }
    for (int s = 0; s < DG_SPLIT_COUNT && st == DG_OK; s++)
        if (w[s] > 0 && cfg->num_samples[s] != 0) st = build_split(d, cfg, s, src, b + s * n, e + s * n, 0, err);
    dg_free(b);
    dg_free(e);
    return st;
}

/* --train/valid/test-data-path: each split's own blend, every dataset whole. */
static int open_per_split(dg_data *d, const dg_data_config *cfg, dg_err *err) {
    static const char *flag[DG_SPLIT_COUNT] = {"--train-data-path", "--valid-data-path", "--test-data-path"};
    for (int s = 0; s < DG_SPLIT_COUNT; s++)
        if (cfg->split_n_words[s] > 0)
            DG_TRY(open_source(&d->source[s], flag[s], cfg->split_n_words[s], cfg->split_words[s], err));
    for (int s = 0; s < DG_SPLIT_COUNT; s++) {
        const dg_data_source *src = &d->source[s];
        if (src->spec.n == 0 || cfg->num_samples[s] == 0) continue;
        int64_t *b = dg_calloc((size_t)src->spec.n, sizeof(int64_t));
        int64_t *e = dg_malloc(sizeof(int64_t) * (size_t)src->spec.n);
        for (int k = 0; k < src->spec.n; k++) e[k] = src->sets[k].num_sequences;
        int st = build_split(d, cfg, s, src, b, e, 1, err);
        dg_free(b);
        dg_free(e);
        DG_TRY(st);
    }
    return DG_OK;
}

int dg_data_open(dg_data *d, const dg_data_config *cfg, dg_err *err) {
    memset(d, 0, sizeof *d);
    d->seq_length = cfg->gpt.seq_length;
    int per_split = 0;
    for (int s = 0; s < DG_SPLIT_COUNT; s++) per_split |= cfg->split_n_words[s] > 0;
    DG_ASSERT(!(per_split && cfg->n_words > 0)); /* the caller refuses both (Megatron: one data source) */
    int st = per_split ? open_per_split(d, cfg, err) : open_shared(d, cfg, err);
    if (st != DG_OK) dg_data_close(d);
    return st;
}

void dg_data_close(dg_data *d) {
    for (int s = 0; s < DG_SPLIT_COUNT; s++) {
        dg_data_split *sp = &d->split[s];
        for (int k = 0; k < sp->n_parts; k++) dg_gpt_dataset_free(&sp->parts[k]);
        dg_free(sp->parts);
        dg_free(sp->ds_index);
        dg_free(sp->ds_sample);
    }
    for (int s = 0; s < DG_SPLIT_COUNT; s++) {
        dg_data_source *src = &d->source[s];
        if (src->sets)
            for (int k = 0; k < src->spec.n; k++)
                if (src->sets[k].prefix) dg_indexed_close(&src->sets[k]);
        dg_free(src->sets);
        dg_blend_spec_free(&src->spec);
    }
    memset(d, 0, sizeof *d);
}

void dg_data_sample(const dg_data *d, int split, int64_t i, int32_t *tokens) {
    const dg_data_split *sp = &d->split[split];
    DG_ASSERT(sp->present && i >= 0 && i < sp->size);
    if (!sp->ds_index) {
        dg_gpt_dataset_sample(&sp->parts[0], i, tokens);
        return;
    }
    const dg_gpt_dataset *part = &sp->parts[sp->ds_index[i]];
    /* The surplus of 0.5% covers the greedy blend; wrap only in the
     * exhaustive (unweighted) mode where it may be off by one. */
    dg_gpt_dataset_sample(part, sp->ds_sample[i] % part->num_samples, tokens);
}

int dg_data_microbatch(const dg_data *d, int split, int64_t consumed, int shard, int n_shards, int mbs,
                       int32_t *tokens, dg_err *err) {
    const dg_data_split *sp = &d->split[split];
    if (!sp->present) return dg_err_set(err, DG_EINPUT, "the %s split is empty (see --split)", split_names[split]);
    if (shard < 0 || shard >= n_shards || mbs <= 0)
        return dg_err_set(err, DG_EINPUT, "bad data-parallel slice: rank %d of %d, micro-batch %d", shard, n_shards,
                          mbs);
    int64_t first = consumed + (int64_t)shard * mbs;
    if (consumed + (int64_t)n_shards * mbs > sp->size)
        return dg_err_set(err, DG_EINPUT,
                          "the %s split has %" PRId64 " samples; a micro-batch at sample %" PRId64
                          " of %d x %d runs past its end",
                          split_names[split], sp->size, consumed, n_shards, mbs);
    for (int m = 0; m < mbs; m++) dg_data_sample(d, split, first + m, tokens + (int64_t)m * (d->seq_length + 1));
    return DG_OK;
}
