/* dg_ckpt_plan.c — who writes which box of a sharded save, and where
 * (dg_ckpt_plan_make, dg_ckpt_shards.h); pieces and keys. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dg_ckpt_fs.h"
#include "dg_ckpt_shards.h"

#define ALIGN 64 /* box start alignment in a rank's file: cache lines, AVX-512, mmap-friendly */

int64_t dg_ckpt_piece_numel(const dg_ckpt_piece *p) {
    int64_t n = 1;
    for (int d = 0; d < p->ndim; d++) n *= p->shape[d];
    return n;
}

bool dg_ckpt_piece_contiguous(const dg_ckpt_piece *p) {
    int64_t s = 1;
    for (int d = p->ndim - 1; d >= 0; d--) {
        if (p->shape[d] > 1 && p->stride[d] != s) return false;
        s *= p->shape[d];
    }
    return true;
}

void dg_ckpt_key_of(const dg_ckpt_piece *p, dg_ckpt_key *k) {
    memset(k, 0, sizeof *k);
    memcpy(k->name, p->name, sizeof k->name);
    k->dtype = p->dtype;
    k->ndim = p->ndim;
    for (int d = 0; d < p->ndim; d++) {
        k->global_shape[d] = p->global_shape[d];
        k->start[d] = p->start[d];
        k->shape[d] = p->shape[d];
    }
}

void dg_ckpt_piece_whole(const dg_ckpt_tensor *t, dg_ckpt_piece *p) {
    memset(p, 0, sizeof *p);
    memcpy(p->name, t->name, sizeof p->name);
    p->dtype = t->dtype;
    p->ndim = t->ndim;
    for (int d = 0; d < t->ndim; d++) p->global_shape[d] = p->shape[d] = t->shape[d];
    dg_ckpt_row_major(p->shape, p->ndim, p->stride);
    p->data = t->data;
}

void dg_ckpt_rank_file(char *buf, size_t len, int rank) {
    if (rank == 0) snprintf(buf, len, "%s", DG_CKPT_BIN);
    else snprintf(buf, len, "model_optim_rng_rank%05d.bin", rank);
}

static int64_t key_bytes(const dg_ckpt_key *k) {
    int64_t n = (int64_t)dg_dtype_size((dg_dtype)k->dtype);
    for (int d = 0; d < k->ndim; d++) n *= k->shape[d];
    return n;
}

static int check_key(const dg_ckpt_key *k, int rank, dg_err *err) {
    if (!k->name[0] || memchr(k->name, 0, sizeof k->name) == NULL)
        return dg_err_set(err, DG_EINTERNAL, "checkpoint save: rank %d has a tensor without a name", rank);
    if (k->dtype < 0 || k->dtype >= DG_DTYPE_COUNT || k->ndim < 0 || k->ndim > DG_MAX_DIMS)
        return dg_err_set(err, DG_EINTERNAL, "checkpoint save: tensor '%s': bad dtype or rank", k->name);
    for (int d = 0; d < k->ndim; d++)
        if (k->start[d] < 0 || k->shape[d] < 0 || k->start[d] + k->shape[d] > k->global_shape[d])
            return dg_err_set(err, DG_EINTERNAL,
                              "checkpoint save: tensor '%s' on rank %d: box [%" PRId64 ", +%" PRId64
                              ") of dim %d is outside its size %" PRId64,
                              k->name, rank, k->start[d], k->shape[d], d, k->global_shape[d]);
    return DG_OK;
}

/* One key of one rank, for sorting. */
typedef struct ref {
    const dg_ckpt_key *k;
    int rank, index;
} ref;

/* By name, then box (start, shape), then rank: copies of a box end up next
 * to each other, holders in rank order. */
static int cmp_ref(const void *a, const void *b) {
    const ref *x = a, *y = b;
    int c = strcmp(x->k->name, y->k->name);
    if (c) return c;
    for (int d = 0; d < DG_MAX_DIMS; d++) {
        if (x->k->start[d] != y->k->start[d]) return x->k->start[d] < y->k->start[d] ? -1 : 1;
        if (x->k->shape[d] != y->k->shape[d]) return x->k->shape[d] < y->k->shape[d] ? -1 : 1;
    }
    return (x->rank > y->rank) - (x->rank < y->rank);
}

static bool same_box(const dg_ckpt_key *a, const dg_ckpt_key *b) {
    return !strcmp(a->name, b->name) && !memcmp(a->start, b->start, sizeof a->start) &&
           !memcmp(a->shape, b->shape, sizeof a->shape);
}

/* A box and its holders: refs [lo, hi) of the sorted array. */
typedef struct group {
    int lo, hi;
    int64_t bytes;
} group;

/* Largest first; among equals, sorted order (every rank sorts alike). */
static int cmp_group(const void *a, const void *b) {
    const group *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
    return (x->lo > y->lo) - (x->lo < y->lo);
}

/* Mark, in writes[rank offset + index], the one holder of each box that
 * writes it: the least loaded so far, boxes taken largest first. */
static int choose_writers(int world, const int *n_keys, const dg_ckpt_key *keys, int stride, const int *base,
                          char *writes, dg_err *err) {
    int n = base[world];
    ref *r = dg_calloc((size_t)DG_MAX(n, 1), sizeof *r);
    for (int w = 0, i = 0; w < world; w++)
        for (int j = 0; j < n_keys[w]; j++, i++) r[i] = (ref){&keys[(size_t)w * (size_t)stride + (size_t)j], w, j};
    qsort(r, (size_t)n, sizeof *r, cmp_ref);
    group *g = dg_calloc((size_t)DG_MAX(n, 1), sizeof *g);
    int ng = 0, st = DG_OK;
    for (int i = 0; i < n && st == DG_OK; i++) {
        if (i > 0 && !strcmp(r[i].k->name, r[i - 1].k->name) &&
            (r[i].k->dtype != r[i - 1].k->dtype || r[i].k->ndim != r[i - 1].k->ndim ||
             memcmp(r[i].k->global_shape, r[i - 1].k->global_shape, sizeof r[i].k->global_shape)))
            st = dg_err_set(err, DG_EINTERNAL, "checkpoint save: ranks %d and %d disagree on tensor '%s''s dtype or shape",
                            r[i - 1].rank, r[i].rank, r[i].k->name);
        if (i > 0 && same_box(r[i].k, r[i - 1].k)) {
            g[ng - 1].hi = i + 1;
        } else {
            g[ng++] = (group){i, i + 1, key_bytes(r[i].k)};
        }
    }
    qsort(g, (size_t)ng, sizeof *g, cmp_group);
    int64_t *load = dg_calloc((size_t)world, sizeof *load);
    for (int i = 0; i < ng && st == DG_OK; i++) {
        int best = g[i].lo;
        for (int j = g[i].lo + 1; j < g[i].hi; j++)
            if (load[r[j].rank] < load[r[best].rank]) best = j;
        load[r[best].rank] += g[i].bytes;
        writes[base[r[best].rank] + r[best].index] = 1;
    }
    dg_free(load);
    dg_free(g);
    dg_free(r);
    return st;
}

int dg_ckpt_plan_make(int world, const int *n_keys, const dg_ckpt_key *keys, int stride, dg_ckpt_plan *p,
                      dg_err *err) {
    memset(p, 0, sizeof *p);
    int *base = dg_calloc((size_t)world + 1, sizeof *base);
    for (int w = 0; w < world; w++) base[w + 1] = base[w] + n_keys[w];
    int st = DG_OK;
    for (int w = 0; w < world && st == DG_OK; w++)
        for (int j = 0; j < n_keys[w] && st == DG_OK; j++)
            st = check_key(&keys[(size_t)w * (size_t)stride + (size_t)j], w, err);
    char *writes = dg_calloc((size_t)DG_MAX(base[world], 1), 1);
    if (st == DG_OK) st = choose_writers(world, n_keys, keys, stride, base, writes, err);
    p->world = world;
    p->entries = dg_calloc((size_t)DG_MAX(base[world], 1), sizeof *p->entries);
    p->writer = dg_calloc((size_t)DG_MAX(base[world], 1), sizeof(int));
    p->key = dg_calloc((size_t)DG_MAX(base[world], 1), sizeof(int));
    p->first = dg_calloc((size_t)world, sizeof(int));
    p->count = dg_calloc((size_t)world, sizeof(int));
    for (int w = 0; w < world && st == DG_OK; w++) {
        p->first[w] = p->n_entries;
        int64_t off = 0;
        for (int j = 0; j < n_keys[w]; j++) {
            if (!writes[base[w] + j]) continue;
            const dg_ckpt_key *k = &keys[(size_t)w * (size_t)stride + (size_t)j];
            dg_ckpt_entry *e = &p->entries[p->n_entries];
            memcpy(e->name, k->name, sizeof e->name);
            e->dtype = (dg_dtype)k->dtype;
            e->ndim = (int)k->ndim;
            memcpy(e->global_shape, k->global_shape, sizeof e->global_shape);
            memcpy(e->slice_start, k->start, sizeof e->slice_start);
            memcpy(e->shape, k->shape, sizeof e->shape);
            dg_ckpt_rank_file(e->file, sizeof e->file, w);
            off += (ALIGN - off % ALIGN) % ALIGN;
            e->offset = off;
            e->nbytes = key_bytes(k);
            off += e->nbytes;
            p->writer[p->n_entries] = w;
            p->key[p->n_entries] = j;
            p->n_entries++;
        }
        p->count[w] = p->n_entries - p->first[w];
    }
    dg_free(writes);
    dg_free(base);
    if (st != DG_OK) dg_ckpt_plan_free(p);
    return st;
}

void dg_ckpt_plan_free(dg_ckpt_plan *p) {
    dg_free(p->entries);
    dg_free(p->writer);
    dg_free(p->key);
    dg_free(p->first);
    dg_free(p->count);
    memset(p, 0, sizeof *p);
}

void dg_ckpt_box_copy(void *dst, const int64_t *dst_stride, const void *src, const int64_t *src_stride,
                      const int64_t *shape, int ndim, size_t elem) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    if (n == 0) return;
    if (ndim == 0) {
        memcpy(dst, src, elem);
        return;
    }
    /* runs along the last dim: one memcpy when both sides are contiguous there */
    int last = ndim - 1;
    bool runs = dst_stride[last] == 1 && src_stride[last] == 1;
    int64_t len = runs ? shape[last] : 1, idx[DG_MAX_DIMS] = {0};
    for (int64_t done = 0; done < n; done += len) {
        int64_t so = 0, dof = 0;
        for (int d = 0; d < ndim; d++) {
            so += idx[d] * src_stride[d];
            dof += idx[d] * dst_stride[d];
        }
        memcpy((char *)dst + (size_t)dof * elem, (const char *)src + (size_t)so * elem, (size_t)len * elem);
        for (int d = runs ? last - 1 : last; d >= 0; d--) { /* next index, odometer style */
            if (++idx[d] < shape[d]) break;
            idx[d] = 0;
        }
    }
}

void dg_ckpt_row_major(const int64_t *shape, int ndim, int64_t *stride) {
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        stride[d] = s;
        s *= shape[d];
    }
}
