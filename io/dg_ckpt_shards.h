/* dg_ckpt_shards.h — checkpoints that every rank writes and any layout reads.
 *
 * A tensor is addressed by its name and global shape; what a rank holds of
 * it is a set of *pieces*, each a box of the global tensor (start, shape)
 * with the memory it lives in. The manifest's tensor table (dg_ckpt_entry,
 * dg_checkpoint.h) lists every stored box: a name may repeat, each entry a
 * disjoint box (slice_start, shape) of global_shape, together covering the
 * tensor once. Because boxes are keyed by global offsets and not by the
 * layout that wrote them, a load under another layout (TP, EP, DP, PP
 * stages, CP, the distributed optimizer's flat shards) asks for its own
 * boxes and gets them from whichever entries overlap.
 *
 * A save, on every rank of a world of W:
 *   1. each rank describes its pieces as keys (dg_ckpt_key: no data) and the
 *      ranks exchange them (the caller's collective);
 *   2. dg_ckpt_plan_make, the same on every rank, deduplicates replicas: a
 *      box held by several ranks (data-parallel copies, a norm's weight on
 *      every TP rank) is written by exactly one of them, the holder with the
 *      fewest bytes so far (largest boxes first), so the bytes spread evenly;
 *      it lays out each rank's file (64-byte aligned boxes), so every rank
 *      knows every entry but its CRC;
 *   3. rank 0 creates <dir>/iter_N.tmp-<pid0>/ (dg_ckpt_begin), every rank
 *      writes its boxes into its own file there (dg_ckpt_write_rank: rank 0
 *      model_optim_rng.bin, rank r model_optim_rng_rank<r>.bin), fsyncs it,
 *      and publishes the CRCs in a small sidecar (<file>.crc, renamed into
 *      place; <file>.failed with the message if the write failed);
 *   4. rank 0 waits for every sidecar (dg_ckpt_finish), writes
 *      metadata.json with the CRCs, removes the sidecars, fsyncs, renames
 *      the directory to iter_N/, fsyncs <dir> and only then replaces the
 *      tracker. Steps 3-4 use the file system only, no messages, so a
 *      background thread can run them (--async-save) while the main threads
 *      train and communicate.
 * A kill at any moment leaves the tracker naming the previous complete
 * checkpoint (see dg_checkpoint.h): nothing is renamed into place before
 * every rank's file is durable.
 *
 * Loading (dg_ckpt_load_pieces) reads, for each stored entry that overlaps
 * a requested box, that entry (a contiguous byte range of one file), checks
 * its CRC and copies the overlap: a rank reads the entries of the global
 * tensors it needs, never whole files. Names, dtypes, global shapes, that
 * every requested element is stored, and file sizes are checked before any
 * byte is read.
 */
#ifndef DG_CKPT_SHARDS_H
#define DG_CKPT_SHARDS_H

#include "dg_checkpoint.h"

/* A box of a global tensor and the memory that holds it. */
typedef struct dg_ckpt_piece {
    char name[DG_CKPT_NAME_LEN];
    dg_dtype dtype;
    int ndim;
    int64_t global_shape[DG_MAX_DIMS];
    int64_t start[DG_MAX_DIMS];  /* the box's first element in the global tensor */
    int64_t shape[DG_MAX_DIMS];  /* the box */
    void *data;                  /* the box's first element in memory */
    int64_t stride[DG_MAX_DIMS]; /* elements between neighbours along each dim, in memory */
} dg_ckpt_piece;

/* A piece without its memory: what ranks exchange to plan a save. Plain
 * bytes (zero-filled), 8-byte multiple, so it travels as int64 words. */
typedef struct dg_ckpt_key {
    char name[DG_CKPT_NAME_LEN];
    int64_t dtype, ndim;
    int64_t global_shape[DG_MAX_DIMS], start[DG_MAX_DIMS], shape[DG_MAX_DIMS];
} dg_ckpt_key;

#define DG_CKPT_KEY_WORDS ((int)(sizeof(dg_ckpt_key) / sizeof(int64_t)))

/* p's key. */
void dg_ckpt_key_of(const dg_ckpt_piece *p, dg_ckpt_key *k);

/* The whole tensor t as one piece (row-major, contiguous). */
void dg_ckpt_piece_whole(const dg_ckpt_tensor *t, dg_ckpt_piece *p);

/* Elements of p's box. */
int64_t dg_ckpt_piece_numel(const dg_ckpt_piece *p);

/* Is p's memory the box's elements in row-major order, without gaps? */
bool dg_ckpt_piece_contiguous(const dg_ckpt_piece *p);

/* Who writes what, and where: the same on every rank. */
typedef struct dg_ckpt_plan {
    int world;
    int n_entries;
    dg_ckpt_entry *entries; /* every stored box, by writer rank then its key order; crc32 0 until finished */
    int *writer;            /* [n_entries] the rank that writes entry i */
    int *key;               /* [n_entries] its index among that rank's keys */
    int *first, *count;     /* [world] rank r's entries: first[r] .. first[r] + count[r] */
} dg_ckpt_plan;

/* Plan a save of world ranks' keys: rank r's n_keys[r] keys are
 * keys[r * stride .. r * stride + n_keys[r]). DG_EINTERNAL when a key is
 * malformed (no name, bad dtype or rank, a box outside its global shape) or
 * two ranks disagree on a tensor's dtype or global shape. */
int dg_ckpt_plan_make(int world, const int *n_keys, const dg_ckpt_key *keys, int stride, dg_ckpt_plan *p,
                      dg_err *err);
void dg_ckpt_plan_free(dg_ckpt_plan *p);

/* Rank r's data file name, relative to the iteration directory. */
void dg_ckpt_rank_file(char *buf, size_t len, int rank);

/* <dir>/iter_NNNNNNN.tmp-<pid>: the temporary directory of a save. */
int dg_ckpt_tmp_dir(char *buf, size_t len, const char *dir, int64_t iteration, long pid, dg_err *err);

/* Rank 0, before any rank writes: create <dir> if needed, remove the stale
 * temporaries of dead processes, create the temporary directory of this
 * save (pid: this process's). */
int dg_ckpt_begin(const char *dir, int64_t iteration, long pid, dg_err *err);

/* Write this rank's boxes (pieces[i] for each of the plan's entries of this
 * rank, indexed by the entry's key) into its file in the temporary
 * directory of (dir, iteration, pid: rank 0's), fsync it, then publish the
 * CRCs. On failure leaves <file>.failed with the message, so rank 0 stops
 * waiting. o->at (o may be NULL) is called with DG_CKPT_AT_TENSOR after each
 * box and DG_CKPT_AT_RANK_FILE (index: rank) once the file and its CRCs are
 * durable. */
int dg_ckpt_write_rank(const char *dir, int64_t iteration, long pid, const dg_ckpt_plan *p, int rank,
                       const dg_ckpt_piece *pieces, const dg_ckpt_save_opts *o, dg_err *err);

/* Remove the temporary directory of (dir, iteration, pid): rank 0, when a
 * save is abandoned before dg_ckpt_finish. */
void dg_ckpt_abort(const char *dir, int64_t iteration, long pid);

/* Rank 0, after its own write: wait (giving up after timeout_s in which a
 * missing rank's data file did not grow; 0: the files must be there
 * already) for every rank's
 * CRCs, write the manifest of m and the plan's entries, install the
 * directory as <dir>/iter_<m->iteration>, move the tracker, prune (see the
 * top of this file and dg_checkpoint.h). On any failure the temporary
 * directory is removed and the tracker left alone. */
int dg_ckpt_finish(const char *dir, long pid, const dg_ckpt_meta *m, dg_ckpt_plan *p, double timeout_s,
                   const dg_ckpt_save_opts *o, dg_err *err);

/* Fill the pieces from the checkpoint whose manifest is man (see the top of
 * this file). DG_EINPUT naming the file and the tensor. */
int dg_ckpt_load_pieces(const dg_ckpt_manifest *man, const dg_ckpt_piece *p, int n, dg_err *err);

#endif /* DG_CKPT_SHARDS_H */
