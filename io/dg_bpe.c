/* dg_bpe.c — byte-level BPE vocabulary, merges, encode and decode (see dg_bpe.h). */
#define _POSIX_C_SOURCE 200809L
#include "dg_bpe.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dg_data_map.h"
#include "dg_file_out.h"
#include "dg_memlimit.h"

/* ---- pair -> rank table -------------------------------------------------- */

static void pairs_build(dg_bpe *b) {
    size_t cap = 16;
    while (cap < 2 * (size_t)b->n_merges + 16) cap *= 2;
    b->pair_cap = cap;
    b->pair_key = dg_malloc(sizeof(uint64_t) * cap);
    b->pair_rank = dg_malloc(sizeof(int32_t) * cap);
    for (size_t i = 0; i < cap; i++) b->pair_rank[i] = -1;
    for (int32_t r = 0; r < b->n_merges; r++) {
        uint64_t key = ((uint64_t)(uint32_t)b->merges[r][0] << 32) | (uint32_t)b->merges[r][1];
        size_t h = dg_mix64(key) & (cap - 1);
        while (b->pair_rank[h] >= 0 && b->pair_key[h] != key) h = (h + 1) & (cap - 1);
        if (b->pair_rank[h] < 0) { /* the first (lowest) rank of a duplicate pair wins */
            b->pair_key[h] = key;
            b->pair_rank[h] = r;
        }
    }
}

int32_t dg_bpe_rank(const dg_bpe *b, int32_t left, int32_t right) {
    uint64_t key = ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
    size_t h = dg_mix64(key) & (b->pair_cap - 1);
    while (b->pair_rank[h] >= 0) {
        if (b->pair_key[h] == key) return b->pair_rank[h];
        h = (h + 1) & (b->pair_cap - 1);
    }
    return -1;
}

/* ---- token string <-> bytes ---------------------------------------------- */

/* Map a vocab.json / merges.txt token string (UTF-8 of byte characters) to
 * raw bytes in out (capacity >= strlen(s)). Returns the length, or -1 when
 * a character is not a byte character. */
static int is_printable_byte(uint32_t x) { return (x >= '!' && x <= '~') || (x >= 0xa1 && x <= 0xac) || (x >= 0xae && x <= 0xff); }

/* The byte a byte character stands for, or -1. */
static int byte_of_char(uint32_t cp) {
    if (cp < 256) return is_printable_byte(cp) ? (int)cp : -1;
    uint32_t k = cp - 256;
    for (uint32_t x = 0; x < 256; x++)
        if (!is_printable_byte(x) && k-- == 0) return (int)x;
    return -1;
}

int64_t dg_bpe_unmap_token(const char *s, size_t n, uint8_t *out) {
    int64_t k = 0;
    for (size_t i = 0; i < n;) {
        uint8_t c = (uint8_t)s[i];
        uint32_t cp;
        if (c < 0x80) cp = c, i += 1;
        else if ((c & 0xe0) == 0xc0 && i + 1 < n) cp = ((uint32_t)(c & 0x1f) << 6) | (s[i + 1] & 0x3f), i += 2;
        else return -1;
        int byte = byte_of_char(cp);
        if (byte < 0) return -1;
        out[k++] = (uint8_t)byte;
    }
    return k;
}

/* Append the byte-character UTF-8 spelling of bytes p[0, n) to out. */
static void map_token(const uint8_t *p, int32_t n, dg_bytebuf *out) {
    for (int32_t i = 0; i < n; i++) {
        uint32_t cp = dg_bpe_byte_char(p[i]);
        uint8_t u[2];
        if (cp < 0x80) {
            u[0] = (uint8_t)cp;
            dg_bytebuf_append(out, u, 1);
        } else {
            u[0] = (uint8_t)(0xc0 | (cp >> 6));
            u[1] = (uint8_t)(0x80 | (cp & 0x3f));
            dg_bytebuf_append(out, u, 2);
        }
    }
}

/* bytes -> id lookup built over the vocabulary (used while loading merges). */
typedef struct tok_index {
    uint64_t *h;
    int32_t *id;
    size_t cap;
} tok_index;

static void tok_index_build(tok_index *t, const dg_bpe *b) {
    t->cap = 16;
    while (t->cap < 2 * (size_t)b->vocab_size + 16) t->cap *= 2;
    t->h = dg_calloc(t->cap, sizeof(uint64_t));
    t->id = dg_malloc(sizeof(int32_t) * t->cap);
    for (int32_t i = 0; i < b->vocab_size; i++) {
        if (!b->tok_bytes[i]) continue;
        uint64_t h = dg_hash_bytes(b->tok_bytes[i], (size_t)b->tok_len[i]);
        size_t s = h & (t->cap - 1);
        while (t->h[s]) s = (s + 1) & (t->cap - 1);
        t->h[s] = h;
        t->id[s] = i;
    }
}

static int32_t tok_index_find(const tok_index *t, const dg_bpe *b, const uint8_t *p, size_t n) {
    uint64_t h = dg_hash_bytes(p, n);
    for (size_t s = h & (t->cap - 1); t->h[s]; s = (s + 1) & (t->cap - 1)) {
        int32_t i = t->id[s];
        if (t->h[s] == h && (size_t)b->tok_len[i] == n && memcmp(b->tok_bytes[i], p, n) == 0) return i;
    }
    return -1;
}

static void set_token(dg_bpe *b, int32_t id, const uint8_t *p, int32_t n) {
    b->tok_bytes[id] = dg_malloc((size_t)(n ? n : 1));
    memcpy(b->tok_bytes[id], p, (size_t)n);
    b->tok_len[id] = n;
}

/* ---- load / save ------------------------------------------------------- */

/* Bytes per vocabulary id while loading: tok_bytes and tok_len, and the
 * tok_index (up to 4 slots of hash + id per id, as its capacity is the power
 * of two at or above 2 * vocab_size + 16). Token bytes themselves come on top. */
static const double bpe_bytes_per_id =
    (double)(sizeof(uint8_t *) + sizeof(int32_t) + 4 * (sizeof(uint64_t) + sizeof(int32_t)));

static int load_vocab(dg_bpe *b, const char *path, dg_err *err) {
    dg_map m;
    DG_TRY(dg_map_file(&m, path, err));
    cJSON *root = m.p ? cJSON_ParseWithLength((const char *)m.p, m.n) : NULL;
    dg_unmap(&m);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return dg_err_set(err, DG_EINPUT, "%s: not a JSON object of token -> id", path);
    }
    int32_t maxid = -1;
    int64_t entries = 0;
    const cJSON *top = NULL; /* the token with the largest id */
    for (cJSON *it = root->child; it; it = it->next, entries++) {
        double id = it->valuedouble;
        if (!cJSON_IsNumber(it) || !(id >= 0) || id != floor(id) || id >= INT32_MAX) {
            /* The message names the token, so set it before the tree is freed. */
            int st = dg_err_set(err, DG_EINPUT, "%s: token '%s' has no valid integer id (expected 0 to %d)", path,
                                it->string, INT32_MAX - 1);
            cJSON_Delete(root);
            return st;
        }
        if (it->valueint > maxid) {
            maxid = it->valueint;
            top = it;
        }
    }
    /* The tables are indexed by id: refuse an id far past what this rank
     * can hold before allocating them. Then, as Megatron's vocabulary size
     * is the number of entries, every id must be below it (ids 0..n-1). */
    char what[300];
    snprintf(what, sizeof what, "%.200s: ids up to %d", path, maxid);
    int st = dg_mem_check(bpe_bytes_per_id * ((double)maxid + 1), what, err);
    if (st == DG_OK && maxid >= entries)
        st = dg_err_set(err, DG_EINPUT,
                        "%s: token '%s' has id %d, but the vocabulary has %" PRId64 " entries (ids must be 0 to %" PRId64
                        ")", path, top->string, maxid, entries, entries - 1);
    if (st != DG_OK) {
        cJSON_Delete(root);
        return st;
    }
    b->vocab_size = maxid + 1;
    b->tok_bytes = dg_calloc((size_t)(b->vocab_size ? b->vocab_size : 1), sizeof(uint8_t *));
    b->tok_len = dg_calloc((size_t)(b->vocab_size ? b->vocab_size : 1), sizeof(int32_t));
    for (cJSON *it = root->child; it && st == DG_OK; it = it->next) {
        size_t n = strlen(it->string);
        uint8_t *raw = dg_malloc(n + 1);
        int64_t k = dg_bpe_unmap_token(it->string, n, raw);
        if (k < 0) { /* not byte characters (a special token): keep its UTF-8 */
            memcpy(raw, it->string, n);
            k = (int64_t)n;
        }
        if (b->tok_bytes[it->valueint])
            st = dg_err_set(err, DG_EINPUT, "%s: id %d is given to two tokens", path, it->valueint);
        else set_token(b, it->valueint, raw, (int32_t)k);
        dg_free(raw);
    }
    cJSON_Delete(root);
    return st;
}

static int load_merges(dg_bpe *b, const char *path, dg_err *err) {
    dg_map m;
    DG_TRY(dg_map_file(&m, path, err));
    tok_index ti;
    tok_index_build(&ti, b);
    int st = DG_OK;
    int64_t cap = 1024, line = 0;
    b->merges = dg_malloc(sizeof *b->merges * (size_t)cap);
    b->n_merges = 0;
    uint8_t *buf = dg_malloc(m.n + 1);
    for (size_t i = 0; i < m.n && st == DG_OK;) {
        size_t e = i;
        while (e < m.n && m.p[e] != '\n') e++;
        line++;
        const char *s = (const char *)m.p + i;
        size_t n = e - i;
        if (n && s[n - 1] == '\r') n--;
        i = e + 1;
        if (n == 0 || (line == 1 && n >= 8 && memcmp(s, "#version", 8) == 0)) continue;
        const char *sp = memchr(s, ' ', n);
        if (!sp) {
            st = dg_err_set(err, DG_EINPUT, "%s:%lld: expected 'left right'", path, (long long)line);
            break;
        }
        int64_t la = dg_bpe_unmap_token(s, (size_t)(sp - s), buf);
        int64_t lb = la < 0 ? -1 : dg_bpe_unmap_token(sp + 1, n - (size_t)(sp - s) - 1, buf + la);
        int32_t a = la < 0 ? -1 : tok_index_find(&ti, b, buf, (size_t)la);
        int32_t c = lb < 0 ? -1 : tok_index_find(&ti, b, buf + la, (size_t)lb);
        int32_t r = (a < 0 || c < 0) ? -1 : tok_index_find(&ti, b, buf, (size_t)(la + lb));
        if (r < 0) {
            st = dg_err_set(err, DG_EINPUT, "%s:%lld: '%.*s' merges tokens that are not all in the vocabulary", path,
                            (long long)line, (int)n, s);
            break;
        }
        if (b->n_merges == cap) {
            cap *= 2;
            b->merges = dg_realloc(b->merges, sizeof *b->merges * (size_t)cap);
        }
        b->merges[b->n_merges][0] = a;
        b->merges[b->n_merges][1] = c;
        b->merges[b->n_merges][2] = r;
        b->n_merges++;
    }
    dg_free(buf);
    dg_free(ti.h);
    dg_free(ti.id);
    dg_unmap(&m);
    return st;
}

int dg_bpe_load(dg_bpe *b, const char *vocab_json, const char *merges_txt, dg_err *err) {
    memset(b, 0, sizeof *b);
    int st = load_vocab(b, vocab_json, err);
    if (st == DG_OK) {
        tok_index ti;
        tok_index_build(&ti, b);
        for (int c = 0; c < 256 && st == DG_OK; c++) {
            uint8_t byte = (uint8_t)c;
            b->byte_id[c] = tok_index_find(&ti, b, &byte, 1);
            if (b->byte_id[c] < 0)
                st = dg_err_set(err, DG_EINPUT, "%s: byte 0x%02x has no token (not a byte-level vocabulary)",
                                vocab_json, c);
        }
        b->eod = tok_index_find(&ti, b, (const uint8_t *)DG_BPE_EOD_TEXT, strlen(DG_BPE_EOD_TEXT));
        dg_free(ti.h);
        dg_free(ti.id);
    }
    if (st == DG_OK) st = load_merges(b, merges_txt, err);
    if (st == DG_OK) pairs_build(b);
    if (st != DG_OK) dg_bpe_free(b);
    return st;
}

int dg_bpe_save(const dg_bpe *b, const char *vocab_json, const char *merges_txt, dg_err *err) {
    cJSON *root = cJSON_CreateObject();
    dg_bytebuf s = {0};
    for (int32_t i = 0; i < b->vocab_size; i++) {
        if (!b->tok_bytes[i]) continue;
        s.n = 0;
        if (i == b->eod) dg_bytebuf_append(&s, b->tok_bytes[i], b->tok_len[i]);
        else map_token(b->tok_bytes[i], b->tok_len[i], &s);
        dg_bytebuf_append(&s, "", 1);
        cJSON_AddItemToObject(root, (const char *)s.v, cJSON_CreateNumber(i));
    }
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    /* Both files complete before either replaces an old one: a failure
     * leaves the old pair as it was, never a new vocabulary beside old merges. */
    dg_file_out v = {0}, m = {0}; /* abort is a no-op on a zeroed or released handle */
    int st = dg_file_out_open(&v, vocab_json, NULL, err);
    if (st == DG_OK) st = dg_file_out_write(&v, json, strlen(json), err);
    if (st == DG_OK) st = dg_file_out_close(&v, err);
    cJSON_free(json);
    const char head[] = "#version: 0.2\n";
    if (st == DG_OK) st = dg_file_out_open(&m, merges_txt, NULL, err);
    if (st == DG_OK) st = dg_file_out_write(&m, head, sizeof head - 1, err);
    for (int32_t r = 0; st == DG_OK && r < b->n_merges; r++) {
        s.n = 0;
        map_token(b->tok_bytes[b->merges[r][0]], b->tok_len[b->merges[r][0]], &s);
        dg_bytebuf_append(&s, " ", 1);
        map_token(b->tok_bytes[b->merges[r][1]], b->tok_len[b->merges[r][1]], &s);
        dg_bytebuf_append(&s, "\n", 1);
        st = dg_file_out_write(&m, s.v, (size_t)s.n, err);
    }
    if (st == DG_OK) st = dg_file_out_close(&m, err);
    dg_bytebuf_free(&s);
    if (st == DG_OK) st = dg_file_out_commit(&v, err);
    if (st == DG_OK) return dg_file_out_commit(&m, err);
    dg_file_out_abort(&v);
    dg_file_out_abort(&m);
    return st;
}

void dg_bpe_from_merges(dg_bpe *b, const int32_t (*pairs)[2], int32_t n_merges) {
    memset(b, 0, sizeof *b);
    b->vocab_size = 257 + n_merges;
    b->tok_bytes = dg_calloc((size_t)b->vocab_size, sizeof(uint8_t *));
    b->tok_len = dg_calloc((size_t)b->vocab_size, sizeof(int32_t));
    /* GPT-2's order: the printable bytes first, then the rest. */
    int32_t id = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int c = 0; c < 256; c++) {
            int printable = dg_bpe_byte_char((uint8_t)c) < 256;
            if (printable != (pass == 0)) continue;
            uint8_t byte = (uint8_t)c;
            set_token(b, id, &byte, 1);
            b->byte_id[c] = id++;
        }
    b->n_merges = n_merges;
    b->merges = dg_malloc(sizeof *b->merges * (size_t)(n_merges ? n_merges : 1));
    dg_bytebuf cat = {0};
    for (int32_t k = 0; k < n_merges; k++) {
        int32_t l = pairs[k][0], r = pairs[k][1];
        cat.n = 0;
        dg_bytebuf_append(&cat, b->tok_bytes[l], b->tok_len[l]);
        dg_bytebuf_append(&cat, b->tok_bytes[r], b->tok_len[r]);
        set_token(b, 256 + k, cat.v, (int32_t)cat.n);
        b->merges[k][0] = l;
        b->merges[k][1] = r;
        b->merges[k][2] = 256 + k;
    }
    dg_bytebuf_free(&cat);
    b->eod = b->vocab_size - 1;
    set_token(b, b->eod, (const uint8_t *)DG_BPE_EOD_TEXT, (int32_t)strlen(DG_BPE_EOD_TEXT));
    pairs_build(b);
}

void dg_bpe_free(dg_bpe *b) {
    if (b->tok_bytes)
        for (int32_t i = 0; i < b->vocab_size; i++) dg_free(b->tok_bytes[i]);
    dg_free(b->tok_bytes);
    dg_free(b->tok_len);
    dg_free(b->merges);
    dg_free(b->pair_key);
    dg_free(b->pair_rank);
    memset(b, 0, sizeof *b);
}

/* ---- encode / decode ----------------------------------------------------- */

void dg_bpe_cache_init(dg_bpe_cache *c) {
    memset(c, 0, sizeof *c);
    c->cap = 1 << 14;
    c->hash = dg_calloc(c->cap, sizeof(uint64_t));
    c->entry = dg_malloc(sizeof(int64_t) * c->cap);
}

void dg_bpe_cache_free(dg_bpe_cache *c) {
    dg_free(c->hash);
    dg_free(c->entry);
    dg_i32buf_free(&c->pool);
    memset(c, 0, sizeof *c);
}

/* Merge a piece's byte tokens in place; returns the new length. */
static int64_t merge_piece(const dg_bpe *b, int32_t *ids, int64_t n) {
    while (n > 1) {
        int32_t best = -1;
        for (int64_t i = 0; i + 1 < n; i++) {
            int32_t r = dg_bpe_rank(b, ids[i], ids[i + 1]);
            if (r >= 0 && (best < 0 || r < best)) best = r;
        }
        if (best < 0) break;
        int32_t l = b->merges[best][0], rt = b->merges[best][1], res = b->merges[best][2];
        int64_t w = 0;
        for (int64_t i = 0; i < n;) {
            if (i + 1 < n && ids[i] == l && ids[i + 1] == rt) {
                ids[w++] = res;
                i += 2;
            } else {
                ids[w++] = ids[i++];
            }
        }
        n = w;
    }
    return n;
}

/* The same merges for long pieces in O(n log n): a min-heap of adjacent pairs
 * ordered by (rank, position) over a linked list of symbols. Popping the
 * lowest rank, leftmost first, merges every occurrence of a pair left to
 * right before any pair that involves the new token (whose rank is higher),
 * so the result equals merge_piece's. */
typedef struct pair_ent {
    int32_t rank;
    int64_t pos; /* left symbol */
    int32_t left, right;
} pair_ent;

static int ent_less(pair_ent a, pair_ent b) { return a.rank != b.rank ? a.rank < b.rank : a.pos < b.pos; }

static void ent_push(pair_ent *h, int64_t *n, pair_ent e) {
    int64_t i = (*n)++;
    while (i > 0 && ent_less(e, h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = e;
}

static pair_ent ent_pop(pair_ent *h, int64_t *n) {
    pair_ent top = h[0], last = h[--*n];
    int64_t i = 0;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && ent_less(h[c + 1], h[c])) c++;
        if (!ent_less(h[c], last)) break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0) h[i] = last;
    return top;
}

static int64_t merge_piece_long(const dg_bpe *b, int32_t *ids, int64_t n) {
    int64_t *next = dg_malloc(sizeof(int64_t) * (size_t)n), *prev = dg_malloc(sizeof(int64_t) * (size_t)n);
    pair_ent *heap = dg_malloc(sizeof(pair_ent) * (size_t)(3 * n)); /* n-1 pairs + 2 per merge */
    int64_t nh = 0;
    for (int64_t i = 0; i < n; i++) {
        next[i] = i + 1 < n ? i + 1 : -1;
        prev[i] = i - 1;
    }
    for (int64_t i = 0; i + 1 < n; i++) {
        int32_t r = dg_bpe_rank(b, ids[i], ids[i + 1]);
        if (r >= 0) ent_push(heap, &nh, (pair_ent){r, i, ids[i], ids[i + 1]});
    }
    while (nh > 0) {
        pair_ent e = ent_pop(heap, &nh);
        int64_t i = e.pos, j = next[i];
        /* Stale when a neighbour merged since the push. */
        if (ids[i] != e.left || j < 0 || ids[j] != e.right) continue;
        ids[i] = b->merges[e.rank][2];
        ids[j] = -1; /* removed */
        next[i] = next[j];
        if (next[j] >= 0) prev[next[j]] = i;
        if (prev[i] >= 0) {
            int32_t r = dg_bpe_rank(b, ids[prev[i]], ids[i]);
            if (r >= 0) ent_push(heap, &nh, (pair_ent){r, prev[i], ids[prev[i]], ids[i]});
        }
        if (next[i] >= 0) {
            int32_t r = dg_bpe_rank(b, ids[i], ids[next[i]]);
            if (r >= 0) ent_push(heap, &nh, (pair_ent){r, i, ids[i], ids[next[i]]});
        }
    }
    int64_t w = 0;
    for (int64_t i = 0; i >= 0; i = next[i]) ids[w++] = ids[i];
    dg_free(next);
    dg_free(prev);
    dg_free(heap);
    return w;
}

static void cache_grow(dg_bpe_cache *c) { dg_hash64_grow(&c->hash, &c->entry, &c->cap); }

static void encode_piece(const dg_bpe *b, dg_bpe_cache *c, const uint8_t *p, size_t n, dg_i32buf *out) {
    uint64_t h = 0;
    size_t slot = 0;
    if (c && n <= 64) {
        h = dg_hash_bytes(p, n);
        for (slot = h & (c->cap - 1); c->hash[slot]; slot = (slot + 1) & (c->cap - 1)) {
            if (c->hash[slot] != h) continue;
            const int32_t *e = c->pool.v + c->entry[slot];
            if ((size_t)e[0] != n || memcmp(e + 2, p, n) != 0) continue;
            dg_i32buf_append(out, e + 2 + (n + 3) / 4, e[1]);
            return;
        }
    }
    int64_t base = out->n;
    dg_i32buf_reserve(out, (int64_t)n);
    for (size_t i = 0; i < n; i++) out->v[base + (int64_t)i] = b->byte_id[p[i]];
    int64_t m = n > 64 ? merge_piece_long(b, out->v + base, (int64_t)n) : merge_piece(b, out->v + base, (int64_t)n);
    out->n = base + m;
    if (c && n <= 64) {
        /* Bound the memo: start over past ~1M pieces. */
        if (c->used > (1u << 20)) {
            memset(c->hash, 0, sizeof(uint64_t) * c->cap);
            c->used = 0;
            c->pool.n = 0;
            for (slot = h & (c->cap - 1); c->hash[slot]; slot = (slot + 1) & (c->cap - 1)) {
            }
        }
        int64_t words = 2 + (int64_t)(n + 3) / 4 + m;
        dg_i32buf_reserve(&c->pool, words);
        int32_t *e = c->pool.v + c->pool.n;
        e[0] = (int32_t)n;
        e[1] = (int32_t)m;
        e[2 + (n + 3) / 4 - 1] = 0;
        memcpy(e + 2, p, n);
        memcpy(e + 2 + (n + 3) / 4, out->v + base, sizeof(int32_t) * (size_t)m);
        c->hash[slot] = h;
        c->entry[slot] = c->pool.n;
        c->pool.n += words;
        if (++c->used * 2 > c->cap) cache_grow(c);
    }
}

void dg_bpe_index_merges(dg_bpe *b) { pairs_build(b); }

void dg_bpe_encode_piece(const dg_bpe *b, dg_bpe_cache *cache, const uint8_t *piece, size_t n, dg_i32buf *out) {
    encode_piece(b, cache, piece, n, out);
}

void dg_bpe_encode(const dg_bpe *b, dg_bpe_cache *cache, const uint8_t *text, size_t n, dg_i32buf *out) {
    for (size_t i = 0; i < n;) {
        size_t e = dg_bpe_pretok_next(text, n, i);
        encode_piece(b, cache, text + i, e - i, out);
        i = e;
    }
}

int dg_bpe_decode(const dg_bpe *b, const int32_t *ids, int64_t n, dg_bytebuf *out, dg_err *err) {
    for (int64_t i = 0; i < n; i++) {
        int32_t t = ids[i];
        if (t < 0 || t >= b->vocab_size || !b->tok_bytes[t])
            return dg_err_set(err, DG_EINPUT, "token id %d is not in the vocabulary (size %d)", t, b->vocab_size);
        dg_bytebuf_append(out, b->tok_bytes[t], b->tok_len[t]);
    }
    return DG_OK;
}
