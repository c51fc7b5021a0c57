/* dg_dist_ckpt.c — see dg_dist_ckpt.h. */
#include "dg_dist_ckpt.h"

#include <string.h>
#include <unistd.h>

#include "dg_ckpt_async.h"
#include "dg_ckpt_pieces.h"
#include "dg_feed.h"
#include "dg_layout.h"
#include "dg_model_record.h"
#include "dg_tokenizer.h"

#define FINISH_TIMEOUT_S 600.0 /* rank 0 waits this long for the other ranks' files */

/* The axes a parameter may be split over in a checkpoint's eyes (ep, tp),
 * with this rank's place on them; other axes do not split parameters. */
typedef struct place {
    int mesh[DG_AXIS_COUNT], coord[DG_AXIS_COUNT];
} place;

static place place_of(const dg_ckpt_run *r) {
    const dg_comm *by_axis[DG_AXIS_COUNT] = {0}; /* the run's groups over the axes that split parameters */
    by_axis[DG_AXIS_EP] = r->ep;
    by_axis[DG_AXIS_TP] = r->tp;
    place p;
    for (int a = 0; a < DG_AXIS_COUNT; a++) {
        p.mesh[a] = by_axis[a] ? by_axis[a]->size : 1;
        p.coord[a] = by_axis[a] ? by_axis[a]->rank : 0;
    }
    return p;
}

/* DG_EINTERNAL when p is split over an axis other than ep and tp that has
 * more than one rank (no such parameter layout exists yet). */
static int check_axes(const dg_tensor *p, const dg_graph *g, dg_err *err) {
    for (int d = 0; d < p->ndim; d++)
        for (int k = 0; k < 2; k++) {
            int a = k ? p->sharding.split2[d] : p->sharding.split[d];
            if (a != DG_AXIS_NONE && a != DG_AXIS_EP && a != DG_AXIS_TP && dg_mesh_size(g, (dg_axis)a) > 1)
                return dg_err_set(err, DG_EINTERNAL, "checkpoint: parameter '%s' is split over %s, which "
                                  "checkpoints do not place yet", p->name, dg_axis_name((dg_axis)a));
        }
    return DG_OK;
}

/* Where parameter id sits in the buckets: bucket *b, element offset *off. */
static int find_bucket(const dg_dist *d, int id, int *b, int64_t *off, dg_err *err) {
    for (int i = 0; i < d->n; i++)
        for (int k = 0; k < d->layout->b[i].n_params; k++)
            if (d->layout->b[i].params[k] == id) {
                *b = i;
                *off = d->layout->b[i].offset[k];
                return DG_OK;
            }
    return dg_err_set(err, DG_EINTERNAL, "checkpoint: parameter '%s' is in no bucket", d->g->tensors[id].name);
}

/* What this rank holds, as pieces: each parameter (its local slice; none
 * of those skip marks, when skip is not NULL), then,
 * with `optim`, AdamW's moments over the elements of it this rank owns:
 * all of them, or its distributed-optimizer shard. Moments live in m[b] /
 * v[b] indexed from the bucket's owned start (mo_whole: indexed from the
 * bucket's element 0, the load's whole-bucket scratch). */
static int build(const dg_ckpt_run *r, const dg_dist *d, const int *params, int n_params, void *const *ptrs,
                 int optim, float *const *m, float *const *v, int mo_whole, const char *skip, dg_ckpt_pieces *out,
                 dg_err *err) {
    place pl = place_of(r);
    if (r->state) DG_TRY(r->state(r->state_ctx, out, err));
    for (int i = 0; i < n_params; i++) {
        if (skip && skip[params[i]]) continue;
        const dg_tensor *p = &d->g->tensors[params[i]];
        DG_TRY(check_axes(p, d->g, err));
        int64_t numel = dg_tensor_numel(p);
        DG_TRY(dg_ckpt_pieces_add(out, p, "", pl.mesh, pl.coord, 0, numel, ptrs[params[i]], err));
        if (!optim) continue;
        int b = 0;
        int64_t off = 0;
        DG_TRY(find_bucket(d, params[i], &b, &off, err));
        int64_t lo = DG_MAX(off, d->b[b].lo), hi = DG_MIN(off + numel, d->b[b].hi);
        if (lo >= hi) continue; /* another DP rank owns this parameter's moments */
        int64_t at = mo_whole ? lo : lo - d->b[b].lo;
        DG_TRY(dg_ckpt_pieces_add(out, p, "optimizer.exp_avg.", pl.mesh, pl.coord, lo - off, hi - off, m[b] + at, err));
        DG_TRY(dg_ckpt_pieces_add(out, p, "optimizer.exp_avg_sq.", pl.mesh, pl.coord, lo - off, hi - off, v[b] + at,
                                  err));
    }
    return DG_OK;
}

/* Every rank's keys, on every rank: keys[r * *stride + i]. */
static int exchange(dg_comm *world, const dg_ckpt_pieces *l, int *n_keys, dg_ckpt_key **keys, int *stride,
                    dg_err *err) {
    int size = world ? world->size : 1;
    int64_t mine = l->n, *counts = dg_calloc((size_t)size, sizeof *counts);
    int st = DG_OK;
    dg_comm_req req = {0};
    if (world) {
        st = world->ops->all_gather(world, &mine, counts, 1, DG_I64, &req, err);
        if (st == DG_OK) st = world->ops->wait(world, &req, err);
    } else {
        counts[0] = mine;
    }
    int64_t max = 1;
    for (int i = 0; i < size; i++) {
        max = DG_MAX(max, counts[i]);
        n_keys[i] = (int)counts[i];
    }
    dg_ckpt_key *local = dg_calloc((size_t)max, sizeof *local);
    for (int i = 0; i < l->n; i++) dg_ckpt_key_of(&l->p[i], &local[i]);
    if (world && st == DG_OK) {
        *keys = dg_calloc((size_t)(max * size), sizeof **keys);
        st = world->ops->all_gather(world, local, *keys, max * DG_CKPT_KEY_WORDS, DG_I64, &req, err);
        if (st == DG_OK) st = world->ops->wait(world, &req, err);
        dg_free(local);
    } else {
        *keys = local;
    }
    *stride = (int)max;
    dg_free(counts);
    return st;
}

static void meta_of(const dg_ckpt_run *r, const dg_train_counters *k, dg_ckpt_meta *meta) {
    const dg_train_config *c = r->c;
    dg_ckpt_meta_init(meta);
    meta->iteration = k->iteration;
    meta->consumed_samples = k->consumed;
    meta->consumed_valid_samples = k->consumed_valid;
    meta->optimizer_steps = k->updates;
    meta->skipped_iters = k->skipped;
    meta->nan_iters = k->nans;
    snprintf(meta->tokenizer.type, sizeof meta->tokenizer.type, "%s",
             c->tokenizer_type[0] ? c->tokenizer_type : (c->mock_data ? "NullTokenizer" : "ByteLevelTokenizer"));
    snprintf(meta->tokenizer.vocab_file, sizeof meta->tokenizer.vocab_file, "%s", c->vocab_file);
    snprintf(meta->tokenizer.merge_file, sizeof meta->tokenizer.merge_file, "%s", c->merge_file);
    meta->tokenizer.vocab_size = r->vocab;
    meta->tokenizer.eod = r->eod; /* recorded: NullTokenizer follows Megatron's rule (io/dg_tok_ckpt.h) */
    meta->tokenizer.eod_recorded = 1;
    snprintf(meta->tokenizer.model_file, sizeof meta->tokenizer.model_file, "%s", c->tokenizer_model);
    snprintf(meta->data.path, sizeof meta->data.path, "%s", c->data_path);
    snprintf(meta->data.split, sizeof meta->data.split, "%s", c->split);
    if (!c->data_path[0] && !c->mock_data) {
        /* each split its own path: --split is not read */
        dg_feed_split_paths_describe(c, meta->data.path, sizeof meta->data.path);
        if (meta->data.path[0]) meta->data.split[0] = 0;
    }
    meta->data.mock = c->mock_data;
    meta->data.seed = c->seed;
}

static int agree(const dg_ckpt_run *r, int st, dg_err *err) { return dg_dist_agree(r->world, st, err); }

int dg_dist_ckpt_wait(const dg_ckpt_run *r, dg_err *err) {
    int64_t it;
    return agree(r, r->async ? dg_ckpt_async_wait(r->async, &it, err) : DG_OK, err);
}

int dg_dist_ckpt_save(const dg_ckpt_run *r, const dg_dist *d, const int *params, int n_params,
                      void *const *ptrs, const dg_train_counters *k, dg_err *err) {
    const dg_train_config *c = r->c;
    DG_TRY(dg_dist_ckpt_wait(r, err)); /* one save at a time */
    int rank = r->world ? r->world->rank : 0, size = r->world ? r->world->size : 1;
    float **m = dg_calloc((size_t)DG_MAX(d->n, 1), sizeof *m), **v = dg_calloc((size_t)DG_MAX(d->n, 1), sizeof *v);
    for (int i = 0; i < d->n; i++) {
        m[i] = d->b[i].m;
        v[i] = d->b[i].v;
    }
    dg_ckpt_pieces l = {0};
    int st = build(r, d, params, n_params, ptrs, 1, m, v, 0, r->skip, &l, err);
    dg_free(m);
    dg_free(v);
    int *n_keys = dg_calloc((size_t)size, sizeof *n_keys), stride = 0;
    dg_ckpt_key *keys = NULL;
    dg_ckpt_plan plan = {0};
    /* the exchange is collective: every rank reaches it, even after a local error */
    int st2 = exchange(r->world, &l, n_keys, &keys, &stride, err);
    if (st == DG_OK) st = st2;
    if (st == DG_OK) st = dg_ckpt_plan_make(size, n_keys, keys, stride, &plan, err);
    dg_free(keys);
    dg_free(n_keys);
    /* rank 0 makes the temporary directory, named by its pid */
    int64_t pid = (int64_t)getpid(), *pids = dg_calloc((size_t)size, sizeof *pids);
    pids[0] = pid;
    dg_comm_req req = {0};
    if (r->world) {
        st2 = r->world->ops->all_gather(r->world, &pid, pids, 1, DG_I64, &req, err);
        if (st2 == DG_OK) st2 = r->world->ops->wait(r->world, &req, err);
        if (st == DG_OK) st = st2;
    }
    long pid0 = (long)pids[0];
    dg_free(pids);
    dg_ckpt_meta meta;
    meta_of(r, k, &meta);
    if (st == DG_OK) st = dg_model_to_record(&c->model, &meta.config, err);
    if (st == DG_OK && rank == 0) st = dg_ckpt_begin(c->save, k->iteration, pid0, err);
    st = agree(r, st, err);
    dg_ckpt_save_opts o = {c->keep_last, r->at, r->at_ctx, 0};
    if (st == DG_OK && r->async) {
        st = agree(r, dg_ckpt_async_start(r->async, c->save, pid0, &meta, &plan, rank, l.p, FINISH_TIMEOUT_S, &o, err),
                   err);
    } else if (st == DG_OK) {
        st = agree(r, dg_ckpt_write_rank(c->save, k->iteration, pid0, &plan, rank, l.p, &o, err), err);
        if (st == DG_OK && rank == 0) st = dg_ckpt_finish(c->save, pid0, &meta, &plan, FINISH_TIMEOUT_S, &o, err);
        else if (rank == 0) dg_ckpt_abort(c->save, k->iteration, pid0);
        st = agree(r, st, err);
    }
    dg_ckpt_plan_free(&plan);
    dg_ckpt_pieces_free(&l);
    return st;
}

/* A NullTokenizer checkpoint of the older rule (no "eod" recorded: its
 * --vocab-size N was N ids, io/dg_tok_ckpt.h) whose padded vocabulary is
 * not this run's: refused as the architecture check would, saying which
 * --vocab-size gives its ids under Megatron's rule. */
static int check_older_null(const dg_ckpt_manifest *man, const dg_train_config *c, dg_err *err) {
    const dg_ckpt_meta *m = &man->meta;
    const double *v = dg_ckpt_config_get(&m->config, "vocab_size");
    if (m->tokenizer.eod_recorded || strcmp(m->tokenizer.type, DG_TOK_NULL_NAME) || !dg_feed_null_tokenizer(c) ||
        !v || *v == c->model.vocab_size || m->tokenizer.vocab_size < 2)
        return DG_OK;
    return dg_err_set(err, DG_EINPUT,
                      "%s: the checkpoint's model has vocab_size = %g, this run has %d: it was saved when --vocab-size "
                      "N meant N ids (now N + 1 with the end of document, as Megatron); --vocab-size %lld gives its "
                      "%lld ids",
                      man->path, *v, c->model.vocab_size, (long long)m->tokenizer.vocab_size - 1,
                      (long long)m->tokenizer.vocab_size);
}

int dg_dist_ckpt_load(const dg_ckpt_run *r, dg_dist *d, const int *params, int n_params,
                      void *const *ptrs, dg_train_counters *k, dg_err *err) {
    const dg_train_config *c = r->c;
    int optim = !c->no_load_optim && !c->finetune;
    /* Moments go into whole-bucket scratch, then dg_dist_set_state keeps
     * the owned range and refreshes the master weights from the parameters. */
    float **m = dg_calloc((size_t)DG_MAX(d->n, 1), sizeof *m), **v = dg_calloc((size_t)DG_MAX(d->n, 1), sizeof *v);
    for (int i = 0; i < d->n; i++) {
        size_t bytes = sizeof(float) * (size_t)DG_MAX(d->layout->b[i].padded, 1);
        m[i] = dg_aligned_alloc(bytes);
        v[i] = dg_aligned_alloc(bytes);
        memset(m[i], 0, bytes);
        memset(v[i], 0, bytes);
    }
    dg_ckpt_pieces l = {0};
    dg_ckpt_manifest man = {0};
    int st = build(r, d, params, n_params, ptrs, optim, m, v, 1, NULL, &l, err);
    dg_ckpt_expect same_arch = dg_model_expect(&c->model);
    if (st == DG_OK) st = dg_ckpt_read_manifest(c->load, DG_CKPT_LATEST, &man, err);
    if (st == DG_OK) st = check_older_null(&man, c, err);
    if (st == DG_OK) st = same_arch.check(&man.meta.config, same_arch.ctx, man.path, err);
    /* Read straight into the parameters: the loader checks names, shapes
     * and coverage before it reads a byte, so a bad checkpoint leaves them be. */
    if (st == DG_OK) st = dg_ckpt_load_pieces(&man, l.p, l.n, err);
    if (st == DG_OK) {
        for (int i = 0; i < d->n; i++) dg_dist_set_state(d, i, m[i], v[i], ptrs);
        const dg_ckpt_meta *meta = &man.meta;
        *k = (dg_train_counters){meta->iteration, meta->consumed_samples, meta->consumed_valid_samples,
                                 meta->optimizer_steps, meta->skipped_iters, meta->nan_iters};
        if (c->finetune) *k = (dg_train_counters){0}; /* Megatron's --finetune: parameters only, from iteration 0 */
    }
    for (int i = 0; i < d->n; i++) {
        dg_free(m[i]);
        dg_free(v[i]);
    }
    dg_free(m);
    dg_free(v);
    dg_ckpt_manifest_free(&man);
    dg_ckpt_pieces_free(&l);
    return st;
}

uint64_t dg_dist_ckpt_bytes(const dg_graph *model) {
    /* a generous manifest entry per tensor, and the JSON around them */
    uint64_t bytes = 65536;
    for (int i = 0; i < model->n_tensors; i++) {
        const dg_tensor *p = &model->tensors[i];
        if (p->role != DG_ROLE_PARAMETER) continue;
        uint64_t b = dg_dtype_size(p->dtype) * (uint64_t)dg_tensor_numel(p);
        bytes += 3 * (b + 64 + 1024); /* the parameter and its two moments, 64-byte aligned */
    }
    return bytes;
}
