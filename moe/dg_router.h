/* dg_router.h — the MoE router: top-k expert selection and routing probs.
 *
 * From router logits [T, E] (the model builder emits them with a linear
 * layer, Megatron's TopKRouter.gating), dg_moe_router() adds one node with
 * three outputs:
 *   probs             f32 [T, k]  routing weight of each (token, slot)
 *   indices           i32 [T, k]  expert of each slot, -1 if dropped
 *   tokens_per_expert i32 [E]     slots per expert BEFORE capacity dropping
 * Slot j of a token is its j-th choice: descending score, ties broken by the
 * lower expert index (deterministic; torch.topk leaves ties unspecified).
 * Only probs carries a gradient (to the logits).
 *
 * Score functions (Megatron's topk_routing_with_score_function):
 *   softmax (default)  probs = softmax over the k largest logits
 *   softmax + pre_softmax (--moe-router-pre-softmax)
 *                      probs = the k largest of softmax over all E
 *   sigmoid (--moe-router-score-function sigmoid)
 *                      the k largest sigmoid(logits), divided by their sum
 *                      (+1e-20) when k > 1
 * then probs *= scaling_factor when it is set (--moe-router-topk-scaling-factor).
 *
 * Group-limited routing (--moe-router-num-groups G, --moe-router-group-topk
 * g; Megatron's group_limited_topk, DeepSeek's device/node-limited routing):
 * experts form G equal groups of consecutive ids; a group scores the sum of
 * its top k/g routing scores; each token picks its g best groups (ties to
 * the lower group) and its top k experts among theirs.
 *
 * Expert bias (--moe-router-enable-expert-bias, aux-loss-free balancing;
 * sigmoid only, as in Megatron): an optional f32 [E] input added to the
 * sigmoid scores for the selection only; probs use the unbiased scores. It
 * takes no gradient: make it a buffer (not a DG_ROLE_PARAMETER) and update
 * it outside the gradient path from tokens_per_expert.
 *
 * Capacity (--moe-expert-capacity-factor f > 0): each expert keeps at most
 * capacity = ceil(T*k/E * f) slots (Megatron's get_capacity over T*k
 * tokens), chosen by --moe-token-drop-policy: "probs" keeps the largest
 * probs (ties to the earlier token), "position" the earliest tokens. A
 * dropped slot gets index -1 and prob 0 (Megatron masks its prob to 0 and
 * does not dispatch it); the kept probs are NOT renormalised, and a dropped
 * slot's expert still takes gradient through the normalisation it was part
 * of, as in Megatron where the mask multiplies the probs after the softmax.
 * As in Megatron, nothing is dropped when capacity > T. Padding to capacity
 * (--moe-pad-expert-input-to-capacity) is not supported.
 *
 * tokens_per_expert counts the selection before dropping (with count_kept:
 * after it, as Megatron's expert-bias update counts). Megatron's
 * load-balancing loss counts the plain top-k of the full scores
 * (compute_routing_scores_for_aux_loss): the same experts unless groups or
 * an expert bias are on. dg_moe_aux_loss(g, logits, -1, ...) computes that
 * top-k itself and matches Megatron in every mode; passing
 * tokens_per_expert is equivalent without groups and bias. Permutation
 * (dg_permute.h) counts kept slots itself.
 *
 * Start options from dg_router_opts_default() (expert_bias = -1 there;
 * a zeroed struct would name tensor 0 as the bias).
 *
 * Attr slots of "moe_router" (and of its backward "moe_router_grad"):
 *   i[0] topk            i[1] score function (dg_moe_score_fn: 0 softmax, 1 sigmoid)
 *   i[2] pre_softmax     i[3] drop policy (dg_moe_drop_policy: 0 probs, 1 position)
 *   i[4] num_groups (0: off) i[5] group_topk
 *   i[6] count_kept (forward only)
 *   f[0] capacity factor (<= 0: dropless)   f[1] scaling factor (0: none)
 * Inputs: logits [, expert bias]; the backward takes (dprobs, logits,
 * indices [, expert bias]).
 */
#ifndef DG_ROUTER_H
#define DG_ROUTER_H

#include "dg_cpu_moe.h"
#include "dg_op.h"

/* Largest top-k the CPU kernels handle. */
#define DG_ROUTER_MAX_TOPK DG_MOE_MAX_K

typedef struct dg_router_opts {
    int topk;                   /* --moe-router-topk (>= 1, <= E) */
    dg_moe_score_fn score;      /* --moe-router-score-function */
    int pre_softmax;            /* --moe-router-pre-softmax (softmax only) */
    double capacity_factor;     /* --moe-expert-capacity-factor; <= 0: dropless */
    dg_moe_drop_policy drop_policy; /* --moe-token-drop-policy */
    double scaling_factor;      /* --moe-router-topk-scaling-factor; 0: none */
    int num_groups;             /* --moe-router-num-groups; 0: not group-limited */
    int group_topk;             /* --moe-router-group-topk */
    int expert_bias;            /* tensor id of f32 [E] (--moe-router-enable-expert-bias,
                                 * sigmoid only), or -1 */
    int count_kept;             /* tokens_per_expert counts the slots kept after capacity
                                 * dropping (what Megatron's expert-bias update counts) */
} dg_router_opts;

/* Megatron's defaults for top-k: softmax after top-k, dropless, no scaling,
 * no groups, no expert bias. */
dg_router_opts dg_router_opts_default(int topk);

typedef struct dg_router_out {
    int probs;             /* f32 [T, k] */
    int indices;           /* i32 [T, k] */
    int tokens_per_expert; /* i32 [E], before dropping */
} dg_router_out;

/* Route logits [T, E] (f32). Fills *out (may be NULL) and returns the probs
 * tensor id, or -1 after a builder error. */
int dg_moe_router(dg_graph *g, int logits, const dg_router_opts *o, dg_router_out *out);

/* Megatron's get_capacity(T*k, E, factor): ceil(T*k / E * factor). */
int64_t dg_moe_capacity(int64_t T, int topk, int64_t E, double capacity_factor);

extern const dg_op_def dg_op_moe_router;
/* dlogits [T, E] from (dprobs [T, k], logits [T, E], indices [T, k] i32). */
extern const dg_op_def dg_op_moe_router_grad;

#endif /* DG_ROUTER_H */
