/* dg_gpt_dataset.c — Megatron GPTDataset indices and samples (see dg_gpt_dataset.h). */
#define _POSIX_C_SOURCE 200809L
#include "dg_gpt_dataset.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "dg_data_map.h"
#include "dg_data_npy.h"
#include "dg_data_rng.h"
#include "dg_file_out.h"

/* Megatron's _get_num_epochs: the smallest epoch count whose tokens cover
 * num_samples * L + 1 tokens (its loop adds one epoch at a time; this is
 * the same count in closed form, as a short split may need millions). */
static int64_t count_epochs(int64_t tokens_per_epoch, int64_t num_samples, int64_t L) {
    if (num_samples < 0) return 1;
    int64_t want = num_samples * L + 1;
    if (tokens_per_epoch >= want) return 1;
    return (want + tokens_per_epoch - 1) / tokens_per_epoch;
}

/* The split's sequence ids, `epochs` times, shuffled in place by rng. */
static void fill_doc_index(int32_t *out, int64_t b, int64_t e, int64_t epochs, dg_mt19937 *rng) {
    int64_t n = e - b;
    for (int64_t k = 0; k < epochs; k++)
        for (int64_t i = 0; i < n; i++) out[k * n + i] = (int32_t)(b + i);
    dg_mt_shuffle_i32(rng, out, epochs * n);
}

/* Megatron's build_sample_idx (helpers.cpp) with add_extra_token = 1. */
static void build_sample_index(dg_gpt_dataset *ds, int drop_last) {
    const dg_indexed *d = ds->data;
    int64_t L = ds->seq_length, total = ds->num_epochs * ds->tokens_per_epoch - 1;
    int64_t n = drop_last ? total / L : (total + L - 1) / L;
    ds->num_samples = n;
    int64_t *si = dg_malloc(sizeof(int64_t) * (size_t)(2 * (n + 1)));
    int64_t pos = 0, off = 0;
    si[0] = 0;
    si[1] = 0;
    for (int64_t s = 1; s <= n; s++) {
        int64_t remaining = L + 1;
        while (remaining != 0) {
            int64_t len = dg_indexed_seq_len(d, ds->doc_index[pos]) - off;
            remaining -= len;
            if (remaining <= 0) {
                off += remaining + len - 1;
                remaining = 0;
            } else if (pos == ds->doc_index_len - 1) {
                /* Only reachable for the last, partial sample (drop_last == 0). */
                DG_ASSERT(s == n);
                off = dg_indexed_seq_len(d, ds->doc_index[pos]) - 1;
                break;
            } else {
                pos++;
                off = 0;
            }
        }
        si[2 * s] = pos;
        si[2 * s + 1] = off;
    }
    ds->sample_index = si;
}

static uint64_t fnv1a(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static void describe(char *buf, size_t cap, const dg_gpt_dataset *ds, int64_t requested, const dg_gpt_config *cfg,
                     const char *split) {
    snprintf(buf, cap,
             "{\"class\": \"GPTDataset\", \"dataset_path\": \"%s\", \"index_split\": \"%s\", "
             "\"split_range\": [%" PRId64 ", %" PRId64 "], \"num_samples\": %" PRId64 ", \"sequence_length\": %" PRId64
             ", \"random_seed\": %u, \"add_extra_token_to_sequence\": true, \"drop_last_partial_sequence\": %s, "
             "\"num_sequences\": %" PRId64 ", \"num_tokens\": %" PRId64 "}\n",
             ds->data->prefix, split, ds->seq_begin, ds->seq_end, requested, ds->seq_length, cfg->seed,
             cfg->drop_last_partial ? "true" : "false", ds->data->num_sequences, ds->data->num_tokens);
}

static void cache_path(char *out, size_t cap, const char *base, const char *affix) {
    snprintf(out, cap, "%s-%s", base, affix);
}

/* Try to load the three indices; returns 1 on a consistent cache hit. */
static int load_cache(dg_gpt_dataset *ds, const char *desc) {
    char p[1100];
    cache_path(p, sizeof p, ds->cache_base, "description.txt");
    dg_map m;
    if (!dg_file_exists(p) || dg_map_file(&m, p, NULL) != DG_OK) return 0;
    int same = m.n == strlen(desc) && memcmp(m.p, desc, m.n) == 0;
    dg_unmap(&m);
    if (!same) return 0;
    int64_t *doc = NULL, *smp = NULL, *shf = NULL, r0, c0, r1, c1, r2, c2;
    int ok = 1;
    cache_path(p, sizeof p, ds->cache_base, "document_index.npy");
    ok = ok && dg_npy_read(p, &doc, &r0, &c0, NULL) == DG_OK;
    cache_path(p, sizeof p, ds->cache_base, "sample_index.npy");
    ok = ok && dg_npy_read(p, &smp, &r1, &c1, NULL) == DG_OK;
    cache_path(p, sizeof p, ds->cache_base, "shuffle_index.npy");
    ok = ok && dg_npy_read(p, &shf, &r2, &c2, NULL) == DG_OK;
    ok = ok && c0 == 0 && c1 == 2 && c2 == 0 && r1 >= 2 && r2 == r1 - 1;
    for (int64_t i = 0; ok && i < r0; i++) ok = doc[i] >= ds->seq_begin && doc[i] < ds->seq_end;
    for (int64_t i = 0; ok && i < r1; i++)
        ok = smp[2 * i] >= 0 && smp[2 * i] < r0 && smp[2 * i + 1] >= 0 &&
             smp[2 * i + 1] < dg_indexed_seq_len(ds->data, doc[smp[2 * i]]) + (i == 0);
    for (int64_t i = 0; ok && i < r2; i++) ok = shf[i] >= 0 && shf[i] < r2;
    if (ok) {
        ds->doc_index_len = r0;
        ds->doc_index = dg_malloc(sizeof(int32_t) * (size_t)(r0 ? r0 : 1));
        for (int64_t i = 0; i < r0; i++) ds->doc_index[i] = (int32_t)doc[i];
        ds->sample_index = smp;
        ds->shuffle_index = shf;
        ds->num_samples = r2;
        smp = shf = NULL;
    }
    dg_free(doc);
    dg_free(smp);
    dg_free(shf);
    return ok;
}

static int save_cache(const dg_gpt_dataset *ds, const char *desc, dg_err *err) {
    char p[1100];
    int64_t n = ds->doc_index_len;
    int64_t *tmp = dg_malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) tmp[i] = ds->doc_index[i];
    cache_path(p, sizeof p, ds->cache_base, "document_index.npy");
    int st = dg_npy_write(p, DG_NPY_I32, tmp, n, 0, err);
    dg_free(tmp);
    int64_t maxv = 0;
    for (int64_t i = 0; i < 2 * (ds->num_samples + 1); i++) maxv = DG_MAX(maxv, ds->sample_index[i]);
    cache_path(p, sizeof p, ds->cache_base, "sample_index.npy");
    if (st == DG_OK)
        st = dg_npy_write(p, maxv <= INT32_MAX ? DG_NPY_I32 : DG_NPY_I64, ds->sample_index, ds->num_samples + 1, 2,
                          err);
    cache_path(p, sizeof p, ds->cache_base, "shuffle_index.npy");
    if (st == DG_OK)
        st = dg_npy_write(p, ds->num_samples >= (int64_t)UINT32_MAX - 1 ? DG_NPY_I64 : DG_NPY_U32, ds->shuffle_index,
                          ds->num_samples, 0, err);
    /* The description goes last: its presence marks a complete cache. */
    cache_path(p, sizeof p, ds->cache_base, "description.txt");
    if (st == DG_OK) st = dg_file_out_replace(p, desc, strlen(desc), NULL, err);
    return st;
}

static void default_cache_dir(char *out, size_t cap, const char *prefix) {
    const char *slash = strrchr(prefix, '/');
    if (!slash) snprintf(out, cap, "cache/GPTDataset_indices");
    else snprintf(out, cap, "%.*s/cache/GPTDataset_indices", (int)(slash - prefix), prefix);
}

int dg_gpt_dataset_build(dg_gpt_dataset *ds, const dg_indexed *data, int64_t seq_begin, int64_t seq_end,
                         int64_t num_samples, const dg_gpt_config *cfg, const char *split_name, dg_err *err) {
    memset(ds, 0, sizeof *ds);
    if (cfg->seq_length <= 0)
        return dg_err_set(err, DG_EINPUT, "--seq-length: expected > 0, got %" PRId64, cfg->seq_length);
    if (seq_begin < 0 || seq_end > data->num_sequences || seq_begin >= seq_end)
        return dg_err_set(err, DG_EINPUT,
                          "%s: the %s split [%" PRId64 ", %" PRId64 ") of its %" PRId64
                          " sequences holds no documents",
                          data->prefix, split_name, seq_begin, seq_end, data->num_sequences);
    ds->data = data;
    ds->seq_begin = seq_begin;
    ds->seq_end = seq_end;
    ds->seq_length = cfg->seq_length;
    ds->pad_token = cfg->pad_token;
    for (int64_t i = seq_begin; i < seq_end; i++) ds->tokens_per_epoch += dg_indexed_seq_len(data, i);
    int64_t L = cfg->seq_length, T = ds->tokens_per_epoch, n_seq = seq_end - seq_begin;
    /* Fewer tokens than one sample is fine: the epochs repeat the split's
     * sequences, as Megatron's indices do. Under 2 tokens Megatron has no
     * sample index (its epoch loop never ends without tokens, and
     * build_sample_idx asserts tokens_per_epoch > 1). */
    if (T < 2)
        return dg_err_set(err, DG_EINPUT,
                          "%s: the %s split's %" PRId64 " sequences hold %" PRId64
                          " tokens; a split needs at least 2 to draw samples from",
                          data->prefix, split_name, n_seq, T);
    /* Sizes beyond any memory: refuse them before they overflow. */
    int too_big = num_samples > (INT64_MAX - 1) / L;
    if (!too_big) ds->num_epochs = count_epochs(T, num_samples, L);
    if (too_big || ds->num_epochs > INT64_MAX / 8 / n_seq)
        return dg_err_set(err, DG_EINPUT,
                          "%s: the %s split's %" PRId64 " tokens cannot give %" PRId64 " samples of --seq-length %" PRId64
                          ": its indices would not fit in memory",
                          data->prefix, split_name, T, num_samples, L);
    int64_t sans_final = 0;
    if (ds->num_epochs > 1) {
        sans_final = ((ds->num_epochs - 1) * T - 1) / L;
        int64_t from_final = num_samples - sans_final, per_epoch = (T - 1) / L;
        DG_ASSERT(from_final >= 0 && from_final <= per_epoch + 1);
        /* A split shorter than one sample has per_epoch 0: never separate. */
        ds->separate_final_epoch = from_final < (int64_t)(0.80 * (double)per_epoch);
    }

    char desc[2048];
    describe(desc, sizeof desc, ds, num_samples, cfg, split_name);
    if (!cfg->cache_dir || cfg->cache_dir[0]) {
        char dir[900];
        if (cfg->cache_dir) snprintf(dir, sizeof dir, "%s", cfg->cache_dir);
        else default_cache_dir(dir, sizeof dir, data->prefix);
        snprintf(ds->cache_base, sizeof ds->cache_base, "%s/%016" PRIx64 "-GPTDataset-%s", dir, fnv1a(desc),
                 split_name);
        if (load_cache(ds, desc)) {
            ds->cache_hit = 1;
            return DG_OK;
        }
        /* The default place beside the data may be read-only: then build in
         * memory without caching. A cache dir the user named must work. */
        int st = dg_mkdirs(dir, cfg->cache_dir ? err : NULL);
        if (st != DG_OK) {
            ds->cache_base[0] = 0;
            if (cfg->cache_dir) return st;
        }
    }

    dg_mt19937 rng;
    dg_mt_seed(&rng, cfg->seed);
    int64_t n = n_seq;
    ds->doc_index_len = ds->num_epochs * n;
    ds->doc_index = dg_malloc(sizeof(int32_t) * (size_t)ds->doc_index_len);
    if (!ds->separate_final_epoch) {
        fill_doc_index(ds->doc_index, seq_begin, seq_end, ds->num_epochs, &rng);
    } else {
        fill_doc_index(ds->doc_index, seq_begin, seq_end, ds->num_epochs - 1, &rng);
        fill_doc_index(ds->doc_index + (ds->num_epochs - 1) * n, seq_begin, seq_end, 1, &rng);
    }
    build_sample_index(ds, cfg->drop_last_partial);
    int64_t total = ds->num_samples, first = ds->separate_final_epoch ? sans_final : total;
    ds->shuffle_index = dg_malloc(sizeof(int64_t) * (size_t)(total ? total : 1));
    for (int64_t i = 0; i < total; i++) ds->shuffle_index[i] = i;
    dg_mt_shuffle_i64(&rng, ds->shuffle_index, first);
    if (first < total) dg_mt_shuffle_i64(&rng, ds->shuffle_index + first, total - first);

    if (ds->cache_base[0]) {
        int st = save_cache(ds, desc, cfg->cache_dir ? err : NULL);
        if (st != DG_OK && cfg->cache_dir) {
            dg_gpt_dataset_free(ds);
            return st;
        }
        if (st != DG_OK) ds->cache_base[0] = 0;
    }
    return DG_OK;
}

void dg_gpt_dataset_free(dg_gpt_dataset *ds) {
    dg_free(ds->doc_index);
    dg_free(ds->sample_index);
    dg_free(ds->shuffle_index);
    memset(ds, 0, sizeof *ds);
}

void dg_gpt_dataset_sample_unshuffled(const dg_gpt_dataset *ds, int64_t j, int32_t *tokens) {
    DG_ASSERT(j >= 0 && j < ds->num_samples);
    const int64_t *si = ds->sample_index;
    int64_t bp = si[2 * j], bo = si[2 * j + 1], ep = si[2 * j + 2], eo = si[2 * j + 3];
    int64_t want = ds->seq_length + 1, got = 0;
    for (int64_t p = bp; p <= ep; p++) {
        int32_t seq = ds->doc_index[p];
        int64_t off = p == bp ? bo : 0;
        int64_t end = p < ep ? dg_indexed_seq_len(ds->data, seq) : eo + 1;
        int64_t len = DG_MIN(end - off, want - got);
        if (len <= 0) continue;
        dg_indexed_read(ds->data, seq, off, len, tokens + got);
        got += len;
    }
    for (; got < want; got++) tokens[got] = ds->pad_token;
}

void dg_gpt_dataset_sample(const dg_gpt_dataset *ds, int64_t i, int32_t *tokens) {
    DG_ASSERT(i >= 0 && i < ds->num_samples);
    dg_gpt_dataset_sample_unshuffled(ds, ds->shuffle_index[i], tokens);
}
