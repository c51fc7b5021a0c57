/* dg_dist_ckpt.c — see dg_dist_ckpt.h. */
#include "dg_dist_ckpt.h"

#include <string.h>

#include "dg_pass_tp.h"

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
 * the whole-bucket arrays): 3 n_params entries of t.
 *
 * Expert parameters split over EP (dim 0, rank r holding rows r*G .. r*G+G-1)
 * are saved whole: each of the three tensors gets a buffer of the global
 * shape [EP G, ...] in ep_full, which `gather` fills by an all-gather over
 * the EP group (a collective: every rank builds the table, in the same
 * order) and which a load fills from the file, after which scatter_ep()
 * copies this rank's rows back. */
typedef struct ep_slices {
    int n;
    float **full;  /* [3 n_params] global buffers, NULL for dense tensors */
    float **local; /* [3 n_params] this rank's slice of each */
    int64_t *numel; /* [3 n_params] local elements */
    int *tp_dim, *tp_stride; /* [3 n_params] the dim split over tp (-1: none) and its stride */
    const dg_graph *shape;   /* the graph whose tensors give the local shapes */
    const int *ids;          /* [3 n_params] each entry's parameter */
} ep_slices;

/* A tensor split over tp (dg_pass_tp.h) saved whole: a buffer of the global
 * shape in *full, filled (gather) by an all-gather of every rank's shard
 * (rank order) rearranged by dg_tp_shard_copy; a load fills it from the
 * file and scatter_ep() keeps this rank's shard. */
static int tp_whole(dg_comm *tp, const dg_tensor *p, int d, int k, const char *prefix, float *src, int gather,
                    dg_ckpt_tensor *t, float **full, dg_err *err) {
    int64_t numel = dg_tensor_numel(p);
    *full = dg_aligned_alloc(sizeof(float) * (size_t)(numel * tp->size));
    DG_TRY(dg_ckpt_tensor_from(t, prefix, p, *full, err));
    t->shape[d] *= tp->size;
    if (!gather) return DG_OK;
    float *all = dg_aligned_alloc(sizeof(float) * (size_t)(numel * tp->size));
    dg_comm_req req = {0};
    int st = tp->ops->all_gather(tp, src, all, numel, DG_F32, &req, err);
    if (st == DG_OK) st = tp->ops->wait(tp, &req, err);
    for (int r = 0; st == DG_OK && r < tp->size; r++)
        dg_tp_shard_copy(p->shape, p->ndim, d, k, tp->size, r, *full, all + (int64_t)r * numel, 0);
    dg_free(all);
    return st;
}

static void ep_slices_free(ep_slices *e) {
    for (int i = 0; i < e->n; i++) dg_free(e->full[i]);
    dg_free(e->tp_dim);
    dg_free(e->tp_stride);
    dg_free((void *)e->ids);
    dg_free(e->full);
    dg_free(e->local);
    dg_free(e->numel);
    memset(e, 0, sizeof *e);
}

static int table(const dg_ckpt_run *r, const dg_dist *d, const int *params, int n_params,
                 void *const *ptrs, const moments *mo, int gather, dg_ckpt_tensor *t, ep_slices *e,
                 dg_err *err) {
    dg_comm *ep = r->ep && r->ep->size > 1 ? r->ep : NULL;
    dg_comm *tp = r->tp && r->tp->size > 1 ? r->tp : NULL;
    e->n = 3 * n_params;
    e->tp_dim = dg_malloc(sizeof(int) * (size_t)DG_MAX(e->n, 1));
    e->tp_stride = dg_malloc(sizeof(int) * (size_t)DG_MAX(e->n, 1));
    int *ids = dg_malloc(sizeof(int) * (size_t)DG_MAX(e->n, 1));
    for (int i = 0; i < e->n; i++) e->tp_dim[i] = -1;
    e->shape = d->g;
    e->ids = ids;
    e->full = dg_calloc((size_t)DG_MAX(e->n, 1), sizeof(float *));
    e->local = dg_calloc((size_t)DG_MAX(e->n, 1), sizeof(float *));
    e->numel = dg_calloc((size_t)DG_MAX(e->n, 1), sizeof(int64_t));
    int n = 0;
    static const char *prefix[3] = {"", "optimizer.exp_avg.", "optimizer.exp_avg_sq."};
    for (int i = 0; i < n_params; i++) {
        const dg_tensor *p = &d->g->tensors[params[i]];
        float *src[3] = {ptrs[params[i]], NULL, NULL};
        for (int b = 0; b < d->n && !src[1]; b++)
            for (int k = 0; k < d->layout->b[b].n_params; k++)
                if (d->layout->b[b].params[k] == params[i]) {
                    src[1] = mo->m[b] + d->layout->b[b].offset[k];
                    src[2] = mo->v[b] + d->layout->b[b].offset[k];
                }
        if (!src[1]) return dg_err_set(err, DG_EINTERNAL, "checkpoint: parameter '%s' is in no bucket", p->name);
        int sliced = ep && p->sharding.split[0] == DG_AXIS_EP;
        int ks = 1, tdim = tp ? dg_tp_split_dim(p, &ks) : -1;
        for (int j = 0; j < 3; j++, n++) {
            int64_t numel = dg_tensor_numel(p);
            e->local[n] = src[j];
            e->numel[n] = numel;
            ids[n] = params[i];
            if (tdim >= 0) {
                DG_TRY(tp_whole(tp, p, tdim, ks, prefix[j], src[j], gather, &t[n], &e->full[n], err));
                e->tp_dim[n] = tdim;
                e->tp_stride[n] = ks;
                continue;
            }
            if (!sliced) {
                DG_TRY(dg_ckpt_tensor_from(&t[n], prefix[j], p, src[j], err));
                continue;
            }
            e->full[n] = dg_aligned_alloc(sizeof(float) * (size_t)(numel * ep->size));
            DG_TRY(dg_ckpt_tensor_from(&t[n], prefix[j], p, e->full[n], err));
            t[n].shape[0] *= ep->size;
            if (gather) {
                dg_comm_req req = {0};
                DG_TRY(ep->ops->all_gather(ep, src[j], e->full[n], numel, DG_F32, &req, err));
                DG_TRY(ep->ops->wait(ep, &req, err));
            }
        }
    }
    return DG_OK;
}

/* After a load: this rank's rows of the global expert tensors. */
static void scatter_ep(const dg_ckpt_run *r, const ep_slices *e) {
    for (int i = 0; i < e->n; i++)
        if (e->full[i] && e->tp_dim[i] >= 0) {
            const dg_tensor *p = &e->shape->tensors[e->ids[i]];
            dg_tp_shard_copy(p->shape, p->ndim, e->tp_dim[i], e->tp_stride[i], r->tp->size, r->tp->rank, e->full[i],
                             e->local[i], 1);
        } else if (e->full[i])
            memcpy(e->local[i], e->full[i] + (int64_t)r->ep->rank * e->numel[i],
                   sizeof(float) * (size_t)e->numel[i]);
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
    ep_slices e = {0};
    if (st == DG_OK) st = table(r, d, params, n_params, ptrs, &mo, 1, t, &e, err);
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
        dg_ckpt_save_opts o = {c->keep_last, r->at, r->at_ctx};
        st = dg_ckpt_save(c->save, &meta, t, 3 * n_params, &o, err);
    }
    ep_slices_free(&e);
    dg_free(t);
    moments_free(&mo);
    return dg_dist_agree(r->world, st, err);
}

int dg_dist_ckpt_load(const dg_ckpt_run *r, dg_dist *d, const int *params, int n_params,
                      void *const *ptrs, dg_train_counters *k, dg_err *err) {
    const dg_train_config *c = r->c;
    moments mo;
    moments_alloc(&mo, d);
    dg_ckpt_tensor *t = dg_calloc((size_t)DG_MAX(3 * n_params, 1), sizeof *t);
    /* Read straight into the parameters: dg_ckpt_load checks names, shapes
     * and sizes before it reads a byte, so a bad checkpoint leaves them be. */
    dg_ckpt_meta meta;
    ep_slices e = {0};
    int st = table(r, d, params, n_params, ptrs, &mo, 0, t, &e, err);
    if (st == DG_OK) st = dg_ckpt_load(c->load, DG_CKPT_LATEST, &c->model, &meta, t, 3 * n_params, err);
    if (st == DG_OK) {
        scatter_ep(r, &e);
        for (int i = 0; i < d->n; i++) dg_dist_set_state(d, i, mo.m[i], mo.v[i], ptrs);
        *k = (dg_train_counters){meta.iteration, meta.consumed_samples, meta.consumed_valid_samples,
                                 meta.optimizer_steps, meta.skipped_iters, meta.nan_iters};
    }
    ep_slices_free(&e);
    dg_free(t);
    moments_free(&mo);
    return st;
}

uint64_t dg_dist_ckpt_bytes(const dg_ckpt_run *r, const dg_dist *d, const int *params, int n_params) {
    int ep = r->ep && r->ep->size > 1 ? r->ep->size : 1;
    int tp = r->tp && r->tp->size > 1 ? r->tp->size : 1;
    /* a generous manifest entry per tensor, and the JSON around them */
    uint64_t bytes = 65536;
    for (int i = 0; i < n_params; i++) {
        const dg_tensor *p = &d->g->tensors[params[i]];
        int ks = 1;
        uint64_t b = (uint64_t)dg_tensor_bytes(p) * (p->sharding.split[0] == DG_AXIS_EP ? (uint64_t)ep : 1u);
        if (dg_tp_split_dim(p, &ks) >= 0) b *= (uint64_t)tp; /* saved whole */
        bytes += 3 * (b + 64 + 1024); /* the parameter and its two moments, 64-byte aligned */
    }
    return bytes;
}
