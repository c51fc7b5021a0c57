/* dg_data_rng.c — MT19937 with numpy's legacy seeding and shuffle (see
 * dg_data_rng.h). Written from the published MT19937 algorithm. */
#include "dg_data_rng.h"

#define MT_N 624
#define MT_M 397

void dg_mt_seed(dg_mt19937 *r, uint32_t seed) {
    r->key[0] = seed;
    for (int i = 1; i < MT_N; i++) r->key[i] = 1812433253u * (r->key[i - 1] ^ (r->key[i - 1] >> 30)) + (uint32_t)i;
    r->pos = MT_N;
}

static void regenerate(dg_mt19937 *r) {
    static const uint32_t mag[2] = {0u, 0x9908b0dfu};
    uint32_t *k = r->key;
    int i = 0;
    for (; i < MT_N - MT_M; i++) {
        uint32_t y = (k[i] & 0x80000000u) | (k[i + 1] & 0x7fffffffu);
        k[i] = k[i + MT_M] ^ (y >> 1) ^ mag[y & 1u];
    }
    for (; i < MT_N - 1; i++) {
        uint32_t y = (k[i] & 0x80000000u) | (k[i + 1] & 0x7fffffffu);
        k[i] = k[i + (MT_M - MT_N)] ^ (y >> 1) ^ mag[y & 1u];
    }
    uint32_t y = (k[MT_N - 1] & 0x80000000u) | (k[0] & 0x7fffffffu);
    k[MT_N - 1] = k[MT_M - 1] ^ (y >> 1) ^ mag[y & 1u];
    r->pos = 0;
}

uint32_t dg_mt_next32(dg_mt19937 *r) {
    if (r->pos == MT_N) regenerate(r);
    uint32_t y = r->key[r->pos++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

uint64_t dg_mt_interval(dg_mt19937 *r, uint64_t max) {
    if (max == 0) return 0;
    uint64_t mask = max;
    mask |= mask >> 1;
    mask |= mask >> 2;
    mask |= mask >> 4;
    mask |= mask >> 8;
    mask |= mask >> 16;
    mask |= mask >> 32;
    uint64_t v;
    if (max <= 0xffffffffu) {
        while ((v = (dg_mt_next32(r) & mask)) > max) {
        }
    } else {
        for (;;) {
            uint64_t hi = dg_mt_next32(r);
            v = ((hi << 32) | dg_mt_next32(r)) & mask;
            if (v <= max) break;
        }
    }
    return v;
}

void dg_mt_shuffle_i32(dg_mt19937 *r, int32_t *x, int64_t n) {
    for (int64_t i = n - 1; i >= 1; i--) {
        int64_t j = (int64_t)dg_mt_interval(r, (uint64_t)i);
        int32_t t = x[i];
        x[i] = x[j];
        x[j] = t;
    }
}

void dg_mt_shuffle_i64(dg_mt19937 *r, int64_t *x, int64_t n) {
    for (int64_t i = n - 1; i >= 1; i--) {
        int64_t j = (int64_t)dg_mt_interval(r, (uint64_t)i);
        int64_t t = x[i];
        x[i] = x[j];
        x[j] = t;
    }
}
