/* dg_recompute_sel.c — a choice of recompute regions (dg_recompute_sel):
 * made empty, freed, its modules parsed from --recompute-modules, and
 * described in words for the plan line. Shared by the flags' choice
 * (dg_recompute.c) and the budget planner (dg_recompute_budget.c), which
 * both call it and not each other. */
#include "dg_recompute_internal.h"

#include <string.h>

#include "dg_module.h"

/* Megatron's --recompute-modules names (mla_up_proj selects nothing without
 * --multi-latent-attention, as in Megatron). */
static const int module_ids[] = {DG_MODULE_CORE_ATTN, DG_MODULE_MOE_ACT, DG_MODULE_LAYERNORM, DG_MODULE_MLP,
                                 DG_MODULE_MOE,       DG_MODULE_SHARED_EXPERTS, DG_MODULE_MLA_UP_PROJ};

int dg_rc_parse_modules(const char *list, unsigned *bits, dg_err *err) {
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
        if (found < 0)
            return dg_err_set(err, DG_EINPUT,
                              "--recompute-modules: unknown module '%s' (expected core_attn, moe_act, layernorm, "
                              "mlp, moe, shared_experts or mla_up_proj)",
                              w);
        *bits |= 1u << found;
    }
    return DG_OK;
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
