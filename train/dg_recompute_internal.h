/* dg_recompute_internal.h — the recompute planner's parts, not a public
 * interface: a choice of regions (dg_recompute_sel.c), which the flags'
 * choice (dg_recompute.c) and the budget planner (dg_recompute_budget.c)
 * use; dg_recompute.c calls the budget planner, never the other way. */
#ifndef DG_RECOMPUTE_INTERNAL_H
#define DG_RECOMPUTE_INTERNAL_H

#include "dg_recompute.h"

/* s selects nothing over `layers` layers (arrays owned by s). */
void dg_rc_sel_init(dg_recompute_sel *s, int layers);
/* --recompute-modules as a bit set (1u << dg_module); "" is Megatron's
 * default (core_attn). DG_OK or DG_EINPUT naming the module. */
int dg_rc_parse_modules(const char *list, unsigned *bits, dg_err *err);
/* What s recomputes, in words, after the prefix `how`. */
void dg_rc_describe(const dg_recompute_sel *s, const char *how, char *buf, size_t cap);
/* The budget planner (dg_recompute.h): fills s and r->what; r->none is measured. */
int dg_rc_budget(const dg_train_config *c, const dg_recompute_step *step, dg_recompute_sel *s,
                 dg_recompute_report *r, dg_err *err);

#endif /* DG_RECOMPUTE_INTERNAL_H */
