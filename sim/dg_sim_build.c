/* dg_sim_build.c — a rank's step graph and plan for any pipeline stage,
 * without MPI: train/dg_step_build.h, the trainer's own builder, with the
 * groups' sizes taken from the grid's sizes instead of its comms. */
#include <stdlib.h>
#include <string.h>

#include "dg_sim_internal.h"
#include "dg_step_build.h"

int dg_sim_build_stage(const dg_train_config *c, const dg_grid_sizes *sz, int pp_stage, int memory_plan,
                       const dg_link_spec *links, dg_sim_stage *out, dg_err *err) {
    memset(out, 0, sizeof *out);
    dg_step_rank at;
    dg_step_rank_of(sz, pp_stage, &at);
    dg_step_build_opts o = {.links = links}; /* the plan knows the links the engine times */
    dg_step_built b;
    DG_TRY(dg_step_build(c, &at, &o, &b, err));
    /* The memory planner's placement is quadratic in the activations
     * (sched/dg_memplan.c): past a size the simulator plans without it and
     * reports the live-bytes peak, the placement's lower bound. */
    int plan_memory = memory_plan && b.step.g->n_nodes <= DG_SIM_MEMPLAN_MAX_NODES;
    int st = dg_step_plan(&b, plan_memory, err);
    if (st == DG_OK) {
        out->g = b.step.g;
        out->plan = b.plan;
        b.step.g = NULL, b.plan = NULL;
    }
    dg_step_built_free(&b);
    return st;
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
