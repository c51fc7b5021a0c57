/* dg_train_record.h — what a training equivalence test keeps of a run:
 * the lm loss and grad norm of each iteration (dg_train_hooks.on_iteration)
 * and each final parameter this rank holds (dg_train_final.on_param).
 * Header-only, for the tests that compare a parallel run with one rank
 * (tests/dist, tests/pp). */
#ifndef DG_TRAIN_RECORD_H
#define DG_TRAIN_RECORD_H

#include <stdio.h>
#include <string.h>

#include "dg_trainer.h"

#define DG_REC_MAX_ITERS 64
#define DG_REC_MAX_PARAMS 256

typedef struct dg_train_record {
    int n_iters;
    double loss[DG_REC_MAX_ITERS], gnorm[DG_REC_MAX_ITERS];
    int n_params;
    char name[DG_REC_MAX_PARAMS][DG_NAME_LEN];
    dg_tensor t[DG_REC_MAX_PARAMS]; /* the parameter as this rank holds it (its layout) */
    int64_t numel[DG_REC_MAX_PARAMS];
    float *values[DG_REC_MAX_PARAMS];
} dg_train_record;

static inline void dg_rec_on_iteration(void *ctx, int it, double lm, double aux, double z, double gnorm, double lr) {
    dg_train_record *r = ctx;
    (void)aux, (void)z, (void)lr;
    if (it - 1 < DG_REC_MAX_ITERS) {
        r->loss[it - 1] = lm;
        r->gnorm[it - 1] = gnorm;
        r->n_iters = it;
    }
}

static inline void dg_rec_on_final(void *ctx, const dg_tensor *t, const float *v) {
    dg_train_record *r = ctx;
    if (r->n_params >= DG_REC_MAX_PARAMS) return;
    int i = r->n_params++;
    snprintf(r->name[i], DG_NAME_LEN, "%s", t->name);
    r->t[i] = *t;
    r->numel[i] = dg_tensor_numel(t);
    r->values[i] = dg_malloc(sizeof(float) * (size_t)DG_MAX(r->numel[i], 1));
    memcpy(r->values[i], v, sizeof(float) * (size_t)r->numel[i]);
}

static inline void dg_rec_free(dg_train_record *r) {
    for (int i = 0; i < r->n_params; i++) dg_free(r->values[i]);
    memset(r, 0, sizeof *r);
}

#endif /* DG_TRAIN_RECORD_H */
