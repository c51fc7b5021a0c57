/* dg_sample.h — choosing the next token from logits: greedy, temperature,
 * top-k and top-p (nucleus) sampling with a seeded RNG.
 *
 * The distribution a draw comes from, in the order Hugging Face's
 * generate() applies its warpers (Megatron's sampler does the same steps
 * but refuses top-k and top-p together; here they compose):
 *   1. only ids < vocab_limit take part (a padded vocabulary's extra rows
 *      are no tokens of the tokenizer);
 *   2. z = logits / temperature;
 *   3. top-k: keep the k largest z (ties to the lower id, so exactly k);
 *   4. p = softmax over the kept z;
 *   5. top-p: keep the smallest set of the most probable ids (same order)
 *      whose mass reaches top_p; the most probable id is always kept;
 *   6. renormalise and draw.
 * Greedy (greedy = 1, or temperature <= 0) is the argmax, ties to the lower
 * id, and consumes no random numbers.
 *
 * The RNG is xoshiro256** seeded through splitmix64: the same seed gives the
 * same draws on every platform. All state lives in a dg_sampler (no
 * globals); probabilities are computed in double, so a draw does not depend
 * on summation details of the float logits.
 */
#ifndef DG_SAMPLE_H
#define DG_SAMPLE_H

#include <stdint.h>

#include "dg_base.h"
#include "dg_team.h"

typedef struct dg_sample_opts {
    int greedy;         /* 1: argmax (the other fields but vocab_limit are ignored) */
    double temperature; /* > 0; <= 0 means greedy */
    int top_k;          /* 0: off */
    double top_p;       /* in (0, 1); <= 0 or >= 1: off */
    uint64_t seed;
    int vocab_limit;    /* ids >= vocab_limit are never chosen; <= 0: all */
    int32_t stop_token; /* dg_generate stops after emitting it; -1: never */
} dg_sample_opts;

/* greedy = 0, temperature 1, top-k and top-p off, seed 1234, no limit, no stop. */
dg_sample_opts dg_sample_opts_default(void);

/* DG_EINPUT naming the flag (--temperature, --top-k, --top-p) when a value
 * is out of range: negative k, temperature NaN, top-p NaN. */
int dg_sample_opts_check(const dg_sample_opts *o, dg_err *err);

/* ---- the RNG ---------------------------------------------------------------------- */

typedef struct dg_rng {
    uint64_t s[4];
} dg_rng;

void dg_rng_seed(dg_rng *r, uint64_t seed);
uint64_t dg_rng_next(dg_rng *r);
double dg_rng_uniform(dg_rng *r); /* [0, 1), 53 random bits */

/* ---- sampling --------------------------------------------------------------------- */

typedef struct dg_sampler {
    dg_sample_opts o;
    int64_t V;      /* logits per row */
    dg_rng rng;
    double *w;      /* [V] scratch: weight of the id of rank j */
    void *pairs;    /* [V] scratch: (logit, id) sorted by descending logit */
} dg_sampler;

/* Scratch for V logits; the RNG starts from o->seed. */
void dg_sampler_init(dg_sampler *s, const dg_sample_opts *o, int64_t V);
void dg_sampler_free(dg_sampler *s);

/* The next token from logits [V]. */
int32_t dg_sampler_next(dg_sampler *s, const float *logits);

/* The distribution step 6 draws from, as probs [V] (zero outside the kept
 * set; one-hot for greedy). Returns the size of the kept set. Uses s's
 * scratch, not its RNG. */
int64_t dg_sampler_probs(dg_sampler *s, const float *logits, double *probs);

/* Argmax of x [n], ties to the lower index. */
int64_t dg_argmax(const float *x, int64_t n);

#endif /* DG_SAMPLE_H */
