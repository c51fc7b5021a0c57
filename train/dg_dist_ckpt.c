/* dg_dist_ckpt.c — see dg_dist_ckpt.h. */
#include "dg_dist_ckpt.h"

#include <string.h>

/* Whole-bucket moment arrays, one pair per bucket. */
typedef struct moments {
    int n;
    float **m, **v;
} moments;

static void moments_alloc(moments *mo, const dg_dist *d) {
    mo->n = d->n;
    mo->m = dg_calloc((size_t)DG_MAX(d->n, 1), sizeof(float *));
    mo->v = dg_calloc((size_t)DG_MAX(d->n, 1), sizeof(float *));
    for (int i = 0; i < d->n; i++) {
        size_t bytes = sizeof(float) * (size_t)DG_MAX(d->layout->b[i].padded, 1);
        mo->m[i] = dg_aligned_alloc(bytes);
        mo->v[i] = dg_aligned_alloc(bytes);
    }
}

static void moments_free(moments *mo) {
    for (int i = 0; i < mo->n; i++) {
        dg_free(mo->m[i]);
        dg_free(mo->v[i]);
    }
    dg_free(mo->m);
    dg_free(mo->v);
}

/* The table of tensors: each parameter, then its two moments (pointing into
 * the whole-bucket arrays). Returns the count written to t (3 n_params). */
static int table(const dg_dist *d, const int *params, int n_params, void *const *ptrs,
                 const moments *mo, dg_ckpt_tensor *t, dg_err *err) {
    int n = 0;
    for (int i = 0; i < n_params; i++) {
        const dg_tensor *p = &d->g->tensors[params[i]];
        float *m = NULL, *v = NULL;
        for (int b = 0; b < d->n && !m; b++)
            for (int k = 0; k < d->layout->b[b].n_params; k++)
                if (d->layout->b[b].params[k] == params[i]) {
                    m = mo->m[b] + d->layout->b[b].offset[k];
                    v = mo->v[b] + d->layout->b[b].offset[k];
                }
        if (!m) return dg_err_set(err, DG_EINTERNAL, "checkpoint: parameter '%s' is in no bucket", p->name);
        DG_TRY(dg_ckpt_tensor_from(&t[n++], "", p, ptrs[params[i]], err));
        DG_TRY(dg_ckpt_tensor_from(&t[n++], "optimizer.exp_avg.", p, m, err));
        DG_TRY(dg_ckpt_tensor_from(&t[n++], "optimizer.exp_avg_sq.", p, v, err));
    }
    return n;
}

/* Every rank learns the worst status (the writer's save can fail alone). */
static int agree(const dg_ckpt_run *r, int st, dg_err *err) {
    double v = st;
    dg_err e2 = {{0}};
    if (dg_dist_sum(r->world, &v, 1, &e2) != DG_OK) return dg_err_set(err, DG_EINTERNAL, "%s", e2.msg);
    if (st == DG_OK && v != 0)
        return dg_err_set(err, DG_EINPUT, "checkpoint: another rank failed (see its message)");
    return st;
}

int dg_dist_ckpt_save(const dg_ckpt_run *r, const dg_dist *d, const int *params, int n_params,
                      void *const *ptrs, const dg_train_counters *k, dg_err *err) {
    const dg_train_config *c = r->c;
    moments mo;
    moments_alloc(&mo, d);
    int st = DG_OK;
    for (int i = 0; st == DG_OK && i < d->n; i++)
        st = dg_dist_gather_moments((dg_dist *)d, i, mo.m[i], mo.v[i], err);
    dg_ckpt_tensor *t = dg_calloc((size_t)DG_MAX(3 * n_params, 1), sizeof *t);
    if (st == DG_OK && r->writer) {
        dg_ckpt_meta meta;
        dg_ckpt_meta_init(&meta);
        meta.iteration = k->iteration;
        meta.consumed_samples = k->consumed;
        meta.consumed_valid_samples = k->consumed_valid;
        meta.optimizer_steps = k->updates;
        meta.skipped_iters = k->skipped;
        meta.nan_iters = k->nans;
        meta.model = c->model;
        snprintf(meta.tokenizer.type, sizeof meta.tokenizer.type, "%s",
                 c->tokenizer_type[0] ? c->tokenizer_type : (c->mock_data ? "NullTokenizer" : "ByteLevelTokenizer"));
        snprintf(meta.tokenizer.vocab_file, sizeof meta.tokenizer.vocab_file, "%s", c->vocab_file);
        snprintf(meta.tokenizer.merge_file, sizeof meta.tokenizer.merge_file, "%s", c->merge_file);
        meta.tokenizer.vocab_size = r->vocab;
        snprintf(meta.data.path, sizeof meta.data.path, "%s", c->data_path);
        snprintf(meta.data.split, sizeof meta.data.split, "%s", c->split);
        meta.data.mock = c->mock_data;
        meta.data.seed = c->seed;
        int n = table(d, params, n_params, ptrs, &mo, t, err);
        st = n < 0 ? DG_EINTERNAL : dg_ckpt_save(c->save, &meta, t, n, c->keep_last, err);
    }
    dg_free(t);
    moments_free(&mo);
    return agree(r, st, err);
}

int dg_dist_ckpt_load(const dg_ckpt_run *r, dg_dist *d, const int *params, int n_params,
                      void *const *ptrs, dg_train_counters *k, int *loaded, dg_err *err) {
    const dg_train_config *c = r->c;
    *loaded = 0;
    if (!dg_ckpt_has_tracker(c->load)) return DG_OK; /* nothing saved yet: start from scratch */
    moments mo;
    moments_alloc(&mo, d);
    dg_ckpt_tensor *t = dg_calloc((size_t)DG_MAX(3 * n_params, 1), sizeof *t);
    /* Read straight into the parameters: dg_ckpt_load checks names, shapes
     * and sizes before it reads a byte, so a bad checkpoint leaves them be. */
    int n = table(d, params, n_params, ptrs, &mo, t, err);
    dg_ckpt_meta meta;
    int st = n < 0 ? DG_EINTERNAL : dg_ckpt_load(c->load, DG_CKPT_LATEST, &c->model, &meta, t, n, err);
    if (st == DG_OK) {
        for (int i = 0; i < d->n; i++) dg_dist_set_state(d, i, mo.m[i], mo.v[i], ptrs);
        *k = (dg_train_counters){meta.iteration, meta.consumed_samples, meta.consumed_valid_samples,
                                 meta.optimizer_steps, meta.skipped_iters, meta.nan_iters};
        *loaded = 1;
    }
    dg_free(t);
    moments_free(&mo);
    return st;
}
