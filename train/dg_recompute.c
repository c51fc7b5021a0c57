/* dg_recompute.c — see dg_recompute.h. */
#include "dg_recompute.h"
#include "dg_recompute_internal.h"

#include <string.h>

#include "dg_train_pp.h"

#define MIB (1024.0 * 1024.0)

/* "full", "selective" or "" once --recompute-activations is folded in. */
static const char *granularity(const dg_train_config *c) {
    if (c->recompute_granularity[0]) return c->recompute_granularity;
    return c->recompute_activations ? "selective" : "";
}

int dg_recompute_check(const dg_train_config *c, dg_err *err) {
    const char *gr = granularity(c);
    int L = c->model.num_layers;
    if (c->recompute_memory_budget > 0 && gr[0])
        return dg_err_set(err, DG_EINPUT,
                          "--recompute-memory-budget chooses what to recompute itself: drop --recompute-granularity "
                          "/ --recompute-activations");
    if (!strcmp(gr, "full")) {
        if (!c->recompute_method[0])
            return dg_err_set(err, DG_EINPUT, "--recompute-granularity full needs --recompute-method uniform or block");
        if (c->recompute_num_layers < 1 || c->recompute_num_layers > L)
            return dg_err_set(err, DG_EINPUT,
                              "--recompute-granularity full needs --recompute-num-layers between 1 and --num-layers %d",
                              L);
    } else {
        const char *why = gr[0] ? "--recompute-granularity selective" : "no --recompute-granularity";
        if (c->recompute_method[0])
            return dg_err_set(err, DG_EINPUT, "--recompute-method %s: only with --recompute-granularity full (%s)",
                              c->recompute_method, why);
        if (c->recompute_num_layers > 0)
            return dg_err_set(err, DG_EINPUT, "--recompute-num-layers %d: only with --recompute-granularity full (%s)",
                              c->recompute_num_layers, why);
    }
    if (c->recompute_modules[0] && strcmp(gr, "selective"))
        return dg_err_set(err, DG_EINPUT, "--recompute-modules: only with --recompute-granularity selective");
    unsigned bits;
    return dg_rc_parse_modules(c->recompute_modules, &bits, err);
}

/* --recompute-granularity full's groups, as Megatron's TransformerBlock
 * makes them: it counts --recompute-num-layers N within the layers it
 * holds, one pipeline stage's (one virtual stage's under interleaving).
 * uniform cuts them into groups of N from the stage's first layer (the
 * last group shorter); block recomputes the stage's first N layers, each
 * alone. So N beyond a stage's layers recomputes all of them. A group is
 * named by its first layer. */
static void full_groups(const dg_train_config *c, int *group) {
    dg_pp_opts po;
    dg_train_pp_opts(c, 0, &po);
    int L = c->model.num_layers, n = c->recompute_num_layers, uniform = !strcmp(c->recompute_method, "uniform");
    for (int l = 0, first = 0; l < L; l++) {
        if (l > 0 && dg_pp_vstage_of_layer(&po, l) != dg_pp_vstage_of_layer(&po, l - 1)) first = l;
        int i = l - first; /* the layer's index in its stage */
        group[l] = uniform ? first + i / n * n : i < n ? l : -1;
    }
}

/* The flags' regions (dg_recompute_check has passed). */
static void from_flags(const dg_train_config *c, dg_recompute_sel *s) {
    const char *gr = granularity(c);
    int L = c->model.num_layers;
    if (!strcmp(gr, "full")) full_groups(c, s->full_group);
    if (!strcmp(gr, "selective")) {
        unsigned bits = 0;
        dg_err e;
        dg_rc_parse_modules(c->recompute_modules, &bits, &e);
        for (int l = 0; l < L; l++) s->modules[l] = bits;
    }
}

int dg_recompute_select_flags(const dg_train_config *c, dg_recompute_sel *s) {
    dg_rc_sel_init(s, c->model.num_layers);
    if (c->recompute_memory_budget > 0) return 0;
    from_flags(c, s);
    return 1;
}

int dg_recompute_plan(const dg_train_config *c, const dg_recompute_step *step, dg_recompute_sel *s,
                      dg_recompute_report *r, dg_err *err) {
    memset(r, 0, sizeof *r);
    dg_rc_sel_init(s, c->model.num_layers);
    const char *gr = granularity(c);
    if (!gr[0] && !(c->recompute_memory_budget > 0)) return DG_OK;
    r->active = 1;
    dg_recompute_sel none;
    dg_rc_sel_init(&none, c->model.num_layers);
    int st = step->measure(step->ctx, &none.opts, &r->none, NULL, err);
    dg_recompute_sel_free(&none);
    DG_TRY(st);
    if (c->recompute_memory_budget > 0) {
        DG_TRY(dg_rc_budget(c, step, s, r, err));
    } else {
        from_flags(c, s);
        char how[96];
        if (!strcmp(gr, "full"))
            snprintf(how, sizeof how, "%s, %d layer%s", !strcmp(c->recompute_method, "uniform") ? "uniform" : "block",
                     c->recompute_num_layers,
                     c->recompute_num_layers == 1 ? "" : "s");
        else
            snprintf(how, sizeof how, "selective");
        dg_rc_describe(s, how, r->what, sizeof r->what);
    }
    return step->measure(step->ctx, &s->opts, &r->with, &r->n_nodes, err);
}

void dg_recompute_report_print(const dg_recompute_report *r, FILE *f) {
    if (!r->active) return;
    double extra = r->none.flops > 0 ? 100.0 * (r->with.flops - r->none.flops) / r->none.flops : 0.0;
    double saved = (double)r->none.peak - (double)r->with.peak;
    fprintf(f,
            "recompute plan: %s; %d recompute nodes per micro-batch, +%.2f%% FLOPs; planned activation peak "
            "%.3f MiB -> %.3f MiB (%.1f%% of no recompute; recompute saves %.3f MiB)\n",
            r->what, r->n_nodes, extra, (double)r->none.peak / MIB, (double)r->with.peak / MIB,
            r->none.peak ? 100.0 * (double)r->with.peak / (double)r->none.peak : 100.0, saved / MIB);
}
