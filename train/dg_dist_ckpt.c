/* dg_dist_ckpt.c — see dg_dist_ckpt.h. */
#include "dg_dist_ckpt.h"

#include "dg_layout.h"
#include "dg_model_record.h"

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
 * the whole-bucket arrays): 3 n_params entries of t.
 *
 * Parameters split over EP (expert weights) or TP are saved whole: each of the
 * three tensors gets a buffer of the global shape in ep_full, which `gather`
 * fills by an all-gather over the EP or TP group (a collective: every rank builds
 * the table, in the same order) followed by placing each rank's slice where
 * dg_shard_copy says, and which a load fills from the file, after which
 * scatter_ep() copies this rank's slice back. */
typedef struct ep_slices {
    int n;
    float **full;   /* [3 n_params] global buffers, NULL for tensors held whole */
    float **local;  /* [3 n_params] this rank's slice of each */
    const dg_tensor **param; /* [3 n_params] the parameter whose layout each follows */
    int mesh[DG_AXIS_COUNT]; /* the axes checkpoints gather: ep, tp */
    int coord[DG_AXIS_COUNT];
} ep_slices;

static void ep_slices_free(ep_slices *e) {
    for (int i = 0; i < e->n; i++) dg_free(e->full[i]);
    dg_free(e->full);
    dg_free(e->local);
    dg_free(e->param);
    memset(e, 0, sizeof *e);
}

/* The group a checkpoint gathers axis a over (ep, tp), or NULL. */
static dg_comm *axis_comm(const dg_ckpt_run *r, int a) {
    dg_comm *c = a == DG_AXIS_EP ? r->ep : a == DG_AXIS_TP ? r->tp : NULL;
    return c && c->size > 1 ? c : NULL;
}

/* *axes: the axes p is split over here that the checkpoint gathers (ep
 * and tp, by their groups' sizes, whatever the graph's mesh says; an expert
 * weight under expert tensor parallelism has both), a bit set of dg_axis.
 * DG_EINTERNAL when it is split over an axis a checkpoint cannot gather. */
static int split_axes(const dg_ckpt_run *r, const dg_tensor *p, const dg_graph *g, unsigned *axes, dg_err *err) {
    *axes = 0;
    for (int d = 0; d < p->ndim; d++)
        for (int k = 0; k < 2; k++) {
            int a = k ? p->sharding.split2[d] : p->sharding.split[d];
            if (a == DG_AXIS_NONE) continue;
            if (axis_comm(r, a)) *axes |= 1u << a;
            else if (a != DG_AXIS_EP && a != DG_AXIS_TP && dg_mesh_size(g, (dg_axis)a) > 1)
                return dg_err_set(err, DG_EINTERNAL, "checkpoint: parameter '%s' is split over %s, which "
                                  "checkpoints do not gather yet", p->name, dg_axis_name((dg_axis)a));
        }
    return DG_OK;
}

/* Gather this rank's slice src of p over the groups of `axes` (one
 * all-gather per axis, each of what the previous ones gathered) into the
 * global buffer full. */
static int gather_axes(const dg_ckpt_run *r, const ep_slices *e, unsigned axes, const dg_tensor *p, float *src,
                       float *full, dg_err *err) {
    int64_t numel = dg_tensor_numel(p), count = 1;
    int ax[DG_AXIS_COUNT], na = 0, st = DG_OK;
    float *cur = src, *own = NULL;
    for (int a = 0; a < DG_AXIS_COUNT; a++)
        if (axes & (1u << a)) ax[na++] = a;
    for (int i = 0; st == DG_OK && i < na; i++) {
        dg_comm *c = axis_comm(r, ax[i]);
        float *next = dg_aligned_alloc(sizeof(float) * (size_t)DG_MAX(numel * count * c->size, 1));
        dg_comm_req req = {0};
        st = c->ops->all_gather(c, cur, next, numel * count, DG_F32, &req, err);
        if (st == DG_OK) st = c->ops->wait(c, &req, err);
        dg_free(own);
        cur = own = next;
        count *= c->size;
    }
    int coord[DG_AXIS_COUNT];
    memcpy(coord, e->coord, sizeof coord);
    /* slice s came from coordinate (s / stride_i) % size_i on axis i, the
     * first axis gathered varying fastest */
    for (int64_t s = 0; st == DG_OK && s < count; s++) {
        int64_t stride = 1;
        for (int i = 0; i < na; i++) {
            int size = axis_comm(r, ax[i])->size;
            coord[ax[i]] = (int)(s / stride % size);
            stride *= size;
        }
        dg_shard_copy(p, e->mesh, coord, full, cur + s * numel, sizeof(float), true);
    }
    dg_free(own);
    return st;
}

static int table(const dg_ckpt_run *r, const dg_dist *d, const int *params, int n_params,
                 void *const *ptrs, const moments *mo, int gather, dg_ckpt_tensor *t, ep_slices *e,
                 dg_err *err) {
    e->n = 3 * n_params;
    e->full = dg_calloc((size_t)DG_MAX(e->n, 1), sizeof(float *));
    e->local = dg_calloc((size_t)DG_MAX(e->n, 1), sizeof(float *));
    e->param = dg_calloc((size_t)DG_MAX(e->n, 1), sizeof(dg_tensor *));
    e->mesh[DG_AXIS_EP] = r->ep ? r->ep->size : 1;
    e->coord[DG_AXIS_EP] = r->ep ? r->ep->rank : 0;
    e->mesh[DG_AXIS_TP] = r->tp ? r->tp->size : 1;
    e->coord[DG_AXIS_TP] = r->tp ? r->tp->rank : 0;
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
        unsigned axes;
        DG_TRY(split_axes(r, p, d->g, &axes, err));
        int sliced = axes != 0, parts = 1;
        for (int a = 0; a < DG_AXIS_COUNT; a++)
            if (axes & (1u << a)) parts *= axis_comm(r, a)->size;
        for (int j = 0; j < 3; j++, n++) {
            e->local[n] = src[j];
            e->param[n] = p;
            if (!sliced) {
                DG_TRY(dg_ckpt_tensor_from(&t[n], prefix[j], p, src[j], err));
                continue;
            }
            int64_t global[DG_MAX_DIMS];
            dg_shard_global_shape(p, e->mesh, global);
            e->full[n] = dg_aligned_alloc(sizeof(float) * (size_t)DG_MAX(dg_tensor_numel(p) * parts, 1));
            DG_TRY(dg_ckpt_tensor_from(&t[n], prefix[j], p, e->full[n], err));
            memcpy(t[n].shape, global, sizeof(int64_t) * (size_t)p->ndim);
            if (gather) DG_TRY(gather_axes(r, e, axes, p, src[j], e->full[n], err));
        }
    }
    return DG_OK;
}

/* After a load: this rank's slice of the global expert tensors. */
static void scatter_ep(const ep_slices *e) {
    for (int i = 0; i < e->n; i++)
        if (e->full[i]) dg_shard_copy(e->param[i], e->mesh, e->coord, e->full[i], e->local[i], sizeof(float), false);
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
        st = dg_model_to_record(&c->model, &meta.config, err);
        if (st == DG_OK) st = dg_ckpt_save(c->save, &meta, t, 3 * n_params, &o, err);
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
    dg_ckpt_expect same_arch = dg_model_expect(&c->model);
    if (st == DG_OK) st = dg_ckpt_load(c->load, DG_CKPT_LATEST, &same_arch, &meta, t, 3 * n_params, err);
    if (st == DG_OK) {
        scatter_ep(&e);
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
    int mesh[DG_AXIS_COUNT] = {0};
    mesh[DG_AXIS_EP] = r->ep ? r->ep->size : 1;
    mesh[DG_AXIS_TP] = r->tp ? r->tp->size : 1;
    /* a generous manifest entry per tensor, and the JSON around them */
    uint64_t bytes = 65536;
    for (int i = 0; i < n_params; i++) {
        const dg_tensor *p = &d->g->tensors[params[i]];
        int64_t global[DG_MAX_DIMS];
        dg_shard_global_shape(p, mesh, global);
        uint64_t b = dg_dtype_size(p->dtype);
        for (int k = 0; k < p->ndim; k++) b *= (uint64_t)global[k];
        bytes += 3 * (b + 64 + 1024); /* the parameter and its two moments, 64-byte aligned */
    }
    return bytes;
}
