/* dg_sample.c — see dg_sample.h. */
#include "dg_sample.h"

#include <math.h>
#include <string.h>


dg_sample_opts dg_sample_opts_default(void) {
    dg_sample_opts o;
    memset(&o, 0, sizeof o);
    o.temperature = 1.0;
    o.seed = 1234;
    o.stop_token = -1;
    return o;
}

int dg_sample_opts_check(const dg_sample_opts *o, dg_err *err) {
    if (o->top_k < 0) return dg_err_set(err, DG_EINPUT, "--top-k: expected >= 0, got %d", o->top_k);
    if (isnan(o->temperature) || isinf(o->temperature))
        return dg_err_set(err, DG_EINPUT, "--temperature: expected a finite number, got %g",
                          o->temperature);
    if (isnan(o->top_p))
        return dg_err_set(err, DG_EINPUT, "--top-p: expected a number in (0, 1], got %g", o->top_p);
    return DG_OK;
}

/* ---- xoshiro256** (Blackman and Vigna), seeded by splitmix64 ------------------------ */

void dg_rng_seed(dg_rng *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = dg_splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t dg_rng_next(dg_rng *r) {
    uint64_t *s = r->s;
    const uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

double dg_rng_uniform(dg_rng *r) { return (double)(dg_rng_next(r) >> 11) * 0x1.0p-53; }

/* ---- sampling --------------------------------------------------------------------- */

typedef struct pair {
    float z;
    int32_t id;
} pair;

/* Descending logit, ties to the lower id: a total order, so the sort (and
 * every draw) is the same whatever qsort's algorithm. NaN logits sort last. */
static int cmp_pair(const void *a, const void *b) {
    const pair *x = a, *y = b;
    int xn = isnan(x->z), yn = isnan(y->z);
    if (xn != yn) return xn - yn;
    if (!xn && x->z != y->z) return x->z > y->z ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

void dg_sampler_init(dg_sampler *s, const dg_sample_opts *o, int64_t V) {
    memset(s, 0, sizeof *s);
    s->o = *o;
    s->V = V;
    dg_rng_seed(&s->rng, o->seed);
    s->w = dg_malloc(sizeof(double) * (size_t)DG_MAX(V, 1));
    s->pairs = dg_malloc(sizeof(pair) * (size_t)DG_MAX(V, 1));
}

void dg_sampler_free(dg_sampler *s) {
    dg_free(s->w);
    dg_free(s->pairs);
    s->w = NULL;
    s->pairs = NULL;
}

int64_t dg_argmax(const float *x, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best] || (isnan(x[best]) && !isnan(x[i]))) best = i;
    return best;
}

static int64_t limit(const dg_sampler *s) {
    return s->o.vocab_limit > 0 && s->o.vocab_limit < s->V ? s->o.vocab_limit : s->V;
}

static int is_greedy(const dg_sample_opts *o) { return o->greedy || !(o->temperature > 0); }

/* Steps 1-5 of dg_sample.h: sorts the candidates into s->pairs and puts the
 * unnormalised weight of rank j into s->w[j]. Returns the kept count; *total
 * gets the kept weights' sum. */
static int64_t kept_weights(dg_sampler *s, const float *logits, double *total) {
    const int64_t n = limit(s);
    pair *p = s->pairs;
    for (int64_t i = 0; i < n; i++) p[i] = (pair){logits[i], (int32_t)i};
    qsort(p, (size_t)n, sizeof(pair), cmp_pair);
    int64_t kept = n;
    if (s->o.top_k > 0 && s->o.top_k < kept) kept = s->o.top_k;
    const double inv_t = 1.0 / s->o.temperature, z0 = p[0].z;
    double sum = 0;
    for (int64_t j = 0; j < kept; j++) {
        /* exp((z - z_max) / T) <= 1: no overflow; -inf logits weigh 0 */
        s->w[j] = isnan(p[j].z) ? 0.0 : exp(((double)p[j].z - z0) * inv_t);
        sum += s->w[j];
    }
    if (s->o.top_p > 0 && s->o.top_p < 1) {
        /* keep rank j while the mass before it is below top_p */
        const double need = s->o.top_p * sum;
        double cum = 0;
        for (int64_t j = 0; j < kept; j++) {
            if (j > 0 && cum >= need) {
                kept = j;
                break;
            }
            cum += s->w[j];
        }
        sum = 0;
        for (int64_t j = 0; j < kept; j++) sum += s->w[j];
    }
    *total = sum;
    return kept;
}

int64_t dg_sampler_probs(dg_sampler *s, const float *logits, double *probs) {
    for (int64_t i = 0; i < s->V; i++) probs[i] = 0;
    if (is_greedy(&s->o)) {
        probs[dg_argmax(logits, limit(s))] = 1.0;
        return 1;
    }
    double total;
    int64_t kept = kept_weights(s, logits, &total);
    const pair *p = s->pairs;
    for (int64_t j = 0; j < kept; j++) probs[p[j].id] = s->w[j] / total;
    return kept;
}

int32_t dg_sampler_next(dg_sampler *s, const float *logits) {
    if (is_greedy(&s->o)) return (int32_t)dg_argmax(logits, limit(s));
    double total;
    int64_t kept = kept_weights(s, logits, &total);
    const pair *p = s->pairs;
    /* inverse CDF over the kept ids in rank order */
    const double u = dg_rng_uniform(&s->rng) * total;
    double acc = 0;
    for (int64_t j = 0; j < kept; j++) {
        acc += s->w[j];
        if (u < acc) return p[j].id;
    }
    return p[kept - 1].id; /* u within rounding of total */
}
