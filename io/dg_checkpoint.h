/* dg_checkpoint.h — training checkpoints: save, find the latest, load.
 *
 * Layout (Megatron's, with a JSON manifest instead of a pickle):
 *
 *   <dir>/latest_checkpointed_iteration.txt   the iteration as decimal text, no newline
 *   <dir>/iter_0000010/metadata.json          the manifest (below)
 *   <dir>/iter_0000010/model_optim_rng.bin    rank 0's tensor bytes, little-endian,
 *                                             each stored slice 64-byte aligned
 *   <dir>/iter_0000010/model_optim_rng_rank00001.bin ... the other ranks' (sharded saves)
 *
 * The manifest holds a format name and version, the run's counters
 * (iteration, consumed samples, optimizer steps, skipped and NaN
 * iterations), the RNG state words, the caller's config record (named
 * numbers, below: the trainer stores its model config there), the tokenizer
 * and data description, and a tensor table. This layer knows named tensors
 * and that record, never the model: what the record's keys mean, and which
 * of them must agree for a checkpoint to load, is the caller's
 * (train/dg_model_record.h). Each table entry
 * is { name, dtype, global_shape, slice_start, shape, file, offset, nbytes,
 * crc32 }: `shape` is the part of the `global_shape` tensor this entry
 * holds, starting at `slice_start`, and `file` is relative to the iteration
 * directory. A tensor saved whole is one entry (version 1, what
 * dg_ckpt_save writes); a sharded save (dg_ckpt_shards.h, version 2) stores
 * a tensor as several slices that tile it, and a load assembles whatever
 * boxes it asks for from them.
 * crc32 is zlib's CRC-32 of the entry's bytes, so a Python tool can verify a
 * checkpoint with the standard library alone.
 *
 * Tensors are addressed by name. Parameters use Megatron-Core's state-dict
 * names (decoder.layers.0.mlp.router.weight); AdamW's moments are
 * "optimizer.exp_avg.<name>" and "optimizer.exp_avg_sq.<name>".
 *
 * Crash safety. dg_ckpt_save writes everything into
 * <dir>/iter_NNNNNNN.tmp-<pid>/, fsyncs each file and the directory, renames
 * it to iter_NNNNNNN/ (atomically swapping out an existing one), fsyncs
 * <dir>, and only then replaces the tracker (temp file, fsync, rename,
 * fsync <dir>). A process killed at any point leaves the tracker naming a
 * complete checkpoint: the previous one, or the new one if the kill came
 * after its directory was in place. Readers ignore every name that is not exactly
 * iter_<digits>; the next save removes the stale *.tmp-* directories of
 * processes that no longer exist.
 *
 * Errors: bad input on load (no tracker, a tracker that is not a number or
 * names a missing directory, a malformed manifest, a missing tensor, a
 * shape or dtype mismatch, a truncated file, a checksum mismatch) and I/O
 * failures on save are DG_EINPUT with one line naming the file and the
 * problem. A failed save removes its temporary directory and leaves the
 * tracker untouched.
 *
 * Tests stop or kill a save at its named stages (dg_ckpt_save_opts.at,
 * below) to check what each moment leaves on disk.
 */
#ifndef DG_CHECKPOINT_H
#define DG_CHECKPOINT_H

#include <stdbool.h>
#include <stdint.h>

#include "dg_base.h"
#include "dg_graph.h"

#define DG_CKPT_FORMAT "dagatron-checkpoint"
#define DG_CKPT_VERSION 2       /* sharded: a tensor may be stored as several slices (dg_ckpt_shards.h) */
#define DG_CKPT_VERSION_WHOLE 1 /* each tensor whole, once: still written when no tensor is sliced */
#define DG_CKPT_TRACKER "latest_checkpointed_iteration.txt"
#define DG_CKPT_MANIFEST "metadata.json"
#define DG_CKPT_BIN "model_optim_rng.bin"

#define DG_CKPT_NAME_LEN 128 /* "optimizer.exp_avg_sq." + a Megatron parameter name */
#define DG_CKPT_STR_LEN 1024 /* paths and flag values kept in the manifest */
#define DG_CKPT_RNG_WORDS 4
#define DG_CKPT_LATEST (-1) /* dg_ckpt_load / dg_ckpt_read_manifest: the tracker's iteration */

/* ---- what a checkpoint holds besides tensors ------------------------------ */

/* How tokens were made: enough for `dagatron generate` to reopen the
 * tokenizer from the checkpoint alone. */
typedef struct dg_ckpt_tokenizer {
    char type[DG_CKPT_STR_LEN];       /* --tokenizer-type, e.g. "ByteLevelTokenizer" */
    char vocab_file[DG_CKPT_STR_LEN]; /* --vocab-file ("" when none) */
    char merge_file[DG_CKPT_STR_LEN]; /* --merge-file ("" when none) */
    int64_t vocab_size;               /* before padding (model.vocab_size is padded) */
    char model_file[DG_CKPT_STR_LEN]; /* --tokenizer-model ("" when none; "model_file", absent when "") */
    /* The end-of-document id the run's tokenizer had (-1: none), "eod".
     * Recorded since NullTokenizer follows Megatron (--vocab-size N: N + 1
     * ids, EOD N); a checkpoint without it (eod_recorded 0) is older, and
     * its NullTokenizer had N ids and EOD N - 1, none on mock data.
     * dg_tokenizer_open_ckpt (io/dg_tok_ckpt.h) applies both rules. */
    int32_t eod;
    int eod_recorded;
} dg_ckpt_tokenizer;

/* Where samples came from; the position in the stream is consumed_samples. */
typedef struct dg_ckpt_data {
    char path[DG_CKPT_STR_LEN];  /* --data-path as given ("" = the default corpus), or
                                  * "train: P; valid: Q; test: R" for per-split paths */
    char split[DG_CKPT_STR_LEN]; /* --split ("" with per-split paths: not read) */
    int mock;                    /* --mock-data */
    int64_t seed;                /* --seed */
} dg_ckpt_data;

/* The caller's configuration: named numbers, kept in the order they were
 * set. Stored as the manifest's "model" object (the name checkpoints have
 * always used), one JSON number per key; doubles round-trip exactly. */
#define DG_CKPT_CONFIG_MAX 128
#define DG_CKPT_KEY_LEN 64
typedef struct dg_ckpt_config {
    int n;
    char key[DG_CKPT_CONFIG_MAX][DG_CKPT_KEY_LEN];
    double value[DG_CKPT_CONFIG_MAX];
} dg_ckpt_config;

/* Set key to value (replacing an existing key, else appending).
 * DG_EINTERNAL when the key is empty or too long, the value not finite, or
 * the record full. */
int dg_ckpt_config_set(dg_ckpt_config *c, const char *key, double value, dg_err *err);

/* The value of key, or NULL when the record has none. */
const double *dg_ckpt_config_get(const dg_ckpt_config *c, const char *key);

typedef struct dg_ckpt_meta {
    int64_t iteration;              /* iterations completed */
    int64_t consumed_samples;       /* training samples consumed: the data position */
    int64_t consumed_valid_samples; /* validation samples consumed */
    int64_t optimizer_steps;        /* AdamW steps taken (iterations minus skipped) */
    int64_t skipped_iters;          /* updates skipped (non-finite loss or gradients) */
    int64_t nan_iters;              /* iterations whose loss was NaN or infinite (all skipped) */
    uint64_t rng[DG_CKPT_RNG_WORDS]; /* RNG state words, stored exactly (as hex) */
    dg_ckpt_config config;          /* the caller's config record */
    dg_ckpt_tokenizer tokenizer;
    dg_ckpt_data data;
} dg_ckpt_meta;

/* Zero everything (strings empty). */
void dg_ckpt_meta_init(dg_ckpt_meta *m);

/* ---- tensors ------------------------------------------------------------- */

/* One tensor to save, or to load into. On save `data` is read; on load the
 * caller allocates data (numel x dtype size bytes) and it is filled. */
typedef struct dg_ckpt_tensor {
    char name[DG_CKPT_NAME_LEN];
    dg_dtype dtype;
    int ndim;                   /* 0 (scalar) .. DG_MAX_DIMS */
    int64_t shape[DG_MAX_DIMS];
    void *data;
} dg_ckpt_tensor;

/* Fill *t from a graph tensor: name = prefix + g->name, its dtype and shape,
 * and `data`. prefix may be "" (parameters) or e.g. "optimizer.exp_avg.".
 * Returns DG_OK, or DG_EINTERNAL if the name does not fit. */
int dg_ckpt_tensor_from(dg_ckpt_tensor *t, const char *prefix, const dg_tensor *g, void *data,
                        dg_err *err);

/* Bytes of t's data. */
size_t dg_ckpt_tensor_bytes(const dg_ckpt_tensor *t);

/* ---- save ------------------------------------------------------------------ */

/* The stages of a save, in the order they are reached. */
typedef enum dg_ckpt_stage {
    DG_CKPT_AT_TENSOR,    /* this rank's box `index` written into its file in <tmp> (not yet fsynced) */
    DG_CKPT_AT_FILES,     /* the .bin and the manifest complete and durable in iter_N.tmp-<pid>/ */
    DG_CKPT_AT_INSTALLED, /* iter_N/ in place and durable; the tracker still names the previous one */
    DG_CKPT_AT_TRACKED,   /* the tracker names N; old checkpoints not pruned yet */
    /* (sharded saves, dg_ckpt_shards.h; numbered last, reached between
     * DG_CKPT_AT_TENSOR and DG_CKPT_AT_FILES) rank `index`'s data file and
     * its CRCs are durable in the temporary directory */
    DG_CKPT_AT_RANK_FILE,
} dg_ckpt_stage;

typedef struct dg_ckpt_save_opts {
    int keep_last; /* keep the newest keep_last iter_* directories (<= 0: all) */
    /* Called at each stage (index: the tensor for DG_CKPT_AT_TENSOR, else
     * -1). A seam for tests, which stop or kill the process there; NULL
     * otherwise. */
    void (*at)(void *ctx, dg_ckpt_stage stage, int index);
    void *ctx;
    /* Leave a tracker that names a newer iteration as it is (`convert
     * --add-to-existing` adds iteration 0 beside a run's checkpoints and
     * must not rewind them); 0: the tracker names the saved iteration. */
    int tracker_forward_only;
} dg_ckpt_save_opts;

/* Save m and t[0..n) as <dir>/iter_<m->iteration>/ (see the top of this
 * file for the protocol), creating <dir> if needed and replacing an existing
 * checkpoint of the same iteration. Then delete the oldest iter_* directories
 * beyond the newest o->keep_last, never the one just written nor the one the
 * tracker names. o may be NULL (keep all, no stage callback). The tracker ends up naming
 * m->iteration, even when it is older than others present (as Megatron's),
 * unless o->tracker_forward_only and it names a newer one already.
 * Returns DG_OK; DG_EINPUT naming the path for a file-system failure
 * (permissions, a file where a directory should be, a full disk); or
 * DG_EINTERNAL, before anything is written, for a malformed table (empty
 * or duplicate names, bad dtype or rank, NULL data). */
int dg_ckpt_save(const char *dir, const dg_ckpt_meta *m, const dg_ckpt_tensor *t, int n,
                 const dg_ckpt_save_opts *o, dg_err *err);

/* ---- find and read --------------------------------------------------------- */

/* Does <dir> hold a tracker file? (Whether a run may start from scratch
 * without one is dg_ckpt_plan_load's rule, io/dg_ckpt_paths.h.) */
bool dg_ckpt_has_tracker(const char *dir);

/* The iteration the tracker names. DG_EINPUT when there is no tracker, it
 * is not a non-negative integer, or it names a directory that does not
 * exist (the message names both). */
int dg_ckpt_latest(const char *dir, int64_t *iteration, dg_err *err);

/* <dir>/iter_NNNNNNN (Megatron's 7-digit zero padding). buf holds len bytes;
 * DG_EINPUT if the path does not fit. */
int dg_ckpt_iter_dir(char *buf, size_t len, const char *dir, int64_t iteration, dg_err *err);

/* One entry of the manifest's tensor table. */
typedef struct dg_ckpt_entry {
    char name[DG_CKPT_NAME_LEN];
    dg_dtype dtype;
    int ndim;
    int64_t global_shape[DG_MAX_DIMS]; /* the whole tensor */
    int64_t slice_start[DG_MAX_DIMS];  /* where this entry's part begins */
    int64_t shape[DG_MAX_DIMS];        /* this entry's part */
    char file[DG_CKPT_STR_LEN];        /* relative to the iteration directory */
    int64_t offset, nbytes;            /* byte range in file */
    uint32_t crc32;                    /* zlib CRC-32 of those bytes */
} dg_ckpt_entry;

/* A parsed, validated manifest. */
typedef struct dg_ckpt_manifest {
    char path[DG_CKPT_STR_LEN]; /* .../iter_NNNNNNN/metadata.json, for messages */
    char dir[DG_CKPT_STR_LEN];  /* .../iter_NNNNNNN */
    dg_ckpt_meta meta;
    int n_tensors;
    dg_ckpt_entry *tensors;
} dg_ckpt_manifest;

/* Read and validate <dir>/iter_<iteration>/metadata.json (iteration may be
 * DG_CKPT_LATEST). Enough for `dagatron generate` to rebuild the model and
 * tokenizer before loading weights. Free with dg_ckpt_manifest_free. */
int dg_ckpt_read_manifest(const char *dir, int64_t iteration, dg_ckpt_manifest *man, dg_err *err);
void dg_ckpt_manifest_free(dg_ckpt_manifest *man);

/* The manifest entry called name, or NULL. */
const dg_ckpt_entry *dg_ckpt_find(const dg_ckpt_manifest *man, const char *name);

/* Whether a checkpoint may be loaded into this run, decided from its config
 * record by the caller (the trainer: the model's architecture must agree,
 * dg_model_expect in train/dg_model_record.h). check returns DG_OK, or
 * DG_EINPUT with one line starting with `where` (the manifest's path). */
typedef struct dg_ckpt_expect {
    int (*check)(const dg_ckpt_config *ckpt, const void *ctx, const char *where, dg_err *err);
    const void *ctx;
} dg_ckpt_expect;

/* Load: read the manifest of <dir>/iter_<iteration> (DG_CKPT_LATEST: the
 * tracker's) into *m (may be NULL), run expect's check on its config record
 * (expect may be NULL to skip), then fill each t[i].data from the entry of the same
 * name, checking dtype, shape, file size and CRC. Entries nobody asked for
 * are ignored (generate loads parameters only). Names, dtypes, shapes and
 * file sizes are all checked before any byte is read, so those errors leave
 * the caller's buffers untouched; a CRC mismatch is found while reading, so
 * after it the buffers hold partial data: treat them as garbage. */
int dg_ckpt_load(const char *dir, int64_t iteration, const dg_ckpt_expect *expect, dg_ckpt_meta *m, const dg_ckpt_tensor *t, int n, dg_err *err);

/* zlib-compatible CRC-32 (crc32(0, NULL, 0) == 0; chain by passing the
 * previous value). */
uint32_t dg_crc32(uint32_t crc, const void *data, size_t n);

#endif /* DG_CHECKPOINT_H */
