/* dg_pp_sim.h — a pipeline schedule's slot model: its planned bubble and
 * how many micro-batches each stage holds.
 *
 * Every stage runs its block order (dg_pp_schedule_blocks) one block at a
 * time, each block taking a fixed cost: F(mb) starts when its stage is free
 * and stage s-1's F(mb) has ended; B(mb) when stage s+1's B(mb) has ended;
 * W(mb) comes after its B in the stage's order. Communication costs nothing
 * and every stage costs the same: the papers' model, where 1F1B's bubble is
 * (p-1)/(m+p-1) and ZB-H1's, with F = B = W, (p-1)/(3m+p-1). Under 1F1B and
 * all-forward-all-backward a backward block is input and weight gradients
 * together (cost b + w) and sends upstream at its end.
 *
 * The bubble of a stage is the part of the span (the first block's start
 * to the last one's end over all stages) it is idle; the result is their
 * mean — the same definition `dagatron trace-svg` measures on a trace. A
 * micro-batch is held by a stage from its F to the end of its backward (W
 * under ZB-H1): the activations the stage keeps for it.
 */
#ifndef DG_PP_SIM_H
#define DG_PP_SIM_H

#include "dg_pass_pp.h"

typedef struct dg_pp_sim_cost {
    double f, b, w; /* forward, input-gradient backward, weight-gradient backward of one block */
} dg_pp_sim_cost;

typedef struct dg_pp_sim_result {
    double span;     /* first start to last end, in the costs' unit */
    double bubble;   /* mean over stages of idle time / span */
    int max_held;    /* most micro-batches any stage holds at once */
    int held_first;  /* ... the first stage (1F1B's peak: p) */
} dg_pp_sim_result;

/* Model schedule `s` on p stages with m micro-batches. DG_EINPUT for
 * p < 1 or m < 1; DG_EINTERNAL when the block orders deadlock (a
 * schedule's bug, never a user's). */
int dg_pp_sim(int p, int m, dg_pp_schedule s, dg_pp_sim_cost c, dg_pp_sim_result *r, dg_err *err);

/* The same with stage st's blocks costing c[st] (c has p entries): what
 * unequal stages do to the bubble, each stage's idle time counted against
 * the span (the mean of 1 - stage's busy / span). */
int dg_pp_sim_stages(int p, int m, dg_pp_schedule s, const dg_pp_sim_cost *c, dg_pp_sim_result *r,
                     dg_err *err);

#endif /* DG_PP_SIM_H */
