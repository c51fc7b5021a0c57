/* dg_dist.c — see dg_dist.h. */
#include "dg_dist.h"

#include <math.h>
#include <string.h>

#include "dg_cpu_adamw.h"
#include "dg_cpu_elementwise.h"

/* ---- the pack op --------------------------------------------------------------- */

static int infer_pack(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    int64_t total = 0;
    for (int i = 0; i < n->n_in; i++) {
        const dg_tensor *t = dg_Tc(g, n->in[i]);
        if (t->dtype != DG_F32) return dg_err_set(err, DG_EINPUT, "input %d is %s, expected f32", i, dg_dtype_name(t->dtype));
        total += dg_tensor_numel(t);
    }
    if (n->attrs.i[0] < total || n->attrs.i[0] < 1)
        return dg_err_set(err, DG_EINPUT, "padded length %lld is less than the inputs' %lld elements",
                          (long long)n->attrs.i[0], (long long)total);
    dg_desc_set(o, DG_F32, 1, (int64_t[]){n->attrs.i[0]});
    return DG_OK;
}

static void cost_pack(const dg_graph *g, const dg_node *n, dg_cost *c) {
    c->flops = 0;
    c->bytes = 2.0 * (double)n->attrs.i[0] * sizeof(float);
    (void)g;
}

static int k_pack(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                  void *const *out) {
    (void)e;
    char *dst = out[0];
    size_t off = 0;
    for (int i = 0; i < n->n_in; i++) {
        size_t b = dg_tensor_bytes(dg_Tc(g, n->in[i]));
        memcpy(dst + off, in[i], b);
        off += b;
    }
    memset(dst + off, 0, (size_t)n->attrs.i[0] * sizeof(float) - off);
    return DG_OK;
}

static const dg_op_def dg_op_dp_pack = {
    .name = "dp_pack", .min_inputs = 1, .max_inputs = DG_MAX_INPUTS, .n_outputs = 1,
    .iattr_names = {"padded", NULL}, .stream = DG_STREAM_COMPUTE, .comm = DG_COMM_NONE,
    .infer = infer_pack, .cost = cost_pack, .kernel = {k_pack},
};

const dg_op_def *dg_dist_pack_op(void) { return &dg_op_dp_pack; }

/* ---- the unpack op: one parameter's slice of a gathered bucket ------------------- */

static int infer_unpack(const dg_graph *g, const dg_node *n, dg_tensor_desc *o, dg_err *err) {
    int ndim = (int)n->attrs.i[1];
    if (ndim < 0 || ndim > DG_MAX_DIMS) return dg_err_set(err, DG_EINPUT, "ndim %d", ndim);
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++) numel *= n->attrs.i[2 + d];
    const dg_tensor *x = dg_Tc(g, n->in[0]);
    if (x->dtype != DG_F32 || n->attrs.i[0] < 0 || n->attrs.i[0] + numel > dg_tensor_numel(x))
        return dg_err_set(err, DG_EINPUT, "slice [%lld, %lld) is outside the f32 bucket of %lld",
                          (long long)n->attrs.i[0], (long long)(n->attrs.i[0] + numel),
                          (long long)dg_tensor_numel(x));
    dg_desc_set(o, DG_F32, ndim, &n->attrs.i[2]);
    return DG_OK;
}

static void cost_unpack(const dg_graph *g, const dg_node *n, dg_cost *c) {
    c->flops = 0;
    c->bytes = 2.0 * (double)dg_tensor_bytes(dg_Tc(g, n->out[0]));
}

static int k_unpack(const dg_exec_env *e, const dg_graph *g, const dg_node *n, void *const *in,
                    void *const *out) {
    (void)e;
    memcpy(out[0], (const float *)in[0] + n->attrs.i[0], dg_tensor_bytes(dg_Tc(g, n->out[0])));
    return DG_OK;
}

static const dg_op_def dg_op_dp_unpack = {
    .name = "dp_unpack", .min_inputs = 1, .max_inputs = 1, .n_outputs = 1,
    .iattr_names = {"offset", "ndim", "d0", "d1", "d2", "d3", NULL}, .stream = DG_STREAM_COMPUTE,
    .comm = DG_COMM_NONE, .infer = infer_unpack, .cost = cost_unpack, .kernel = {k_unpack},
};

const dg_op_def *dg_dist_unpack_op(void) { return &dg_op_dp_unpack; }

/* ---- state ----------------------------------------------------------------------- */

static void load_master(dg_dist *d, int i, void *const *ptrs);

void dg_dist_init(dg_dist *d, const dg_graph *g, const dg_dp_buckets *layout, int distributed,
                  dg_comm *const groups[DG_AXIS_COUNT], dg_comm *data_comm, void *const *ptrs) {
    memset(d, 0, sizeof *d);
    d->g = g;
    d->layout = layout;
    d->n = layout->n;
    d->distributed = distributed;
    d->b = dg_calloc((size_t)DG_MAX(d->n, 1), sizeof *d->b);
    d->norm_comm = groups ? groups[DG_AXIS_DP] : NULL;
    d->ep_comm = groups ? groups[DG_AXIS_EP] : NULL;
    d->data_comm = data_comm;
    for (int i = 0; i < d->n; i++) {
        const dg_dp_bucket *lb = &layout->b[i];
        dg_dist_bucket *b = &d->b[i];
        b->comm = groups ? groups[lb->axis] : NULL;
        int r = distributed && b->comm ? b->comm->rank : 0;
        b->lo = distributed ? r * lb->shard : 0;
        b->hi = distributed ? b->lo + lb->shard : lb->numel;
        size_t bytes = sizeof(float) * (size_t)DG_MAX(b->hi - b->lo, 1);
        b->acc = dg_aligned_alloc(bytes);
        /* With the gather in the graph, the master weights live in the
         * runtime's buffer of the bucket's master-shard tensor. */
        b->own_master = lb->master < 0;
        b->master = b->own_master ? dg_aligned_alloc(bytes) : ptrs[lb->master];
        b->m = dg_aligned_alloc(bytes);
        b->v = dg_aligned_alloc(bytes);
        if (distributed) b->gather = dg_aligned_alloc(sizeof(float) * (size_t)lb->padded);
        load_master(d, i, ptrs); /* master weights: the owned slice of the parameters */
    }
}

void dg_dist_free(dg_dist *d) {
    for (int i = 0; i < d->n; i++) {
        dg_free(d->b[i].acc);
        if (d->b[i].own_master) dg_free(d->b[i].master);
        dg_free(d->b[i].m);
        dg_free(d->b[i].v);
        dg_free(d->b[i].gather);
    }
    dg_free(d->b);
    memset(d, 0, sizeof *d);
}

size_t dg_dist_state_bytes(const dg_dist *d) {
    size_t n = 0;
    for (int i = 0; i < d->n; i++) n += (size_t)(d->b[i].hi - d->b[i].lo);
    return 3 * sizeof(float) * n;
}

void dg_dist_zero(dg_dist *d) {
    for (int i = 0; i < d->n; i++)
        memset(d->b[i].acc, 0, sizeof(float) * (size_t)(d->b[i].hi - d->b[i].lo));
}

void dg_dist_accumulate(dg_dist *d, const dg_team *team, void *const *ptrs) {
    for (int i = 0; i < d->n; i++) {
        const dg_dp_bucket *lb = &d->layout->b[i];
        dg_dist_bucket *b = &d->b[i];
        if (lb->reduced >= 0) {
            dg_cpu_add(team, b->acc, ptrs[lb->reduced], b->acc, b->hi - b->lo);
            continue;
        }
        /* layout only (a world of one): the gradients themselves */
        for (int k = 0; k < lb->n_params; k++) {
            const dg_tensor *p = &d->g->tensors[lb->params[k]];
            float *a = b->acc + lb->offset[k];
            dg_cpu_add(team, a, ptrs[p->grad], a, dg_tensor_numel(p));
        }
    }
}

void dg_dist_scale(dg_dist *d, const dg_team *team, float s) {
    for (int i = 0; i < d->n; i++) dg_cpu_scale(team, d->b[i].acc, s, d->b[i].acc, d->b[i].hi - d->b[i].lo);
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

/* Who says what, once the outcomes are known: a failing rank reports its
 * own message unless a lower rank failed with the same one; the rank is
 * named unless every rank failed with that same message (bad input all
 * ranks see, which rank 0 then reports alone). */
static void agree_report(const outcome *all, int size, int me, dg_err *err) {
    int same = 1;
    for (int r = 1; r < size && same; r++) same = all[r].st != DG_OK && !strcmp(all[r].msg, all[0].msg);
    const outcome *o = &all[me];
    int dup = 0;
    for (int r = 0; r < me && !dup; r++) dup = all[r].st != DG_OK && !strcmp(all[r].msg, o->msg);
    if (o->st == DG_OK || dup) err->msg[0] = 0;
    else if (same) snprintf(err->msg, sizeof err->msg, "%s", o->msg);
    else snprintf(err->msg, sizeof err->msg, "rank %d: %.*s", me, DG_ERR_LEN - 16, o->msg);
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

int dg_dist_grad_norm(dg_dist *d, double *norm, dg_err *err) {
    /* ss[0]: dense elements, ss[1]: expert elements, both over owned ranges.
     * Distributed: every element is owned once in the DP x CP group (expert
     * buckets are sharded over EDP, and DP x CP holds every EP group's whole
     * EDP group). Otherwise dense gradients are whole on every rank and
     * expert ones differ across the EP group only. */
    double ss[2] = {0, 0};
    for (int i = 0; i < d->n; i++) {
        const dg_dist_bucket *b = &d->b[i];
        double s = 0;
        for (int64_t k = 0; k < b->hi - b->lo; k++) s += (double)b->acc[k] * b->acc[k];
        ss[d->layout->b[i].axis == DG_AXIS_EDP] += s;
    }
    if (d->distributed) {
        double t = ss[0] + ss[1];
        DG_TRY(dg_dist_sum(d->norm_comm, &t, 1, err));
        *norm = sqrt(t);
    } else {
        DG_TRY(dg_dist_sum(d->ep_comm, &ss[1], 1, err));
        *norm = sqrt(ss[0] + ss[1]);
    }
    return DG_OK;
}

/* Megatron's param groups: no weight decay for biases and 1-D parameters. */
static double decay_of(const dg_tensor *p, double wd) {
    return (p->ndim == 1 || strstr(p->name, ".bias")) ? 0.0 : wd;
}

int dg_dist_step(dg_dist *d, const dg_team *team, const dg_dist_hparams *h, void *const *ptrs,
                 dg_err *err) {
    for (int i = 0; i < d->n; i++) {
        const dg_dp_bucket *lb = &d->layout->b[i];
        dg_dist_bucket *b = &d->b[i];
        int64_t n = b->hi - b->lo;
        if (h->clip < 1.0) dg_cpu_scale(team, b->acc, (float)h->clip, b->acc, n);
        /* AdamW on each parameter's owned slice, with its own weight decay. */
        for (int k = 0; k < lb->n_params; k++) {
            const dg_tensor *p = &d->g->tensors[lb->params[k]];
            int64_t p0 = lb->offset[k], p1 = p0 + dg_tensor_numel(p);
            int64_t a = DG_MAX(p0, b->lo), z = DG_MIN(p1, b->hi);
            if (a >= z) continue;
            dg_adamw_hparams ah = {h->lr, h->beta1, h->beta2, h->eps, decay_of(p, h->weight_decay), h->step};
            int64_t o = a - b->lo;
            dg_cpu_adamw(team, &ah, b->master + o, b->acc + o, b->m + o, b->v + o, b->master + o,
                         b->m + o, b->v + o, z - a);
        }
        /* The updated parameters: this rank's slice, or all of it gathered;
         * or nothing here when the next step's graph gathers them. */
        if (lb->gathered >= 0) continue;
        const float *full = b->master;
        int64_t base = b->lo;
        if (d->distributed && b->comm && b->comm->size > 1) {
            dg_comm_req req = {0};
            DG_TRY(b->comm->ops->all_gather(b->comm, b->master, b->gather, n, DG_F32, &req, err));
            DG_TRY(b->comm->ops->wait(b->comm, &req, err));
            full = b->gather;
            base = 0;
        }
        for (int k = 0; k < lb->n_params; k++) {
            int64_t p0 = lb->offset[k], cnt = dg_tensor_numel(&d->g->tensors[lb->params[k]]);
            if (full == b->master && (p0 < b->lo || p0 + cnt > b->hi)) continue; /* not all here */
            memcpy(ptrs[lb->params[k]], full + (p0 - base), sizeof(float) * (size_t)cnt);
        }
    }
    return DG_OK;
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
    memset(b->master, 0, sizeof(float) * (size_t)(b->hi - b->lo));
    for (int k = 0; k < lb->n_params; k++) {
        int64_t p0 = lb->offset[k], p1 = p0 + dg_tensor_numel(&d->g->tensors[lb->params[k]]);
        int64_t a = DG_MAX(p0, b->lo), z = DG_MIN(p1, b->hi);
        if (a < z)
            memcpy(b->master + (a - b->lo), (const float *)ptrs[lb->params[k]] + (a - p0),
                   sizeof(float) * (size_t)(z - a));
    }
}

int dg_dist_gather_moments(dg_dist *d, int i, float *m, float *v, dg_err *err) {
    dg_dist_bucket *b = &d->b[i];
    int64_t n = b->hi - b->lo;
    if (!(d->distributed && b->comm && b->comm->size > 1)) {
        memcpy(m + b->lo, b->m, sizeof(float) * (size_t)n);
        memcpy(v + b->lo, b->v, sizeof(float) * (size_t)n);
        return DG_OK;
    }
    dg_comm_req req = {0};
    DG_TRY(b->comm->ops->all_gather(b->comm, b->m, m, n, DG_F32, &req, err));
    DG_TRY(b->comm->ops->wait(b->comm, &req, err));
    DG_TRY(b->comm->ops->all_gather(b->comm, b->v, v, n, DG_F32, &req, err));
    return b->comm->ops->wait(b->comm, &req, err);
}

void dg_dist_set_state(dg_dist *d, int i, const float *m, const float *v, void *const *ptrs) {
    dg_dist_bucket *b = &d->b[i];
    size_t bytes = sizeof(float) * (size_t)(b->hi - b->lo);
    memcpy(b->m, m + b->lo, bytes);
    memcpy(b->v, v + b->lo, bytes);
    load_master(d, i, ptrs);
}
