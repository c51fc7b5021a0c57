/* dg_data_buf.h — growable buffers of tokens and bytes for the data pipeline. */
#ifndef DG_DATA_BUF_H
#define DG_DATA_BUF_H

#include <stdint.h>
#include <string.h>

#include "dg_base.h"

typedef struct dg_i32buf {
    int32_t *v; /* [n] values, capacity cap */
    int64_t n, cap;
} dg_i32buf;

typedef struct dg_bytebuf {
    uint8_t *v; /* [n] bytes, capacity cap */
    int64_t n, cap;
} dg_bytebuf;

static inline void dg_i32buf_reserve(dg_i32buf *b, int64_t extra) {
    if (b->n + extra > b->cap) {
        b->cap = DG_MAX(2 * b->cap, b->n + extra + 64);
        b->v = dg_realloc(b->v, sizeof(int32_t) * (size_t)b->cap);
    }
}
static inline void dg_i32buf_push(dg_i32buf *b, int32_t x) {
    dg_i32buf_reserve(b, 1);
    b->v[b->n++] = x;
}
static inline void dg_i32buf_append(dg_i32buf *b, const int32_t *x, int64_t n) {
    dg_i32buf_reserve(b, n);
    if (n) memcpy(b->v + b->n, x, sizeof(int32_t) * (size_t)n);
    b->n += n;
}
static inline void dg_i32buf_free(dg_i32buf *b) {
    dg_free(b->v);
    b->v = NULL;
    b->n = b->cap = 0;
}

static inline void dg_bytebuf_append(dg_bytebuf *b, const void *x, int64_t n) {
    if (b->n + n > b->cap) {
        b->cap = DG_MAX(2 * b->cap, b->n + n + 256);
        b->v = dg_realloc(b->v, (size_t)b->cap);
    }
    if (n) memcpy(b->v + b->n, x, (size_t)n);
    b->n += n;
}
static inline void dg_bytebuf_free(dg_bytebuf *b) {
    dg_free(b->v);
    b->v = NULL;
    b->n = b->cap = 0;
}

/* Hashes for the open-addressing tables below: FNV-1a of a byte string
 * (never 0, which marks an empty slot), and a 64-bit finalizer for integer
 * keys (MurmurHash3's fmix64). */
static inline uint64_t dg_hash_bytes(const uint8_t *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    h ^= h >> 29;
    return h ? h : 1;
}

static inline uint64_t dg_mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

/* Double an open-addressing table of (hash, value) pairs: hash[cap] with 0
 * meaning empty, linear probing on hash & (cap - 1), cap a power of two.
 * The BPE merge cache and the BPE trainer's word table share it. */
static inline void dg_hash64_grow(uint64_t **hash, int64_t **value, size_t *cap) {
    size_t ncap = *cap * 2;
    uint64_t *h = dg_calloc(ncap, sizeof(uint64_t));
    int64_t *v = dg_malloc(sizeof(int64_t) * ncap);
    for (size_t i = 0; i < *cap; i++) {
        if (!(*hash)[i]) continue;
        size_t s = (*hash)[i] & (ncap - 1);
        while (h[s]) s = (s + 1) & (ncap - 1);
        h[s] = (*hash)[i];
        v[s] = (*value)[i];
    }
    dg_free(*hash);
    dg_free(*value);
    *hash = h;
    *value = v;
    *cap = ncap;
}

#endif /* DG_DATA_BUF_H */
