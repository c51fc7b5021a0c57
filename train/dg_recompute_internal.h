/* dg_recompute_internal.h — what dg_recompute.c shares with the budget
 * planner (dg_recompute_budget.c); not a public interface. */
#ifndef DG_RECOMPUTE_INTERNAL_H
#define DG_RECOMPUTE_INTERNAL_H

#include "dg_recompute.h"

/* s selects nothing over `layers` layers (arrays owned by s). */
void dg_rc_sel_init(dg_recompute_sel *s, int layers);
/* Build the step graph with o's regions and plan it: the planned peak and
 * the FLOPs; *n_nodes (may be NULL) the recompute nodes per micro-batch. */
int dg_rc_measure(const dg_recompute_step *step, const dg_recompute_opts *o, dg_recompute_cost *cost,
                  int *n_nodes, dg_err *err);
/* What s recomputes, in words, after the prefix `how`. */
void dg_rc_describe(const dg_recompute_sel *s, const char *how, char *buf, size_t cap);
/* The budget planner (dg_recompute.h): fills s and r->what; r->none is measured. */
int dg_rc_budget(const dg_train_config *c, const dg_recompute_step *step, dg_recompute_sel *s,
                 dg_recompute_report *r, dg_err *err);

#endif /* DG_RECOMPUTE_INTERNAL_H */
