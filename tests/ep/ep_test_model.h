/* ep_test_model.h — a one-layer MoE GPT for the EP tests, built the way
 * moe/dg_model.c builds its MoE layers (router, aux and z losses, experts
 * through dg_ep_experts), plus the data and parameter filling that makes
 * every rank and the single-rank reference agree on values.
 *
 *   tokens -> embedding -> x; h = rmsnorm(x); logits = h wr^T; router;
 *   y = experts(h); x2 = x + y -> rmsnorm -> lm head -> masked xent
 *   loss = lm + aux + z
 */
#ifndef EP_TEST_MODEL_H
#define EP_TEST_MODEL_H

#include "dg_ep.h"
#include "dg_graph.h"

typedef struct ep_cfg {
    int B, S, H, E, k, F, V;
    double capacity_factor; /* 0: dropless */
    double aux_coeff, z_coeff;
} ep_cfg;

typedef struct ep_model {
    dg_graph *g;
    int tokens, targets, mask, ep_rank;
    int loss, lm, aux, z;
    int counts; /* router tokens_per_expert, i32 [E] */
} ep_model;

void ep_cfg_default(ep_cfg *c);

/* Build forward + backward. Returns DG_OK or an error in err. */
int ep_model_build(ep_model *m, const ep_cfg *c, const dg_ep_opts *o, dg_err *err);

#ifdef DG_EP_FULL_MODEL
/* The real model (moe/dg_model.c, tiny config: 2 layers with attention)
 * with EP options; c gets the matching batch shape. Needs moe/dg_model.h's
 * EP fields (CMake defines DG_EP_FULL_MODEL when it has them). */
int ep_model_build_full(ep_model *m, ep_cfg *c, const dg_ep_opts *o, dg_err *err);
#endif

/* Fill parameter t (the local slice of EP rank ep_rank when it is an
 * expert weight) from its global name and global element index. */
void ep_fill_param(const dg_graph *g, int t, int ep_rank, float *dst);

/* Fill micro-batch `mb`'s tokens, targets and mask. */
void ep_fill_batch(const ep_cfg *c, int mb, int32_t *tokens, int32_t *targets, float *mask);

#endif /* EP_TEST_MODEL_H */
