/* dg_pipeline.c — see dg_pipeline.h. */
#include "dg_pipeline.h"

#include <string.h>

#include "dg_pass_mb_order.h"
#include "dg_pass_pp_sched.h"
#include "dg_reemit.h"
#include "dg_verify.h"

static int stage_index(const char *name);

int dg_stage_parse(const char *name, dg_stage *out, dg_err *err) {
    int s = stage_index(name);
    if (s >= 0) {
        *out = (dg_stage)s;
        return DG_OK;
    }
    char list[256] = "";
    for (int i = 0; i < DG_STAGE_COUNT; i++) {
        size_t n = strlen(list);
        snprintf(list + n, sizeof list - n, "%s%s", i ? (i == DG_STAGE_COUNT - 1 ? " or " : ", ") : "",
                 dg_stage_name((dg_stage)i));
    }
    return dg_err_set(err, DG_EINPUT, "--after: expected %s (sp names the tp stage), got '%s'", list, name);
}

int dg_pipeline_map(const dg_pipeline_result *r, int mb, int t) {
    if (mb < 0 || mb >= r->n_microbatches || t < 0 || t >= r->n_logical) return -1;
    return r->tmap[(size_t)mb * (size_t)r->n_logical + (size_t)t];
}

/* Compose the current map with one more pass's map (old id -> new id). */
static void compose(dg_pipeline_result *r, const int *next) {
    for (size_t i = 0; i < (size_t)r->n_microbatches * (size_t)r->n_logical; i++)
        if (r->tmap[i] >= 0) r->tmap[i] = next[r->tmap[i]];
}

/* Each parameter's gradient in the step: the per-micro-batch gradients
 * added in micro-batch order, each add stamped with the later micro-batch
 * so it runs as soon as that one's gradient exists. */
static int accumulate(dg_graph *step, const dg_graph *mbg, const int *maps, int n_mb,
                      const dg_pipeline_opts *o, dg_err *err) {
    dg_graph_set_phase(step, DG_PHASE_BACKWARD);
    for (int t = 0; t < mbg->n_tensors; t++) {
        const dg_tensor *p = &mbg->tensors[t];
        if (p->role != DG_ROLE_PARAMETER || p->grad < 0) continue;
        int sp = maps[t], acc = maps[p->grad];
        dg_graph_set_layer(step, p->layer);
        for (int mb = 1; mb < n_mb && acc >= 0; mb++) {
            dg_graph_set_microbatch(step, mb);
            int in[2] = {acc, maps[(size_t)mb * (size_t)mbg->n_tensors + (size_t)p->grad]};
            acc = dg_graph_add(step, o->autodiff->add, NULL, in, 2, NULL, NULL);
        }
        if (acc < 0) return dg_err_set(err, DG_EINTERNAL, "microbatches: %s", step->err.msg);
        dg_tensor *gt = &step->tensors[acc];
        gt->role = DG_ROLE_GRADIENT;
        gt->layer = p->layer;
        snprintf(gt->name, sizeof gt->name, "grad/%.*s", DG_NAME_LEN - 6, p->name);
        step->tensors[sp].grad = acc;
    }
    dg_graph_set_microbatch(step, -1);
    dg_graph_set_layer(step, -1);
    dg_graph_set_phase(step, DG_PHASE_FORWARD);
    return DG_OK;
}

/* microbatches: instantiate the micro-batch graph n times into a new graph. */
static int instantiate(dg_pipeline_result *r, const dg_pipeline_opts *o, dg_err *err) {
    const dg_graph *mbg = r->g;
    int n = o->n_microbatches;
    dg_graph *step = dg_graph_new(o->step_name ? o->step_name : "step");
    memcpy(step->mesh, mbg->mesh, sizeof step->mesh);
    dg_graph_set_stage(step, mbg->cur_stage); /* PP: the nodes the step adds are this stage's */
    int *maps = dg_malloc(sizeof(int) * (size_t)n * (size_t)DG_MAX(mbg->n_tensors, 1));
    int st = DG_OK;
    /* the step's weights (the forward's 16-bit working copies) are made by
     * the first micro-batch and shared by the others */
    bool *weight = dg_malloc(sizeof(bool) * (size_t)DG_MAX(mbg->n_tensors, 1));
    int *shared = dg_malloc(sizeof(int) * (size_t)DG_MAX(mbg->n_tensors, 1));
    dg_graph_weights(mbg, weight);
    for (int mb = 0; mb < n && st == DG_OK; mb++) {
        dg_reemit_opts ro = dg_reemit_plain();
        ro.microbatch = n > 1 ? mb : -1;
        if (mb > 0) {
            for (int t = 0; t < mbg->n_tensors; t++) {
                const dg_tensor *x = &mbg->tensors[t];
                int fwd = x->producer >= 0 && mbg->nodes[x->producer].phase == DG_PHASE_FORWARD;
                shared[t] = weight[t] && fwd ? maps[t] : -1;
            }
            ro.shared = shared;
        }
        st = dg_reemit(step, mbg, &ro, maps + (size_t)mb * (size_t)mbg->n_tensors, err);
    }
    dg_free(weight);
    dg_free(shared);
    if (st == DG_OK) st = accumulate(step, mbg, maps, n, o, err);
    if (st == DG_OK) {
        /* one row per micro-batch: the single row so far, mapped n ways */
        int *tmap = dg_malloc(sizeof(int) * (size_t)n * (size_t)DG_MAX(r->n_logical, 1));
        for (int mb = 0; mb < n; mb++)
            for (int t = 0; t < r->n_logical; t++) {
                int v = r->tmap[t];
                tmap[(size_t)mb * (size_t)r->n_logical + (size_t)t] =
                    v < 0 ? -1 : maps[(size_t)mb * (size_t)mbg->n_tensors + (size_t)v];
            }
        dg_free(r->tmap);
        r->tmap = tmap;
        r->n_microbatches = n;
        dg_graph_free(r->g);
        r->g = step;
    } else {
        dg_graph_free(step);
    }
    dg_free(maps);
    return st;
}

/* After a pass that re-emitted r->g into out (status st): out replaces it
 * and the map follows. Frees next. Returns st. */
static int adopt(dg_pipeline_result *r, int st, dg_graph *out, int *next) {
    if (st == DG_OK) {
        compose(r, next);
        dg_graph_free(r->g);
        r->g = out;
    }
    dg_free(next);
    return st;
}

/* A map for a pass that re-emits r->g: one int per tensor. */
static int *next_map(const dg_pipeline_result *r) { return dg_malloc(sizeof(int) * (size_t)DG_MAX(r->g->n_tensors, 1)); }

/* ---- the stages, in the order they run ------------------------------------------------- */

/* logical: the caller's graph, verified as it comes */
static int stage_logical(dg_pipeline_result *r, const dg_pipeline_opts *o, dg_err *err) {
    (void)r;
    (void)o;
    (void)err;
    return DG_OK;
}

static bool parallel_tp(const dg_pipeline_opts *o) { return o->tp.tp_size > 1; }
static bool parallel_cp(const dg_pipeline_opts *o) { return o->cp.cp_size > 1; }
static bool parallel_pp(const dg_pipeline_opts *o) { return o->pp.size > 1; }
static bool has_precision(const dg_pipeline_opts *o) { return o->precision != NULL; }
static bool has_recompute(const dg_pipeline_opts *o) { return dg_recompute_any(o->recompute); }
static bool has_dp(const dg_pipeline_opts *o) { return o->dp != NULL; }
static bool has_optimizer(const dg_pipeline_opts *o) { return o->optim != NULL && o->dp != NULL; }

/* tp: with ETP 1 the expert weights' tp placement is dropped first (the EP
 * pass's option: dg_pass_ep_place_experts), so TP leaves them whole. */
static int stage_tp(dg_pipeline_result *r, const dg_pipeline_opts *o, dg_err *err) {
    dg_pass_ep_place_experts(r->g, &o->ep);
    dg_graph *out = NULL;
    int *next = next_map(r);
    int st = dg_pass_tp_run(r->g, &o->tp, &out, next, err);
    return adopt(r, st, out, next); /* out is set by the pass */
}

static int stage_cp(dg_pipeline_result *r, const dg_pipeline_opts *o, dg_err *err) {
    dg_graph *out = NULL;
    int *next = next_map(r);
    int st = dg_pass_cp(r->g, &o->cp, &out, next, err);
    return adopt(r, st, out, next); /* out is set by the pass */
}

/* ep runs at every EP size: at one rank it lowers the experts to the
 * single-rank block. */
static int stage_ep(dg_pipeline_result *r, const dg_pipeline_opts *o, dg_err *err) {
    if (!parallel_tp(o)) dg_pass_ep_place_experts(r->g, &o->ep); /* ETP 1 without the tp stage */
    dg_graph *out = NULL;
    int *next = next_map(r);
    int st = dg_pass_ep(r->g, &o->ep, &out, next, err);
    return adopt(r, st, out, next); /* out is set by the pass */
}

/* dtype, told where the loss is now (fp16 scales its gradient). */
static int stage_dtype(dg_pipeline_result *r, const dg_pipeline_opts *o, dg_err *err) {
    dg_pass_precision_opts po = *o->precision;
    po.loss = dg_pipeline_map(r, 0, o->loss);
    dg_graph *out = NULL;
    int *next = next_map(r);
    int st = dg_pass_precision(r->g, &po, &out, next, err);
    return adopt(r, st, out, next); /* out is set by the pass */
}

static int stage_pp(dg_pipeline_result *r, const dg_pipeline_opts *o, dg_err *err) {
    dg_graph *out = NULL;
    int *next = next_map(r);
    int st = dg_pass_pp(r->g, &o->pp, &out, next, &r->pp, err);
    return adopt(r, st, out, next); /* out is set by the pass */
}

static int stage_autodiff(dg_pipeline_result *r, const dg_pipeline_opts *o, dg_err *err) {
    dg_graph *g = r->g;
    int loss = dg_pipeline_map(r, 0, o->loss);
    if (loss < 0 && o->pp.size > 1) return dg_pass_pp_autodiff(g, &r->pp, -1, o->autodiff, err);
    if (loss < 0) return dg_err_set(err, DG_EINTERNAL, "the loss did not survive the parallel passes");
    if (o->n_microbatches > 1) { /* the step's loss is the micro-batches' mean */
        dg_attrs a;
        memset(&a, 0, sizeof a);
        a.f[0] = 1.0 / o->n_microbatches;
        loss = dg_graph_add(g, o->scale, &a, &loss, 1, NULL, "loss/microbatches");
        if (loss < 0) return dg_err_set(err, g->status, "%s", g->err.msg);
    }
    if (o->pp.size > 1) return dg_pass_pp_autodiff(g, &r->pp, loss, o->autodiff, err);
    return dg_autodiff(g, loss, o->autodiff, NULL, err);
}

static int stage_recompute(dg_pipeline_result *r, const dg_pipeline_opts *o, dg_err *err) {
    dg_graph *out = NULL;
    int *next = next_map(r);
    int st = dg_pass_recompute(r->g, o->recompute, &out, next, &r->recompute, err);
    return adopt(r, st, out, next); /* out is set by the pass */
}

static int stage_microbatches(dg_pipeline_result *r, const dg_pipeline_opts *o, dg_err *err) {
    return instantiate(r, o, err);
}

static int stage_schedule(dg_pipeline_result *r, const dg_pipeline_opts *o, dg_err *err) {
    dg_graph *g = r->g;
    if (o->pp.size <= 1) {
        DG_TRY(o->mb_overlap ? dg_pass_mb_order_overlap(g, NULL, err) : dg_pass_mb_order(g, NULL, err));
        return o->cp.cp_size > 1 ? dg_pass_cp_order(g, err) : DG_OK;
    }
    DG_TRY(dg_pass_pp_schedule(g, &o->pp, o->n_microbatches, NULL, err));
    DG_TRY(dg_pass_pp_tied(g, &r->pp, o->autodiff, err));
    if (o->cp.cp_size > 1) DG_TRY(dg_pass_cp_order(g, err));
    return dg_pass_pp_fence(g, err);
}

static int stage_dp(dg_pipeline_result *r, const dg_pipeline_opts *o, dg_err *err) {
    dg_graph *g = r->g;
    g->mesh[DG_AXIS_DP] = o->dp->dp_size; /* the mesh as the DP pass sees it */
    g->mesh[DG_AXIS_EDP] = o->dp->edp_size;
    /* PP: a tied copy whose gradient the norm counts on another stage */
    return dg_pass_dp_skip(g, o->dp, r->pp.skip, r->pp.n_skip, &r->buckets, err);
}

static int stage_optimizer(dg_pipeline_result *r, const dg_pipeline_opts *o, dg_err *err) {
    dg_optim_opts oo = *o->optim;
    oo.buckets = &r->buckets;
    DG_TRY(dg_pass_optim(r->g, &oo, &r->optim, err));
    return o->pp.size > 1 ? dg_pass_pp_fence(r->g, err) : DG_OK;
}

/* The pipeline: one row per stage, in the order they run (dg_stage's).
 * `in_place` says what the stage does to the graph: a graph -> graph pass
 * re-emits it (dg_reemit.h; the map follows), an in-place one appends
 * nodes and ordering edges to it. A stage whose `when` says no leaves the
 * graph as it is (and still counts as run for --after). */
typedef struct stage_def {
    const char *name;
    const char *alias; /* another name --after takes, or NULL */
    bool in_place;
    bool (*when)(const dg_pipeline_opts *o); /* NULL: always */
    int (*run)(dg_pipeline_result *r, const dg_pipeline_opts *o, dg_err *err);
} stage_def;

static const stage_def stages[DG_STAGE_COUNT] = {
    [DG_STAGE_LOGICAL] = {"logical", NULL, true, NULL, stage_logical},
    /* SP is TP's form (it decides where TP's collectives go), so one pass */
    [DG_STAGE_TP] = {"tp", "sp", false, parallel_tp, stage_tp},
    [DG_STAGE_CP] = {"cp", NULL, false, parallel_cp, stage_cp},
    [DG_STAGE_EP] = {"ep", NULL, false, NULL, stage_ep},
    [DG_STAGE_DTYPE] = {"dtype", NULL, false, has_precision, stage_dtype},
    [DG_STAGE_PP] = {"pp", NULL, false, parallel_pp, stage_pp},
    [DG_STAGE_AUTODIFF] = {"autodiff", NULL, true, NULL, stage_autodiff},
    [DG_STAGE_RECOMPUTE] = {"recompute", NULL, false, has_recompute, stage_recompute},
    [DG_STAGE_MICROBATCHES] = {"microbatches", NULL, false, NULL, stage_microbatches},
    [DG_STAGE_SCHEDULE] = {"schedule", NULL, true, NULL, stage_schedule},
    [DG_STAGE_DP] = {"dp", NULL, true, has_dp, stage_dp},
    [DG_STAGE_OPTIMIZER] = {"optimizer", NULL, true, has_optimizer, stage_optimizer},
};

const char *dg_stage_name(dg_stage s) { return (unsigned)s < DG_STAGE_COUNT ? stages[s].name : "?"; }

bool dg_stage_in_place(dg_stage s) { return (unsigned)s < DG_STAGE_COUNT && stages[s].in_place; }

static int stage_index(const char *name) {
    for (int s = 0; s < DG_STAGE_COUNT; s++)
        if (!strcmp(name, stages[s].name) || (stages[s].alias && !strcmp(name, stages[s].alias))) return s;
    return -1;
}

int dg_pipeline_run(const dg_graph *logical, const dg_pipeline_opts *o, dg_pipeline_result *r,
                    dg_err *err) {
    memset(r, 0, sizeof *r);
    if (o->n_microbatches < 1 || !o->autodiff || !o->scale)
        return dg_err_set(err, DG_EINTERNAL, "pipeline: bad options");
    r->n_logical = logical->n_tensors;
    r->n_microbatches = 1;
    r->tmap = dg_malloc(sizeof(int) * (size_t)DG_MAX(r->n_logical, 1));
    for (int t = 0; t < r->n_logical; t++) r->tmap[t] = t;
    r->g = dg_graph_clone(logical);
    int st = DG_OK;
    for (int s = 0; s <= (int)o->stop_after && s < DG_STAGE_COUNT && st == DG_OK; s++) {
        const stage_def *d = &stages[s];
        r->stage = (dg_stage)s;
        if (d->when && !d->when(o)) continue;
        dg_err e = {{0}};
        st = d->run(r, o, &e);
        if (st != DG_OK) dg_err_set(err, st, "%s: %s", d->name, e.msg);
        else if ((st = dg_verify_after(r->g, d->name, &e)) != DG_OK) dg_err_set(err, st, "%s", e.msg);
    }
    if (st != DG_OK) dg_pipeline_result_free(r);
    return st;
}

void dg_pipeline_result_free(dg_pipeline_result *r) {
    dg_dp_buckets_free(&r->buckets);
    dg_optim_free(&r->optim);
    dg_pp_bounds_free(&r->pp);
    dg_free(r->tmap);
    if (r->g) dg_graph_free(r->g);
    memset(r, 0, sizeof *r);
}
