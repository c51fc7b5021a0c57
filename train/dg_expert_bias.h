/* dg_expert_bias.h — aux-loss-free load balancing's state
 * (--moe-router-enable-expert-bias, Megatron's expert bias; Wang et al.
 * 2024, arXiv:2408.15664).
 *
 * Each MoE layer's router selects its top k by sigmoid score + a per-expert
 * bias (moe/dg_router.h); the bias takes no gradient. It lives here, on the
 * host, and reaches the step graph as each micro-batch's input
 * "decoder.layers.L.mlp.router.expert_bias" f32 [E] (dg_model_io.expert_bias).
 * After each training step, as Megatron's finalize_model_grads does before
 * the optimizer (so after a skipped step too):
 *     count[e]  = tokens routed to e in the step, summed over every rank
 *     bias[e]  += rate * sign(mean(count) - count[e])
 * An expert with fewer tokens than the mean gains, one with more loses.
 * Megatron sums the counts over the tensor x data x context group; here
 * over the world: each layer's counts come only from its pipeline stage's
 * ranks, and a layout that counts a token on several ranks (TP without
 * SP) scales every expert's count alike, which leaves the signs, and so
 * the bias, what one rank computes. Evaluation steps do not count.
 *
 * The bias is saved in checkpoints under that name (replicated: one copy
 * is written), by the stage that holds the layer, and resumes bit for bit.
 */
#ifndef DG_EXPERT_BIAS_H
#define DG_EXPERT_BIAS_H

#include "dg_ckpt_pieces.h"
#include "dg_comm.h"
#include "dg_model.h"

typedef struct dg_expert_bias {
    int n_layers, E;
    double rate;      /* --moe-router-bias-update-rate */
    int *held;        /* [layers]: this rank's graph has the layer's bias input */
    float *bias;      /* [layers][E] */
    int64_t *counts;  /* [layers][E]: this rank's tokens per expert since the last update */
    dg_tensor *desc;  /* [layers]: each layer's bias as a checkpoint names and shapes it */
} dg_expert_bias;

/* Zero biases for the layers io (mapped into this rank's step graph) holds;
 * off (every call a no-op, n_layers 0) without m->moe_expert_bias. */
void dg_expert_bias_init(dg_expert_bias *b, const dg_model_config *m, const dg_model_io *io, double rate);
void dg_expert_bias_free(dg_expert_bias *b);

/* Before a step: every micro-batch's bias inputs (ptrs: each tensor's buffer). */
void dg_expert_bias_feed(const dg_expert_bias *b, const dg_model_io *io, int n_mb, void *const *ptrs);

/* After a training step ran: add a micro-batch's routed tokens of layer l,
 * i32 cnt [E] (the router's tokens_per_expert). */
void dg_expert_bias_count(dg_expert_bias *b, int l, const int32_t *cnt);

/* The update above, then the counts restart. Collective over world (NULL:
 * one rank). */
int dg_expert_bias_update(dg_expert_bias *b, dg_comm *world, dg_err *err);

/* Append the held layers' biases to a checkpoint's pieces (to save, or to
 * load into). */
int dg_expert_bias_pieces(dg_expert_bias *b, dg_ckpt_pieces *out, dg_err *err);

#endif /* DG_EXPERT_BIAS_H */
