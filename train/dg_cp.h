/* dg_cp.h — what the trainer checks and needs for context parallelism
 * (parallel/cp/dg_pass_cp.h): the flags that compose with it, from the
 * flags alone, so a refusal comes before any other work.
 */
#ifndef DG_CP_H
#define DG_CP_H

#include <stdio.h>

#include "dg_pass_cp.h"
#include "dg_train_config.h"

/* --context-parallel-size > 1 needs: --cp-comm-type p2p (the ring; ""
 * counts as p2p) or a2a (cp dividing the heads and query groups),
 * --seq-length divisible by 2 x cp, no TP and no experts yet. DG_OK or
 * DG_EINPUT with one line naming the flags. */
int dg_train_config_check_cp(const dg_train_config *c, dg_err *err);

/* One line: the attention activations this rank holds for the backward
 * (dg_attention_saved_bytes of the step graph g). */
void dg_cp_print_attention_memory(const dg_graph *g, const dg_train_config *c, FILE *f);

/* The CP pass's options from the flags. */
dg_pass_cp_opts dg_train_cp_opts(const dg_train_config *c);

#endif /* DG_CP_H */
