/* dg_dist.c — see dg_dist.h. */
#include "dg_dist.h"

#include <math.h>
#include <string.h>

#include "dg_op_dp_pack.h"

/* ---- the pack and unpack ops (ops/dg_op_dp_pack.h) ------------------------------ */

const dg_op_def *dg_dist_pack_op(void) { return &dg_op_dp_pack; }

const dg_op_def *dg_dist_unpack_op(void) { return &dg_op_dp_unpack; }

/* ---- state ----------------------------------------------------------------------- */

static void load_master(dg_dist *d, int i, void *const *ptrs);

void dg_dist_init(dg_dist *d, const dg_graph *g, const dg_dp_buckets *layout, const dg_optim *optim,
                  dg_comm *const groups[DG_AXIS_COUNT], void *const *ptrs) {
    memset(d, 0, sizeof *d);
    d->g = g;
    d->layout = layout;
    d->n = layout->n;
    d->distributed = layout->reduce_scatter;
    d->hparams = ptrs[optim->hparams];
    d->status = ptrs[optim->status];
    int32_t *rank = ptrs[optim->group_rank];
    for (int a = 0; a < DG_AXIS_COUNT; a++) rank[a] = groups && groups[a] ? groups[a]->rank : 0;
    dg_dist_set_step(d, 0.0, 1, 0);
    d->b = dg_calloc((size_t)DG_MAX(d->n, 1), sizeof *d->b);
    for (int i = 0; i < d->n; i++) {
        const dg_dp_bucket *lb = &layout->b[i];
        const dg_optim_bucket *ob = &optim->b[i];
        dg_dist_bucket *b = &d->b[i];
        b->comm = groups ? groups[lb->axis] : NULL;
        b->lo = ob->shard_axis != DG_AXIS_NONE ? rank[ob->shard_axis] * lb->shard : 0;
        b->hi = b->lo + lb->shard;
        size_t bytes = sizeof(float) * (size_t)lb->shard;
        b->m = ptrs[ob->exp_avg];
        b->v = ptrs[ob->exp_avg_sq];
        memset(b->m, 0, bytes);
        memset(b->v, 0, bytes);
        b->master = ob->master >= 0 ? ptrs[ob->master] : NULL;
        if (d->distributed) b->gather = dg_aligned_alloc(sizeof(float) * (size_t)lb->padded);
        load_master(d, i, ptrs); /* master weights: the owned slice of the parameters */
    }
}

void dg_dist_free(dg_dist *d) {
    for (int i = 0; i < d->n; i++) dg_free(d->b[i].gather);
    dg_free(d->b);
    memset(d, 0, sizeof *d);
}

size_t dg_dist_state_bytes(const dg_dist *d) {
    size_t n = 0, per = (d->distributed ? 3 : 2) * sizeof(float);
    for (int i = 0; i < d->n; i++) n += (size_t)(d->b[i].hi - d->b[i].lo);
    return per * n;
}

void dg_dist_set_step(dg_dist *d, double lr, int64_t step, int apply) {
    d->hparams[DG_OPTIM_LR] = lr;
    d->hparams[DG_OPTIM_STEP] = (double)step;
    d->hparams[DG_OPTIM_APPLY] = apply;
}

void dg_dist_outcome(const dg_dist *d, double *norm, int *updated) {
    *norm = d->status[DG_OPTIM_NORM];
    *updated = d->status[DG_OPTIM_OK] != 0;
}

int dg_dist_sum(dg_comm *c, double *v, int n, dg_err *err) {
    if (!c || c->size == 1) return DG_OK;
    /* All-gather the raw bytes and add in rank order: every rank gets the
     * same bits, whatever algorithm MPI would pick for a reduction. */
    double *all = dg_malloc(sizeof(double) * (size_t)n * (size_t)c->size);
    dg_comm_req req = {0};
    int st = c->ops->all_gather(c, v, all, (int64_t)(n * sizeof(double)), DG_U8, &req, err);
    if (st == DG_OK) st = c->ops->wait(c, &req, err);
    if (st == DG_OK)
        for (int k = 0; k < n; k++) {
            double s = 0;
            for (int r = 0; r < c->size; r++) s += all[(size_t)r * (size_t)n + (size_t)k];
            v[k] = s;
        }
    dg_free(all);
    return st;
}

typedef struct outcome {
    int32_t st;
    char msg[DG_ERR_LEN];
} outcome;

/* Who says what, once the outcomes are known: the run ends with one line on
 * every rank's behalf, so only the lowest failing rank keeps a message. It is
 * plain when every rank failed with that same message (bad input all ranks
 * see); otherwise it names the rank, and how many other ranks failed with a
 * message of their own (the first failure is the one to fix; the others are
 * often its echo, a stage whose peer stopped). */
static void agree_report(const outcome *all, int size, int me, dg_err *err) {
    int first = -1, same = 1, others = 0;
    for (int r = 0; r < size; r++) {
        if (all[r].st == DG_OK) {
            same = 0;
            continue;
        }
        if (first < 0) first = r;
        else if (strcmp(all[r].msg, all[first].msg)) same = 0, others++;
    }
    if (me != first) err->msg[0] = 0;
    else if (same) snprintf(err->msg, sizeof err->msg, "%s", all[me].msg);
    else if (others == 0) snprintf(err->msg, sizeof err->msg, "rank %d: %.*s", me, DG_ERR_LEN - 16, all[me].msg);
    else
        snprintf(err->msg, sizeof err->msg, "rank %d: %.*s (%d other rank%s failed too)", me, DG_ERR_LEN - 48,
                 all[me].msg, others, others == 1 ? "" : "s");
}

int dg_dist_agree(dg_comm *c, int st, dg_err *err) {
    if (!c || c->size == 1) return st;
    /* The common case costs one small all-reduce: how many ranks failed. */
    int32_t failed = st != DG_OK, total = 0;
    dg_comm_req req = {0};
    dg_err e2 = {{0}};
    int cs = c->ops->all_reduce(c, &failed, &total, 1, DG_I32, &req, &e2);
    if (cs == DG_OK) cs = c->ops->wait(c, &req, &e2);
    if (cs != DG_OK) return dg_err_set(err, DG_EINTERNAL, "%s", e2.msg);
    if (total == 0) return DG_OK;
    outcome mine;
    memset(&mine, 0, sizeof mine);
    mine.st = st;
    if (st != DG_OK && err) memcpy(mine.msg, err->msg, sizeof mine.msg);
    outcome *all = dg_malloc(sizeof *all * (size_t)c->size);
    cs = c->ops->all_gather(c, &mine, all, (int64_t)sizeof mine, DG_U8, &req, &e2);
    if (cs == DG_OK) cs = c->ops->wait(c, &req, &e2);
    if (cs != DG_OK) {
        dg_free(all);
        return dg_err_set(err, DG_EINTERNAL, "%s", e2.msg);
    }
    for (int r = c->size - 1; r >= 0; r--)
        if (all[r].st != DG_OK) st = all[r].st; /* the lowest failing rank's status */
    dg_err local = {{0}};
    agree_report(all, c->size, c->rank, err ? err : &local);
    dg_free(all);
    return st;
}

int dg_dist_sync_params(dg_dist *d, void *const *ptrs, dg_err *err) {
    for (int i = 0; i < d->n; i++) {
        const dg_dp_bucket *lb = &d->layout->b[i];
        dg_dist_bucket *b = &d->b[i];
        if (lb->gathered < 0) continue;
        dg_comm_req req = {0};
        DG_TRY(b->comm->ops->all_gather(b->comm, b->master, b->gather, b->hi - b->lo, DG_F32, &req, err));
        DG_TRY(b->comm->ops->wait(b->comm, &req, err));
        for (int k = 0; k < lb->n_params; k++)
            memcpy(ptrs[lb->params[k]], b->gather + lb->offset[k],
                   dg_tensor_bytes(&d->g->tensors[lb->params[k]]));
    }
    return DG_OK;
}

/* Copy the parameters' owned slice of bucket i into its master weights. */
static void load_master(dg_dist *d, int i, void *const *ptrs) {
    const dg_dp_bucket *lb = &d->layout->b[i];
    dg_dist_bucket *b = &d->b[i];
    if (!b->master) return; /* the parameters are their own master weights */
    memset(b->master, 0, sizeof(float) * (size_t)(b->hi - b->lo));
    for (int k = 0; k < lb->n_params; k++) {
        int64_t p0 = lb->offset[k], p1 = p0 + dg_tensor_numel(&d->g->tensors[lb->params[k]]);
        int64_t a = DG_MAX(p0, b->lo), z = DG_MIN(p1, b->hi);
        if (a < z)
            memcpy(b->master + (a - b->lo), (const float *)ptrs[lb->params[k]] + (a - p0),
                   sizeof(float) * (size_t)(z - a));
    }
}

void dg_dist_set_state(dg_dist *d, int i, const float *m, const float *v, void *const *ptrs) {
    dg_dist_bucket *b = &d->b[i];
    size_t bytes = sizeof(float) * (size_t)(b->hi - b->lo);
    memcpy(b->m, m + b->lo, bytes);
    memcpy(b->v, v + b->lo, bytes);
    load_master(d, i, ptrs);
}
