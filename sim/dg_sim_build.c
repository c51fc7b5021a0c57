/* dg_sim_build.c — a rank's step graph and plan for any grid coordinate,
 * without MPI: the trainer's setup (train/dg_trainer.c) with the groups'
 * sizes taken from the grid's sizes instead of its comms. */
#include <stdlib.h>
#include <string.h>

#include "dg_autodiff.h"
#include "dg_cp.h"
#include "dg_dist.h"
#include "dg_feed.h"
#include "dg_model.h"
#include "dg_op_basic.h"
#include "dg_op_optim.h"
#include "dg_op_round16.h"
#include "dg_pipeline.h"
#include "dg_sim_internal.h"
#include "dg_step_opts.h"
#include "dg_train_pp.h"

int dg_sim_build_stage(const dg_train_config *c, const dg_grid_sizes *sz, int pp_stage, int memory_plan,
                       dg_sim_stage *out, dg_err *err) {
    memset(out, 0, sizeof *out);
    int group[DG_AXIS_COUNT], grad_shards;
    dg_step_groups(sz, group, &grad_shards); /* as the runtime's comms (dg_grid_runtime_groups) */
    dg_graph *logical = dg_graph_new("logical");
    dg_model_io lio;
    int st = dg_model_build_forward(logical, &c->model, &lio, err);
    dg_step_opts opts; /* train/dg_step_opts.h: the trainer's own options */
    dg_step_opts_init(&opts, c, &lio, group, grad_shards, pp_stage);
    dg_pipeline_opts po = opts.po;
    dg_pipeline_result r;
    if (st == DG_OK) st = dg_step_pipeline_run(c, logical, &lio, &po, &r, err);
    dg_graph_free(logical);
    if (st != DG_OK) return st;
    int n_keep;
    int *keep = dg_step_keep(&r, &lio, c->num_microbatches, &n_keep);
    out->g = r.g;
    r.g = NULL;
    dg_pipeline_result_free(&r);
    /* The memory planner's placement is quadratic in the activations
     * (sched/dg_memplan.c): past a size the simulator plans without it and
     * reports the live-bytes peak, the placement's lower bound. */
    int plan_memory = memory_plan && out->g->n_nodes <= DG_SIM_MEMPLAN_MAX_NODES;
    dg_cost_model cm; /* under --emulate-link the plan knows the links, as the trainer's */
    dg_sched_opts so = {.keep = keep, .n_keep = n_keep, .no_memory_plan = !plan_memory,
                        .cost = dg_step_cost_model(c, &cm)};
    out->plan = dg_sched_plan_new(out->g, &so, err);
    dg_free(keep);
    if (!out->plan) {
        dg_sim_stage_free(out);
        return DG_EINTERNAL;
    }
    return DG_OK;
}

/* Lifetime boundary of an activation on the plan's timeline. */
typedef struct life {
    double t;
    double delta;
} life;

static int life_cmp(const void *pa, const void *pb) {
    const life *a = pa, *b = pb;
    if (a->t != b->t) return a->t < b->t ? -1 : 1;
    return (a->delta > b->delta) - (a->delta < b->delta); /* frees first */
}

double dg_sim_live_peak(const dg_sim_stage *s) {
    const dg_graph *g = s->g;
    const dg_sched_plan *p = s->plan;
    double horizon = 0, *last = dg_malloc(sizeof(double) * (size_t)DG_MAX(g->n_tensors, 1));
    for (int v = 0; v < g->n_nodes; v++) horizon = DG_MAX(horizon, p->sim_end[v]);
    for (int t = 0; t < g->n_tensors; t++) last[t] = -1;
    for (int v = 0; v < g->n_nodes; v++)
        for (int i = 0; i < g->nodes[v].n_in; i++) {
            int t = g->nodes[v].in[i];
            if (t >= 0 && t < g->n_tensors) last[t] = DG_MAX(last[t], p->sim_end[v]);
        }
    life *ev = dg_malloc(sizeof *ev * (size_t)DG_MAX(2 * g->n_tensors, 1));
    int n = 0;
    for (int t = 0; t < g->n_tensors; t++) {
        const dg_tensor *x = &g->tensors[t];
        if (x->role != DG_ROLE_ACTIVATION || x->producer < 0) continue;
        double b = (double)dg_tensor_bytes(x);
        ev[n++] = (life){p->sim_start[x->producer], b};
        ev[n++] = (life){last[t] < 0 ? horizon : last[t], -b};
    }
    qsort(ev, (size_t)n, sizeof *ev, life_cmp);
    double live = 0, peak = 0;
    for (int i = 0; i < n; i++) peak = DG_MAX(peak, live += ev[i].delta);
    dg_free(ev);
    dg_free(last);
    return peak;
}

void dg_sim_stage_free(dg_sim_stage *s) {
    dg_sched_plan_free(s->plan);
    if (s->g) dg_graph_free(s->g);
    memset(s, 0, sizeof *s);
}
