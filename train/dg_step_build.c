/* dg_step_build.c — one rank's step graph and plan (see the header). */
#include "dg_step_build.h"

#include <string.h>

#include "dg_step_opts.h"

void dg_step_rank_of(const dg_grid_sizes *sz, int pp_stage, dg_step_rank *at) {
    dg_step_groups(sz, at->group, &at->grad_shards);
    at->pp_stage = pp_stage;
}

void dg_step_rank_of_grid(const dg_grid *g, dg_step_rank *at) {
    for (int a = 0; a < DG_AXIS_COUNT; a++) at->group[a] = 1;
    at->grad_shards = 1;
    at->pp_stage = 0;
    if (!g) return;
    dg_comm *groups[DG_AXIS_COUNT];
    dg_grid_runtime_groups(g, groups);
    for (int a = 0; a < DG_AXIS_COUNT; a++) at->group[a] = groups[a] ? groups[a]->size : 1;
    /* CP's loss is already the whole sequence's (dg_pass_cp.h): the DP x CP
     * sum is divided by the data shards only */
    at->grad_shards = g->data_size;
    at->pp_stage = dg_grid_axis_coord(g, DG_AXIS_PP);
}

/* The step's cost model into b (the header's rule): the links' figures
 * where an axis is emulated, else the scheduler's defaults. The config's
 * --emulate-link was checked with the config (dg_train_config_finish), so
 * it parses. */
static void pick_cost_model(const dg_train_config *c, const dg_link_spec *links, dg_step_built *b) {
    dg_link_spec parsed;
    memset(&parsed, 0, sizeof parsed);
    dg_err ignored;
    if (!links && c->emulate_link[0] &&
        dg_link_spec_parse(c->emulate_link, "--emulate-link", &parsed, &ignored) == DG_OK)
        links = &parsed;
    b->has_cost = links && dg_link_spec_any(links);
    if (b->has_cost) dg_link_cost_model(links, &b->cost);
}

/* The logical tensors the loop reads after a step, which recompute must
 * keep and the plan must not reuse: the losses and the routers' counts,
 * those the model has. Returns how many it wrote to keep. */
#define N_KEEP (4 + DG_MODEL_MAX_TRACKED + DG_MODEL_MAX_MTP)
static int logical_keep(const dg_model_io *lio, int keep[N_KEEP]) {
    int wanted[N_KEEP] = {lio->lm_loss, lio->loss, lio->aux_loss, lio->z_loss};
    for (int l = 0; l < DG_MODEL_MAX_TRACKED; l++) wanted[4 + l] = lio->tokens_per_expert[l];
    for (int d = 0; d < DG_MODEL_MAX_MTP; d++) wanted[4 + DG_MODEL_MAX_TRACKED + d] = lio->mtp_loss[d];
    int n = 0;
    for (int i = 0; i < N_KEEP; i++)
        if (wanted[i] >= 0) keep[n++] = wanted[i];
    return n;
}

/* Plan r (a pipeline run of b's logical micro-batch: the step, or a
 * recompute candidate's) with the run's plan options: the step's cost
 * model, and every micro-batch's losses and routers' counts and the
 * optimizer's status (the loop reads them after a step) kept out of memory
 * reuse. NULL (err set) when the planner refuses the graph. */
static dg_sched_plan *plan_of(const dg_step_built *b, const dg_pipeline_result *r, int memory_plan, dg_err *err) {
    int wanted[N_KEEP], n_wanted = logical_keep(&b->lio, wanted);
    int *keep = dg_malloc(sizeof(int) * (size_t)(n_wanted * r->n_microbatches + 1)), n_keep = 0;
    for (int mb = 0; mb < r->n_microbatches; mb++)
        for (int i = 0; i < n_wanted; i++) {
            int t = dg_pipeline_map(r, mb, wanted[i]);
            if (t >= 0) keep[n_keep++] = t;
        }
    if (r->stage >= DG_STAGE_OPTIMIZER && r->optim.status >= 0) keep[n_keep++] = r->optim.status;
    dg_sched_opts so = {.keep = keep, .n_keep = n_keep, .no_memory_plan = !memory_plan,
                        .cost = b->has_cost ? &b->cost : NULL};
    dg_sched_plan *p = dg_sched_plan_new(r->g, &so, err);
    dg_free(keep);
    return p;
}

/* The recompute planner's measure (dg_recompute.h): b's step with o's
 * regions, through the one pipeline up to its schedule stage (the
 * micro-batches' forward and backward: the gradient buckets and the
 * optimizer come later, hold no activations and do not change with
 * recompute), planned as the run plans (plan_of); the arena's planned peak
 * is the activation peak. */
typedef struct measure_ctx {
    const dg_step_built *b;
    const dg_pipeline_opts *po; /* the run's pipeline options */
} measure_ctx;

static int measure(void *ctx, const dg_recompute_opts *o, dg_recompute_cost *cost, int *n_nodes, dg_err *err) {
    const measure_ctx *m = ctx;
    dg_pipeline_opts po = *m->po;
    po.recompute = o;
    po.stop_after = DG_STAGE_SCHEDULE;
    dg_pipeline_result r;
    DG_TRY(dg_pipeline_run(m->b->logical, &po, &r, err));
    dg_sched_plan *p = plan_of(m->b, &r, 1, err);
    int st = p ? DG_OK : DG_EINPUT;
    if (p) {
        cost->peak = p->mem.arena_bytes;
        cost->flops = 0;
        for (int v = 0; v < r.g->n_nodes; v++) {
            const dg_node *n = &r.g->nodes[v];
            dg_cost c = {0, 0};
            if (n->op && n->op->cost) n->op->cost(r.g, n, &c);
            cost->flops += c.flops;
        }
        if (n_nodes) *n_nodes = r.recompute.n_nodes;
        dg_sched_plan_free(p);
    }
    dg_pipeline_result_free(&r);
    return st;
}

/* The pipeline run on b->logical with the regions the run recomputes: the
 * flags' as they are (measured too when the caller wants the report), or
 * under --recompute-memory-budget the planner's measured choice. */
static int run_pipeline(const dg_train_config *c, const dg_pipeline_opts *po_in, dg_recompute_report *report,
                        dg_step_built *b, dg_err *err) {
    dg_pipeline_opts po = *po_in;
    measure_ctx mc = {b, &po};
    dg_recompute_step rs = {measure, &mc};
    dg_recompute_sel rc = {0};
    dg_recompute_report own;
    int st = DG_OK;
    if (report || !dg_recompute_select_flags(c, &rc)) {
        dg_recompute_sel_free(&rc);
        st = dg_recompute_plan(c, &rs, &rc, report ? report : &own, err);
    }
    po.recompute = &rc.opts;
    if (st == DG_OK) st = dg_pipeline_run(b->logical, &po, &b->step, err);
    dg_recompute_sel_free(&rc);
    return st;
}

/* One logical micro-batch's io, mapped into the step graph. */
static void map_io(const dg_pipeline_result *r, int mb, const dg_model_io *l, dg_model_io *out) {
    memset(out, -1, sizeof *out);
    const int *src = (const int *)l;
    int *dst = (int *)out;
    for (size_t i = 0; i < sizeof *l / sizeof(int); i++) dst[i] = src[i] < 0 ? -1 : dg_pipeline_map(r, mb, src[i]);
}

int dg_step_build(const dg_train_config *c, const dg_step_rank *at, const dg_step_build_opts *o,
                  dg_step_built *out, dg_err *err) {
    dg_step_build_opts dflt = {0};
    if (!o) o = &dflt;
    memset(out, 0, sizeof *out);
    pick_cost_model(c, o->links, out);
    const char *name = o->partial && o->name ? o->name : NULL;
    out->logical = dg_graph_new(name ? name : "logical");
    int st = dg_model_build_forward(out->logical, &c->model, &out->lio, err);
    dg_step_opts opts; /* train/dg_step_opts.h: the rank's options */
    dg_step_opts_init(&opts, c, &out->lio, at->group, at->grad_shards, at->pp_stage);
    if (o->partial) {
        opts.po.stop_after = o->stop_after;
        if (o->n_microbatches > 0) opts.po.n_microbatches = o->n_microbatches;
        if (name) opts.po.step_name = name;
    }
    if (st == DG_OK) st = run_pipeline(c, &opts.po, o->recompute_report, out, err);
    if (st != DG_OK) {
        dg_graph_free(out->logical);
        memset(out, 0, sizeof *out);
        return st;
    }
    out->n_mb = out->step.n_microbatches;
    out->io = dg_calloc((size_t)DG_MAX(out->n_mb, 1), sizeof *out->io);
    for (int mb = 0; mb < out->n_mb; mb++) map_io(&out->step, mb, &out->lio, &out->io[mb]);
    return DG_OK;
}

int dg_step_plan(dg_step_built *b, int memory_plan, dg_err *err) {
    b->plan = plan_of(b, &b->step, memory_plan, err);
    return b->plan ? DG_OK : DG_EINTERNAL;
}

void dg_step_built_free(dg_step_built *b) {
    if (b->plan) dg_sched_plan_free(b->plan);
    dg_pipeline_result_free(&b->step);
    if (b->logical) dg_graph_free(b->logical);
    dg_free(b->io);
    memset(b, 0, sizeof *b);
}
