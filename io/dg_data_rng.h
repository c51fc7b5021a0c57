/* dg_data_rng.h — the random stream of numpy.random.RandomState(seed).
 *
 * Megatron builds its document and shuffle indices with
 * numpy.random.RandomState(seed).shuffle(...). To produce the very same
 * indices (and so the same training stream as Megatron for the same data and
 * seed), this is MT19937 seeded the way numpy's legacy RandomState seeds an
 * integer, and shuffle is numpy's Fisher-Yates with its bounded draw
 * (mask-and-reject, 32-bit draws for bounds below 2^32).
 */
#ifndef DG_DATA_RNG_H
#define DG_DATA_RNG_H

#include <stdint.h>

typedef struct dg_mt19937 {
    uint32_t key[624];
    int pos;
} dg_mt19937;

/* RandomState(seed) for an integer seed in [0, 2^32). */
void dg_mt_seed(dg_mt19937 *r, uint32_t seed);
/* One 32-bit output (numpy's random_raw / randint(2**32) stream). */
uint32_t dg_mt_next32(dg_mt19937 *r);
/* A uniform integer in [0, max], drawn exactly as numpy's random_interval. */
uint64_t dg_mt_interval(dg_mt19937 *r, uint64_t max);
/* RandomState.shuffle on a 1-D array of n elements. */
void dg_mt_shuffle_i32(dg_mt19937 *r, int32_t *x, int64_t n);
void dg_mt_shuffle_i64(dg_mt19937 *r, int64_t *x, int64_t n);

#endif /* DG_DATA_RNG_H */
