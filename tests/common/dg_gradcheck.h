/* dg_gradcheck.h — finite-difference check of a graph's backward.
 *
 * The test's build() callback adds leaf tensors and the op(s) under test to
 * g and returns the output tensor. The harness then forms
 *     loss = sum(out * r)     with r a fixed random tensor,
 * runs dg_autodiff, and compares d loss / d p for every parameter p (leaves
 * with role DG_ROLE_PARAMETER) against central differences
 *     (loss(p + eps) - loss(p - eps)) / (2 eps)
 * on up to max_checks elements of each parameter. An element passes when
 *     |analytic - numeric| <= atol + rtol * max(|analytic|, |numeric|).
 * Leaves are filled with seeded normal values times `scale`; init() (may be
 * NULL) then overrides what it needs (token ids, masks).
 */
#ifndef DG_GRADCHECK_H
#define DG_GRADCHECK_H

#include <stdint.h>

#include "dg_buffers.h"
#include "dg_graph.h"
#include "dg_team.h"

typedef int (*dg_gc_build_fn)(dg_graph *g, void *ctx);
typedef void (*dg_gc_init_fn)(const dg_graph *g, dg_buffers *b, void *ctx);

typedef struct dg_gradcheck_opts {
    double eps;      /* default 1e-2 */
    double rtol;     /* default 2e-2 */
    double atol;     /* default 1e-3 */
    double scale;    /* std of the random leaves, default 1.0 */
    int max_checks;  /* elements checked per parameter, default 24 */
    uint64_t seed;   /* default 1234 */
    int nthreads;    /* team size for the kernels, default 1 */
} dg_gradcheck_opts;

/* Returns the number of mismatching elements (0 = pass); prints each
 * mismatch and a summary line to stderr. A graph or run error counts as 1. */
int dg_gradcheck(const char *what, dg_gc_build_fn build, dg_gc_init_fn init, void *ctx,
                 const dg_gradcheck_opts *opts);

/* A dg_gc_init_fn for the counter-based draws (ops/dg_op_dropout.h): the i32
 * [4] input named "key" gets a training key (seed 1234, iteration 7, first
 * sample 40, training on). */
void dg_gc_init_key(const dg_graph *g, dg_buffers *b, void *ctx);

/* Deterministic random numbers for tests. */
typedef struct dg_test_rng { uint64_t s; } dg_test_rng;
uint64_t dg_test_rng_next(dg_test_rng *r);
double dg_test_rng_uniform(dg_test_rng *r); /* [0, 1) */
double dg_test_rng_normal(dg_test_rng *r);
void dg_test_fill_normal(dg_test_rng *r, float *x, int64_t n, double scale);

/* A dg_team backed by plain pthreads, for tests that check results do not
 * depend on the thread count (the scheduler has the real, pinned one). */
typedef struct dg_test_team dg_test_team;
dg_test_team *dg_test_team_new(int nthreads);
const dg_team *dg_test_team_get(dg_test_team *t);
void dg_test_team_free(dg_test_team *t);

#endif /* DG_GRADCHECK_H */
