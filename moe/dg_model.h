/* dg_model.h — the Mixtral-style GPT decoder lowered into a task graph.
 *
 * dg_model_config carries the model's shape with Megatron's flag names in the
 * comments; dg_model_build_forward() lowers one microbatch's forward pass into
 * graph nodes (embedding -> N x [norm, GQA attention with RoPE, residual,
 * norm, MoE or dense SwiGLU MLP, residual] -> final norm -> LM head ->
 * cross entropy), stamping each node with its layer.
 */
#ifndef DG_MODEL_H
#define DG_MODEL_H

#include "dg_graph.h"

typedef struct dg_model_config {
    int num_layers;          /* --num-layers */
    int hidden_size;         /* --hidden-size */
    int ffn_hidden_size;     /* --ffn-hidden-size (dense MLP) */
    int num_attention_heads; /* --num-attention-heads */
    int num_query_groups;    /* --num-query-groups (== heads without --group-query-attention) */
    int seq_length;          /* --seq-length */
    int micro_batch_size;    /* --micro-batch-size */
    int vocab_size;          /* --vocab-size (padded) */
    int num_experts;         /* --num-experts (0: dense model) */
    int moe_router_topk;     /* --moe-router-topk */
    int moe_ffn_hidden_size; /* --moe-ffn-hidden-size */
    double moe_aux_loss_coeff; /* --moe-aux-loss-coeff */
    double moe_z_loss_coeff;   /* --moe-z-loss-coeff */
    double rope_base;          /* --rotary-base (10000) */
    double norm_epsilon;       /* --norm-epsilon (1e-5) */
    int untie_embeddings;      /* --untie-embeddings-and-output-weights */
} dg_model_config;

/* A small MoE config: 2 layers, hidden 64, 4 heads / 2 groups, 4 experts top-2. */
void dg_model_config_tiny(dg_model_config *c);

/* Tensor ids of what a step needs from outside and what it produces. */
typedef struct dg_model_io {
    int tokens;   /* input  i32 [B, S] */
    int targets;  /* input  i32 [B, S] */
    int loss_mask;/* input  f32 [B, S] */
    int lm_loss;  /* f32 scalar: mean masked cross entropy */
    int aux_loss; /* f32 scalar: sum of load-balancing losses over layers (-1 if dense) */
    int z_loss;   /* f32 scalar: sum of router z-losses (-1 if dense) */
    int loss;     /* f32 scalar: lm + aux + z: what backward starts from */
} dg_model_io;

/* Build the forward graph of one microbatch into g. Returns DG_OK, or
 * DG_EINPUT with err naming the inconsistent setting. */
int dg_model_build_forward(dg_graph *g, const dg_model_config *c, dg_model_io *io, dg_err *err);

#endif /* DG_MODEL_H */
