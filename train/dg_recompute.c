/* dg_recompute.c — see dg_recompute.h. */
#include "dg_recompute.h"
#include "dg_recompute_internal.h"

#include <string.h>

#include "dg_module.h"
#include "dg_op.h"
#include "dg_sched.h"
#include "dg_train_pp.h"

#define MIB (1024.0 * 1024.0)

/* Megatron's --recompute-modules names; mla_up_proj is Megatron's too but
 * has no counterpart here (no multi-latent attention). */
static const int module_ids[] = {DG_MODULE_CORE_ATTN, DG_MODULE_MOE_ACT, DG_MODULE_LAYERNORM,
                                 DG_MODULE_MLP, DG_MODULE_MOE, DG_MODULE_SHARED_EXPERTS};

/* --recompute-modules as a bit set (1u << dg_module). */
static int parse_modules(const char *list, unsigned *bits, dg_err *err) {
    *bits = 0;
    if (!list[0]) {
        *bits = 1u << DG_MODULE_CORE_ATTN; /* Megatron's default */
        return DG_OK;
    }
    char buf[DG_ARG_STR_LEN];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *w = strtok_r(buf, " ,", &save); w; w = strtok_r(NULL, " ,", &save)) {
        int found = -1;
        for (size_t i = 0; i < DG_ARRAY_LEN(module_ids); i++)
            if (!strcmp(w, dg_module_name(module_ids[i]))) found = module_ids[i];
        if (found < 0 && !strcmp(w, "mla_up_proj"))
            return dg_err_set(err, DG_EINPUT,
                              "--recompute-modules mla_up_proj: not supported: there is no multi-latent attention here");
        if (found < 0)
            return dg_err_set(err, DG_EINPUT,
                              "--recompute-modules: unknown module '%s' (expected core_attn, moe_act, layernorm, "
                              "mlp, moe or shared_experts)",
                              w);
        *bits |= 1u << found;
    }
    return DG_OK;
}

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
    return parse_modules(c->recompute_modules, &bits, err);
}

void dg_rc_sel_init(dg_recompute_sel *s, int layers) {
    s->full_group = dg_malloc(sizeof(int) * (size_t)DG_MAX(layers, 1));
    s->modules = dg_calloc((size_t)DG_MAX(layers, 1), sizeof(unsigned));
    for (int l = 0; l < layers; l++) s->full_group[l] = -1;
    s->opts = (dg_recompute_opts){layers, s->full_group, s->modules};
}

void dg_recompute_sel_free(dg_recompute_sel *s) {
    dg_free(s->full_group);
    dg_free(s->modules);
    memset(s, 0, sizeof *s);
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
        parse_modules(c->recompute_modules, &bits, &e);
        for (int l = 0; l < L; l++) s->modules[l] = bits;
    }
}

int dg_recompute_select_flags(const dg_train_config *c, dg_recompute_sel *s) {
    dg_rc_sel_init(s, c->model.num_layers);
    if (c->recompute_memory_budget > 0) return 0;
    from_flags(c, s);
    return 1;
}

/* Build the step graph with s's regions up to the schedule stage (the
 * micro-batches' forward and backward: the gradient buckets and the
 * optimizer come later and do not change with recompute), plan it, and
 * read the cost: the arena's planned peak is the activation peak. */
int dg_rc_measure(const dg_recompute_step *step, const dg_recompute_opts *o, dg_recompute_cost *cost,
                   int *n_nodes, dg_err *err) {
    dg_pipeline_opts po = *step->po;
    po.recompute = o;
    po.stop_after = DG_STAGE_SCHEDULE;
    dg_pipeline_result r;
    DG_TRY(dg_pipeline_run(step->logical, &po, &r, err));
    int *keep = dg_malloc(sizeof(int) * (size_t)(step->n_keep * r.n_microbatches + 1));
    int nk = 0;
    for (int mb = 0; mb < r.n_microbatches; mb++)
        for (int i = 0; i < step->n_keep; i++)
            if ((keep[nk] = dg_pipeline_map(&r, mb, step->keep[i])) >= 0) nk++;
    dg_sched_opts so = {.keep = keep, .n_keep = nk, .cost = step->cost};
    dg_sched_plan *p = dg_sched_plan_new(r.g, &so, err);
    dg_free(keep);
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

/* Append "layers a-b, c" for the layers where pick(l) holds. */
static void put_layers(char *buf, size_t cap, const dg_recompute_sel *s, int bit) {
    int L = s->opts.n_layers, first = 1;
    for (int l = 0; l < L;) {
        int on = bit < 0 ? s->full_group[l] >= 0 : (s->modules[l] >> bit) & 1u;
        if (!on) {
            l++;
            continue;
        }
        int e = l; /* a run of layers; full groups end where the group changes */
        while (e + 1 < L && (bit < 0 ? s->full_group[e + 1] == s->full_group[l] : (s->modules[e + 1] >> bit) & 1u)) e++;
        size_t n = strlen(buf);
        if (e > l) snprintf(buf + n, cap - n, "%s%d-%d", first ? "" : ", ", l, e);
        else snprintf(buf + n, cap - n, "%s%d", first ? "" : ", ", l);
        first = 0;
        l = e + 1;
    }
}

/* What s recomputes, in words. */
void dg_rc_describe(const dg_recompute_sel *s, const char *how, char *buf, size_t cap) {
    snprintf(buf, cap, "%s", how);
    int any_full = 0;
    for (int l = 0; l < s->opts.n_layers; l++) any_full |= s->full_group[l] >= 0;
    if (any_full) {
        size_t n = strlen(buf);
        snprintf(buf + n, cap - n, "%sfull layers ", buf[0] ? ": " : "");
        put_layers(buf, cap, s, -1);
    }
    for (size_t i = 0; i < DG_ARRAY_LEN(module_ids); i++) {
        int m = module_ids[i], any = 0;
        for (int l = 0; l < s->opts.n_layers; l++) any |= (s->modules[l] >> m) & 1u;
        if (!any) continue;
        size_t n = strlen(buf);
        snprintf(buf + n, cap - n, "%s%s (layers ", buf[0] ? (any_full ? "; " : ": ") : "", dg_module_name(m));
        put_layers(buf, cap, s, m);
        n = strlen(buf);
        snprintf(buf + n, cap - n, ")");
        any_full = 1; /* later entries are separated by "; " */
    }
    if (!dg_recompute_any(&s->opts)) {
        size_t n = strlen(buf);
        snprintf(buf + n, cap - n, "%snothing", buf[0] ? ": " : "");
    }
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
    int st = dg_rc_measure(step, &none.opts, &r->none, NULL, err);
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
    return dg_rc_measure(step, &s->opts, &r->with, &r->n_nodes, err);
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
