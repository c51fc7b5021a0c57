/* dg_bpe_train.c — incremental BPE training (see dg_bpe_train.h). */
#include "dg_bpe_train.h"

#include <stdio.h>
#include <string.h>

#include "dg_memlimit.h"

/* A distinct piece of the corpus and how often it occurs. */
typedef struct word {
    int64_t off;   /* bytes at t->bytes.v[off], later symbols at t->syms.v[sym] */
    int32_t len;   /* bytes */
    int64_t sym;   /* first symbol in t->syms */
    int32_t nsym;  /* current number of symbols */
    int64_t count; /* occurrences */
} word;

/* An adjacent pair of tokens. */
typedef struct pair {
    int32_t left, right;
    int64_t count;   /* weighted occurrences over all words */
    int banned;      /* its merge would duplicate an existing token's bytes */
    dg_i32buf where; /* words that held it at some point (may be stale) */
} pair;

typedef struct heap_item {
    int64_t count;
    int32_t pair;
} heap_item;

struct dg_bpe_trainer {
    dg_bytebuf bytes;   /* word bytes */
    word *words;
    int64_t nwords, capwords;
    uint64_t *wh;       /* word hash table: hash (0 empty) */
    int64_t *wi;        /* word index */
    size_t wcap;
    /* training state */
    dg_i32buf syms;
    pair *pairs;
    int64_t npairs, cappairs;
    uint64_t *pk;       /* pair table: key + 1 (0 empty) */
    int32_t *pi;
    size_t pcap;
    heap_item *heap;
    int64_t nheap, capheap;
    /* the bytes of every token so far, to refuse a merge that would repeat one */
    dg_bytebuf tb;
    int64_t *toff;  /* [ntok] offset in tb */
    int32_t *tlen;  /* [ntok] */
    int32_t ntok;
    uint64_t *th;   /* token hash set: hash (0 empty) -> id in ti */
    int32_t *ti;
    size_t tcap;
};

dg_bpe_trainer *dg_bpe_trainer_new(void) {
    dg_bpe_trainer *t = dg_calloc(1, sizeof *t);
    t->wcap = 1 << 16;
    t->wh = dg_calloc(t->wcap, sizeof(uint64_t));
    t->wi = dg_malloc(sizeof(int64_t) * t->wcap);
    return t;
}

static void words_grow(dg_bpe_trainer *t) { dg_hash64_grow(&t->wh, &t->wi, &t->wcap); }

static void add_word(dg_bpe_trainer *t, const uint8_t *p, size_t n) {
    uint64_t h = dg_hash_bytes(p, n);
    size_t s = h & (t->wcap - 1);
    for (; t->wh[s]; s = (s + 1) & (t->wcap - 1)) {
        word *w = &t->words[t->wi[s]];
        if (t->wh[s] == h && (size_t)w->len == n && memcmp(t->bytes.v + w->off, p, n) == 0) {
            w->count++;
            return;
        }
    }
    if (t->nwords == t->capwords) {
        t->capwords = t->capwords ? 2 * t->capwords : 4096;
        t->words = dg_realloc(t->words, sizeof(word) * (size_t)t->capwords);
    }
    word *w = &t->words[t->nwords];
    w->off = t->bytes.n;
    w->len = (int32_t)n;
    w->count = 1;
    dg_bytebuf_append(&t->bytes, p, (int64_t)n);
    t->wh[s] = h;
    t->wi[s] = t->nwords++;
    if ((size_t)t->nwords * 2 > t->wcap) words_grow(t);
}

void dg_bpe_trainer_add(dg_bpe_trainer *t, const uint8_t *text, size_t n) {
    for (size_t i = 0; i < n;) {
        size_t e = dg_bpe_pretok_next(text, n, i);
        add_word(t, text + i, e - i);
        i = e;
    }
}

/* ---- pairs ------------------------------------------------------------- */

static void pairs_grow(dg_bpe_trainer *t) {
    size_t cap = t->pcap ? t->pcap * 2 : 1 << 16;
    uint64_t *k = dg_calloc(cap, sizeof(uint64_t));
    int32_t *ix = dg_malloc(sizeof(int32_t) * cap);
    for (size_t i = 0; i < t->pcap; i++) {
        if (!t->pk[i]) continue;
        size_t s = dg_mix64(t->pk[i]) & (cap - 1);
        while (k[s]) s = (s + 1) & (cap - 1);
        k[s] = t->pk[i];
        ix[s] = t->pi[i];
    }
    dg_free(t->pk);
    dg_free(t->pi);
    t->pk = k;
    t->pi = ix;
    t->pcap = cap;
}

static int32_t pair_get(dg_bpe_trainer *t, int32_t l, int32_t r) {
    uint64_t key = (((uint64_t)(uint32_t)l << 32) | (uint32_t)r) + 1;
    size_t s = dg_mix64(key) & (t->pcap - 1);
    for (; t->pk[s]; s = (s + 1) & (t->pcap - 1))
        if (t->pk[s] == key) return t->pi[s];
    if (t->npairs == t->cappairs) {
        t->cappairs = t->cappairs ? 2 * t->cappairs : 1 << 14;
        t->pairs = dg_realloc(t->pairs, sizeof(pair) * (size_t)t->cappairs);
    }
    int32_t id = (int32_t)t->npairs++;
    pair *p = &t->pairs[id];
    memset(p, 0, sizeof *p);
    p->left = l;
    p->right = r;
    t->pk[s] = key;
    t->pi[s] = id;
    if ((size_t)t->npairs * 2 > t->pcap) pairs_grow(t);
    return id;
}

/* Max-heap on (count, then smaller (left, right)). */
static int heap_before(const dg_bpe_trainer *t, heap_item a, heap_item b) {
    if (a.count != b.count) return a.count > b.count;
    const pair *pa = &t->pairs[a.pair], *pb = &t->pairs[b.pair];
    if (pa->left != pb->left) return pa->left < pb->left;
    return pa->right < pb->right;
}

static void heap_push(dg_bpe_trainer *t, int64_t count, int32_t p) {
    if (t->nheap == t->capheap) {
        t->capheap = t->capheap ? 2 * t->capheap : 1 << 14;
        t->heap = dg_realloc(t->heap, sizeof(heap_item) * (size_t)t->capheap);
    }
    int64_t i = t->nheap++;
    heap_item it = {count, p};
    while (i > 0) {
        int64_t up = (i - 1) / 2;
        if (!heap_before(t, it, t->heap[up])) break;
        t->heap[i] = t->heap[up];
        i = up;
    }
    t->heap[i] = it;
}

static heap_item heap_pop(dg_bpe_trainer *t) {
    heap_item top = t->heap[0], last = t->heap[--t->nheap];
    int64_t i = 0, n = t->nheap;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && heap_before(t, t->heap[c + 1], t->heap[c])) c++;
        if (!heap_before(t, t->heap[c], last)) break;
        t->heap[i] = t->heap[c];
        i = c;
    }
    if (n > 0) t->heap[i] = last;
    return top;
}

static void where_add(pair *p, int32_t w) {
    if (p->where.n && p->where.v[p->where.n - 1] == w) return;
    dg_i32buf_push(&p->where, w);
}

/* ---- token byte strings ------------------------------------------------ */

static int32_t tok_find(const dg_bpe_trainer *t, const uint8_t *p, size_t n, uint64_t h, size_t *slot) {
    size_t s = h & (t->tcap - 1);
    for (; t->th[s]; s = (s + 1) & (t->tcap - 1)) {
        int32_t id = t->ti[s];
        if (t->th[s] == h && (size_t)t->tlen[id] == n && memcmp(t->tb.v + t->toff[id], p, n) == 0) return id;
    }
    *slot = s;
    return -1;
}

/* Add token bytes p[0, n) as the next id unless present; returns 0 when present. */
static int tok_add(dg_bpe_trainer *t, const uint8_t *p, size_t n) {
    uint64_t h = dg_hash_bytes(p, n);
    size_t slot = 0;
    if (tok_find(t, p, n, h, &slot) >= 0) return 0;
    t->toff[t->ntok] = t->tb.n;
    t->tlen[t->ntok] = (int32_t)n;
    dg_bytebuf_append(&t->tb, p, (int64_t)n);
    t->th[slot] = h;
    t->ti[slot] = t->ntok++;
    return 1;
}

/* ---- training ---------------------------------------------------------- */

/* The token table's capacity: a power of two >= 4 * vocab_size. */
static size_t token_capacity(int32_t vocab_size) {
    size_t cap = 16;
    while (cap < 4 * (size_t)vocab_size) cap *= 2;
    return cap;
}

int dg_bpe_train_check_size(int32_t vocab_size, dg_err *err) {
    if (vocab_size < 257)
        return dg_err_set(err, DG_EINPUT, "--vocab-size: expected >= 257 (256 bytes + <|endoftext|>), got %d",
                          vocab_size);
    /* The token table (hash + id), offsets and lengths, the merges, and the
     * tokenizer built from them (about 64 bytes an id with its lookup). */
    double need = (double)token_capacity(vocab_size) * (sizeof(uint64_t) + sizeof(int32_t)) +
                  (double)vocab_size * (sizeof(int64_t) + sizeof(int32_t) + 2 * sizeof(int32_t) + 64);
    char what[96];
    snprintf(what, sizeof what, "--vocab-size %d", vocab_size);
    return dg_mem_check(need, what, err);
}

int dg_bpe_trainer_train(dg_bpe_trainer *t, int32_t vocab_size, dg_bpe *out, dg_err *err) {
    DG_TRY(dg_bpe_train_check_size(vocab_size, err));
    int32_t want = vocab_size - 257;
    /* Byte ids in GPT-2 order, from an empty tokenizer. */
    dg_bpe bytes_only;
    dg_bpe_from_merges(&bytes_only, NULL, 0);
    pairs_grow(t);
    for (int64_t w = 0; w < t->nwords; w++) {
        word *wd = &t->words[w];
        wd->sym = t->syms.n;
        wd->nsym = wd->len;
        for (int32_t i = 0; i < wd->len; i++) dg_i32buf_push(&t->syms, bytes_only.byte_id[t->bytes.v[wd->off + i]]);
        const int32_t *s = t->syms.v + wd->sym;
        for (int32_t i = 0; i + 1 < wd->nsym; i++) {
            int32_t p = pair_get(t, s[i], s[i + 1]);
            t->pairs[p].count += wd->count;
            where_add(&t->pairs[p], (int32_t)w);
        }
    }
    t->tcap = token_capacity(vocab_size);
    t->th = dg_calloc(t->tcap, sizeof(uint64_t));
    t->ti = dg_malloc(sizeof(int32_t) * t->tcap);
    t->toff = dg_malloc(sizeof(int64_t) * (size_t)vocab_size);
    t->tlen = dg_malloc(sizeof(int32_t) * (size_t)vocab_size);
    for (int32_t id = 0; id < 256; id++) tok_add(t, bytes_only.tok_bytes[id], 1);
    dg_bpe_free(&bytes_only);
    uint8_t *cat = dg_malloc(t->bytes.n + 1);
    for (int32_t p = 0; p < t->npairs; p++) heap_push(t, t->pairs[p].count, p);

    int32_t(*merges)[2] = dg_malloc(sizeof *merges * (size_t)(want ? want : 1));
    int32_t *stamp = dg_malloc(sizeof(int32_t) * (size_t)(t->nwords ? t->nwords : 1));
    for (int64_t w = 0; w < t->nwords; w++) stamp[w] = -1;
    dg_i32buf touched = {0}, tstamp = {0};
    int32_t done = 0;
    while (done < want && t->nheap > 0) {
        heap_item top = heap_pop(t);
        pair *bp = &t->pairs[top.pair];
        if (bp->count <= 0 || bp->banned) continue;
        if (bp->count != top.count) { /* stale: re-queue with the current count */
            heap_push(t, bp->count, top.pair);
            continue;
        }
        int32_t l = bp->left, r = bp->right, nid = 256 + done;
        memcpy(cat, t->tb.v + t->toff[l], (size_t)t->tlen[l]);
        memcpy(cat + t->tlen[l], t->tb.v + t->toff[r], (size_t)t->tlen[r]);
        if (!tok_add(t, cat, (size_t)(t->tlen[l] + t->tlen[r]))) {
            bp->banned = 1;
            continue;
        }
        merges[done][0] = l;
        merges[done][1] = r;
        touched.n = 0;
        /* Iterate over a snapshot: `where` lists grow while merging. */
        int64_t nwhere = bp->where.n;
        for (int64_t k = 0; k < nwhere; k++) {
            int32_t w = t->pairs[top.pair].where.v[k];
            if (stamp[w] == done) continue;
            stamp[w] = done;
            word *wd = &t->words[w];
            int32_t *s = t->syms.v + wd->sym;
            int has = 0;
            for (int32_t i = 0; i + 1 < wd->nsym && !has; i++) has = s[i] == l && s[i + 1] == r;
            if (!has) continue;
            for (int32_t i = 0; i + 1 < wd->nsym; i++) t->pairs[pair_get(t, s[i], s[i + 1])].count -= wd->count;
            int32_t n2 = 0;
            for (int32_t i = 0; i < wd->nsym;) {
                if (i + 1 < wd->nsym && s[i] == l && s[i + 1] == r) {
                    s[n2++] = nid;
                    i += 2;
                } else {
                    s[n2++] = s[i++];
                }
            }
            wd->nsym = n2;
            for (int32_t i = 0; i + 1 < n2; i++) {
                int32_t p = pair_get(t, s[i], s[i + 1]);
                t->pairs[p].count += wd->count;
                if (s[i] == nid || s[i + 1] == nid) {
                    where_add(&t->pairs[p], w);
                    while (tstamp.n <= p) dg_i32buf_push(&tstamp, -1);
                    if (tstamp.v[p] != done) {
                        tstamp.v[p] = done;
                        dg_i32buf_push(&touched, p);
                    }
                }
            }
        }
        for (int64_t k = 0; k < touched.n; k++) heap_push(t, t->pairs[touched.v[k]].count, touched.v[k]);
        done++;
    }
    dg_free(stamp);
    dg_free(cat);
    dg_i32buf_free(&touched);
    dg_i32buf_free(&tstamp);
    dg_bpe_from_merges(out, (const int32_t(*)[2])merges, done);
    dg_free(merges);
    return DG_OK;
}

void dg_bpe_trainer_free(dg_bpe_trainer *t) {
    if (!t) return;
    dg_bytebuf_free(&t->bytes);
    dg_free(t->words);
    dg_free(t->wh);
    dg_free(t->wi);
    dg_i32buf_free(&t->syms);
    for (int64_t p = 0; p < t->npairs; p++) dg_i32buf_free(&t->pairs[p].where);
    dg_free(t->pairs);
    dg_free(t->pk);
    dg_free(t->pi);
    dg_free(t->heap);
    dg_bytebuf_free(&t->tb);
    dg_free(t->toff);
    dg_free(t->tlen);
    dg_free(t->th);
    dg_free(t->ti);
    dg_free(t);
}
