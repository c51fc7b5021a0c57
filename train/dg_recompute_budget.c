/* dg_recompute_budget.c — --recompute-memory-budget: the cheapest regions
 * to recompute so the planned activation peak fits (see dg_recompute.h).
 *
 * Candidates are units: a whole layer, or one module of a layer (its
 * layernorms, core attention, MLP or MoE, the experts' activation, the
 * shared experts). Each step measures every remaining unit added to the
 * current choice on the real plan (the planner's peak is not additive:
 * what is live at the peak moves as regions are recomputed) and takes the
 * cheapest unit that fits, else the one that saves the most peak bytes per
 * extra FLOP; after the first step only the units that saved most alone
 * are measured (STEP_CANDIDATES), so the plans built grow linearly with the
 * layers. Then units the fit does not need are dropped, the ones added
 * last first. */
#include <math.h>
#include <string.h>

#include "dg_module.h"
#include "dg_recompute_internal.h"

#define MIB (1024.0 * 1024.0)
#define UNIT_FULL (-1)

typedef struct unit {
    int layer, module; /* module: a dg_module, or UNIT_FULL */
} unit;

/* The units of c's model. Returns how many (units holds 6 per layer). */
static int list_units(const dg_train_config *c, unit *u) {
    int n = 0;
    for (int l = 0; l < c->model.num_layers; l++) {
        int moe = dg_model_layer_is_moe(&c->model, l);
        u[n++] = (unit){l, DG_MODULE_LAYERNORM};
        u[n++] = (unit){l, DG_MODULE_CORE_ATTN};
        if (moe) {
            u[n++] = (unit){l, DG_MODULE_MOE_ACT};
            if (c->model.moe_shared_expert_size > 0) u[n++] = (unit){l, DG_MODULE_SHARED_EXPERTS};
        }
        u[n++] = (unit){l, moe ? DG_MODULE_MOE : DG_MODULE_MLP};
        u[n++] = (unit){l, UNIT_FULL};
    }
    return n;
}

/* s with the units whose on[] is set. */
static void build(dg_recompute_sel *s, const unit *u, const char *on, int n) {
    for (int l = 0; l < s->opts.n_layers; l++) {
        s->full_group[l] = -1;
        s->modules[l] = 0;
    }
    for (int i = 0; i < n; i++)
        if (on[i] && u[i].module == UNIT_FULL) s->full_group[u[i].layer] = u[i].layer;
    for (int i = 0; i < n; i++)
        if (on[i] && u[i].module != UNIT_FULL && s->full_group[u[i].layer] < 0)
            s->modules[u[i].layer] |= 1u << u[i].module;
}

/* Does the choice already cover unit i (its layer whole, or its parent module)? */
static int covered(const dg_recompute_sel *s, const unit *u) {
    if (s->full_group[u->layer] >= 0) return 1;
    if (u->module == UNIT_FULL) return 0;
    unsigned m = s->modules[u->layer];
    return ((m >> u->module) & 1u) || ((m >> dg_module_parent(u->module)) & 1u);
}

/* Units measured per greedy step after the first: the most promising by
 * what each saved alone, so a step costs a bounded number of plans however
 * many layers the model has. */
#define STEP_CANDIDATES 8

/* The remaining units a step measures, into cand; returns how many. The
 * first step (score0 not filled yet) takes every one. */
static int candidates(dg_recompute_sel *trial, const unit *u, char *on, int n, const double *score0, int *cand) {
    int nc = 0;
    build(trial, u, on, n);
    for (int i = 0; i < n; i++)
        if (!on[i] && !covered(trial, &u[i])) cand[nc++] = i;
    if (!score0) return nc;
    for (int a = 0; a < nc; a++) /* partial selection sort: the best STEP_CANDIDATES first */
        for (int b = a + 1; b < nc && a < STEP_CANDIDATES; b++)
            if (score0[cand[b]] > score0[cand[a]]) {
                int t = cand[a];
                cand[a] = cand[b];
                cand[b] = t;
            }
    return DG_MIN(nc, STEP_CANDIDATES);
}

/* One greedy step: the unit to add to on[] (cur: its cost), or -1. The
 * first step (first = 1) records each unit's score alone in score0. */
static int pick_unit(const dg_recompute_step *step, dg_recompute_sel *trial, const unit *u, char *on, int n,
                     double *score0, int first, const dg_recompute_cost *cur, size_t budget,
                     dg_recompute_cost *got, dg_err *err, int *st) {
    int fit = -1, best = -1;
    double best_score = 0;
    dg_recompute_cost fit_cost = {0, 0}, best_cost = {0, 0};
    int *cand = dg_malloc(sizeof(int) * (size_t)DG_MAX(n, 1));
    int nc = candidates(trial, u, on, n, first ? NULL : score0, cand);
    for (int c = 0; c < nc && *st == DG_OK; c++) {
        int i = cand[c];
        on[i] = 1;
        build(trial, u, on, n);
        on[i] = 0;
        dg_recompute_cost tc;
        if ((*st = step->measure(step->ctx, &trial->opts, &tc, NULL, err)) != DG_OK) break;
        double score = ((double)cur->peak - (double)tc.peak) / fmax(tc.flops - cur->flops, 1.0);
        if (first) score0[i] = score;
        if (tc.peak <= budget && (fit < 0 || tc.flops < fit_cost.flops)) fit = i, fit_cost = tc;
        if (tc.peak >= cur->peak) continue;
        if (best < 0 || score > best_score) best = i, best_score = score, best_cost = tc;
    }
    dg_free(cand);
    *got = fit >= 0 ? fit_cost : best_cost;
    return fit >= 0 ? fit : best;
}

/* Drop the units the fit does not need, trying the ones added last first. */
static int prune(const dg_recompute_step *step, dg_recompute_sel *trial, const unit *u, char *on, int n,
                 const int *added, int n_added, size_t budget, dg_recompute_cost *cur, dg_err *err) {
    for (int k = n_added - 1; k >= 0; k--) {
        int i = added[k];
        on[i] = 0;
        build(trial, u, on, n);
        dg_recompute_cost tc;
        DG_TRY(step->measure(step->ctx, &trial->opts, &tc, NULL, err));
        if (tc.peak <= budget && tc.flops <= cur->flops) *cur = tc;
        else on[i] = 1;
    }
    return DG_OK;
}

int dg_rc_budget(const dg_train_config *c, const dg_recompute_step *step, dg_recompute_sel *s,
                 dg_recompute_report *r, dg_err *err) {
    double mb = c->recompute_memory_budget;
    size_t budget = (size_t)(mb * MIB);
    char how[96];
    snprintf(how, sizeof how, "budget %g MB", mb);
    if (r->none.peak <= budget) {
        dg_rc_describe(s, how, r->what, sizeof r->what);
        return DG_OK;
    }
    int L = c->model.num_layers;
    dg_recompute_sel trial;
    dg_rc_sel_init(&trial, L);
    for (int l = 0; l < L; l++) trial.full_group[l] = l;
    dg_recompute_cost full;
    int st = step->measure(step->ctx, &trial.opts, &full, NULL, err);
    if (st == DG_OK && full.peak > budget)
        st = dg_err_set(err, DG_EINPUT,
                        "--recompute-memory-budget %g: infeasible: the smallest feasible budget is %.3f MB "
                        "(the planned activation peak with full recompute of every layer)",
                        mb, ceil((double)full.peak / MIB * 1000.0) / 1000.0);
    unit *u = dg_malloc(sizeof *u * (size_t)(6 * DG_MAX(L, 1)));
    int n = list_units(c, u);
    char *on = dg_calloc((size_t)n, 1);
    int *added = dg_malloc(sizeof(int) * (size_t)n), n_added = 0;
    double *score0 = dg_calloc((size_t)DG_MAX(n, 1), sizeof(double));
    dg_recompute_cost cur = r->none;
    while (st == DG_OK && cur.peak > budget) {
        dg_recompute_cost got;
        int i = pick_unit(step, &trial, u, on, n, score0, n_added == 0, &cur, budget, &got, err, &st);
        if (st != DG_OK) break;
        if (i < 0) { /* nothing lowers the peak step by step: every layer whole fits */
            for (int k = 0; k < n; k++) on[k] = u[k].module == UNIT_FULL;
            cur = full;
            break;
        }
        on[i] = 1;
        added[n_added++] = i;
        cur = got;
    }
    if (st == DG_OK) st = prune(step, &trial, u, on, n, added, n_added, budget, &cur, err);
    if (st == DG_OK) {
        build(s, u, on, n);
        dg_rc_describe(s, how, r->what, sizeof r->what);
    }
    dg_free(score0);
    dg_free(added);
    dg_free(on);
    dg_free(u);
    dg_recompute_sel_free(&trial);
    return st;
}
