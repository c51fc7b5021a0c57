/* dg_sim_memory.h — the analytical memory model of `dagatron simulate`: the
 * bytes one GPU of each pipeline stage holds, from the flags and the grid
 * alone (no graph is built, so a configuration that cannot fit is refused
 * before the simulator spends minutes on it).
 *
 *   parameters, gradients, optimizer state: Megatron's accounting
 *     (docs/user-guide/features/dist_optimizer.md, theoretical_memory_usage.py):
 *     bytes per parameter (param + main grad + fp32 main param and Adam moments)
 *       --bf16: 2 + 4 + 12 = 18 (grads 2 with --grad-reduce-in-bf16)
 *       --fp16: 2 + 2 + 16 = 20
 *       fp32:   4 + 4 + 8  = 16
 *     with --use-distributed-optimizer the optimizer part is divided by the
 *     data-parallel size (dense: dp x cp x ep ranks; experts: the
 *     expert-data-parallel size, world / (etp x ep x pp)), e.g. 6 + 12/d.
 *   activations: Korthikanti et al. 2022 (arXiv:2205.05198), Section 4 and
 *     Table 2, term by term (so GQA, SwiGLU, other FFN sizes, dropout off,
 *     fused attention and MoE layers change the terms they change):
 *     per layer, one micro-batch, 16-bit activations, MHA, FFN 4h:
 *       no parallelism       sbh (34 + 5as/h)
 *       TP t                 sbh (10 + 24/t + 5as/(ht))
 *       TP + SP              sbh/t (34 + 5as/h)
 *       selective recompute  the 5as/h terms dropped (fused attention too)
 *       full recompute       2sbh (the layer's input; / t under SP)
 *     times the micro-batches a stage holds at once: 1F1B's min(p - i, m) on
 *     stage i (Megatron's p on the first), interleaved 1F1B's warm-up chunks
 *     (Megatron's 1 + (p-1)/(pv) penalty on the first), m for
 *     all-forward-all-backward; plus the embedding's input on the first
 *     stage and the output layer and loss (4sbh(1 + V/h) / t) on the last.
 */
#ifndef DG_SIM_MEMORY_H
#define DG_SIM_MEMORY_H

#include "dg_grid.h"
#include "dg_train_config.h"

/* One stage's bytes per GPU, by part. */
typedef struct dg_sim_mem {
    double params, grads, optimizer, activations;
    double total;
    int stage; /* the pipeline stage */
} dg_sim_mem;

/* How a layer's activations are kept (Korthikanti et al.'s Table 2 rows). */
typedef enum dg_sim_recompute {
    DG_SIM_RECOMPUTE_NONE = 0,
    DG_SIM_RECOMPUTE_SELECTIVE, /* the core attention (softmax, its dropout) recomputed */
    DG_SIM_RECOMPUTE_FULL       /* only the layer's input kept */
} dg_sim_recompute;

/* Activation bytes one transformer layer of one micro-batch keeps on a rank
 * until its backward, for c's model (c->model: its sizes, dropouts,
 * attention_unfused; c->swiglu via model.mlp_gelu; bf16/fp16) at tensor
 * parallel size tp, context parallel size cp, with or without SP. `moe`:
 * the layer's MLP is the routed experts (expert tensor parallel size etp). */
double dg_sim_mem_layer_activations(const dg_train_config *c, int tp, int cp, int etp, int sp, int moe,
                                    dg_sim_recompute rc);

/* The recompute the flags ask for: --recompute-activations or
 * --recompute-granularity selective, full; NONE otherwise. */
dg_sim_recompute dg_sim_mem_recompute(const dg_train_config *c);

/* Every stage of a finished config c (dg_step_config) on grid sz: out[i]
 * for stage i (out has sz->pp entries). */
void dg_sim_memory_stages(const dg_train_config *c, const dg_grid_sizes *sz, dg_sim_mem *out);

/* The largest part of m: "parameters", "gradients", "optimizer state" or
 * "activations". */
const char *dg_sim_mem_biggest(const dg_sim_mem *m);

#endif /* DG_SIM_MEMORY_H */
