/* dg_sim_plan_cost.c — `dagatron plan`'s analytical step time (the ranking
 * level of the search, dg_sim_plan.h). Every rate is the device profile's
 * (the constants `simulate` costs nodes with, docs/simulate.md); every
 * collective's time is dg_link_time on the link the simulator gives that
 * axis; the FLOPs are Megatron's formula's terms (train/dg_flops.h) and the
 * bytes Korthikanti et al.'s (sim/dg_sim_memory.h). It does not replace the
 * simulation: it orders thousands of layouts in milliseconds so the
 * simulator runs only the few best. */
#include <string.h>

#include "dg_flops.h"
#include "dg_model.h"
#include "dg_sim_internal.h"
#include "dg_sim_plan.h"

/* Virtual stages per pipeline rank of a finished config (1: none). */
static int chunks(const dg_train_config *c, int pp) {
    int v = c->num_virtual_stages_per_pipeline_rank;
    if (c->num_layers_per_virtual_pipeline_stage > 0 && pp > 1)
        v = c->model.num_layers / (pp * c->num_layers_per_virtual_pipeline_stage);
    return v > 1 ? v : 1;
}

/* Parameters (elements) on one GPU of the stage with the most bytes, and
 * that stage's memory, from the memory model. */
static double stage_params(const dg_train_config *c, const dg_grid_sizes *sz) {
    dg_sim_mem *m = dg_calloc((size_t)sz->pp, sizeof *m);
    dg_sim_memory_stages(c, sz, m);
    double pb = c->compat.bf16 || c->compat.fp16 ? 2 : 4, most = 0;
    for (int i = 0; i < sz->pp; i++) most = DG_MAX(most, m[i].params / pb);
    dg_free(m);
    return most;
}

/* The compute and communication of one layer, one micro-batch, one GPU. */
typedef struct layer_time {
    double compute, tp, cp, ep;
} layer_time;

static layer_time one_layer(const dg_train_config *c, const dg_grid_sizes *sz, const dg_sim_device *dev,
                            const dg_link links[DG_AXIS_COUNT], double peak) {
    const dg_model_config *m = &c->model;
    layer_time t = {0, 0, 0, 0};
    double b = m->micro_batch_size, s = m->seq_length, h = m->hidden_size, L = m->num_layers;
    double a = m->num_attention_heads > 0 ? m->num_attention_heads : 1, d = (double)dg_model_head_dim(m);
    double g = c->group_query_attention && m->num_query_groups > 0 ? m->num_query_groups : a;
    double e = c->compat.bf16 || c->compat.fp16 ? 2 : 4, V = m->vocab_size;
    double split = (double)sz->tp * sz->cp; /* TP and CP split a layer's work (EP x ETP the experts' alike) */
    int sp = c->sequence_parallel && sz->tp > 1, etp = sz->etp > 0 ? sz->etp : sz->tp;
    dg_sim_recompute rc = dg_sim_mem_recompute(c);
    /* Megatron's formula per micro-batch: the core attention 12 b s^2 L a d,
     * the output layer 6 b s h V, the projections and MLPs the rest */
    double all = dg_model_flops(m, b), att = m->multi_latent_attention ? 0 : 12 * b * s * s * L * a * d;
    double head = 6 * b * s * h * V, lin = all - att - head;
    double re_lin = rc == DG_SIM_RECOMPUTE_FULL ? 4.0 / 3 : 1, re_att = rc == DG_SIM_RECOMPUTE_NONE ? 1 : 4.0 / 3;
    int att_k = m->attention_unfused ? DG_SIM_GEMM : DG_SIM_ATTENTION;
    double t_att = att / L / split * re_att / (peak * dev->eff[att_k]);
    t.compute = lin / L / split * re_lin / (peak * dev->eff[DG_SIM_GEMM]) + t_att;
    /* element-wise work: written in the forward, read and written in the
     * backward; the average layer's activations (dense and MoE as they come) */
    double acts = 0;
    for (int l = 0; l < m->num_layers; l++)
        acts += dg_sim_mem_layer_activations(c, sz->tp, sz->cp, etp, sp, dg_model_layer_is_moe(m, l),
                                             DG_SIM_RECOMPUTE_NONE);
    acts /= L;
    t.compute += 3 * re_lin * acts / (dev->mem_bytes_per_s * dev->mem_eff[DG_SIM_ELEMWISE]);
    double x = s / sz->cp * b * h * e; /* one layer input, whole over TP */
    double passes = rc == DG_SIM_RECOMPUTE_FULL ? 3 : 2; /* forward, backward (+ the recompute) */
    if (sz->tp > 1) {
        /* two per pass: after attention and after the MLP (SP: an
         * all-gather before and a reduce-scatter after each) */
        double per = sp ? dg_link_time(&links[DG_AXIS_TP], DG_LINK_ALL_GATHER, sz->tp, x) +
                              dg_link_time(&links[DG_AXIS_TP], DG_LINK_REDUCE_SCATTER, sz->tp, x)
                        : 2 * dg_link_time(&links[DG_AXIS_TP], DG_LINK_ALL_REDUCE, sz->tp, x);
        t.tp = passes * (per + 2 * dev->comm_task_s);
    }
    if (sz->cp > 1) {
        /* the ring: cp - 1 steps of this rank's K and V, forward; twice that
         * backward (K, V and their gradients); hidden behind the attention
         * blocks it feeds up to their time */
        double kv = 2 * s / sz->cp * b * g * d * e / (sp ? sz->tp : 1);
        double ring = (sz->cp - 1) * (dg_link_time(&links[DG_AXIS_CP], DG_LINK_P2P, 2, kv) + dev->comm_task_s);
        t.cp = DG_MAX(0, 3 * ring - t_att);
    }
    if (sz->ep > 1 && m->num_experts > 0) {
        /* dispatch and combine each way, of every routed copy of this rank's
         * tokens; (ep - 1) / ep of them leave the rank; MoE layers only */
        double moe = 0;
        for (int l = 0; l < m->num_layers; l++) moe += dg_model_layer_is_moe(m, l);
        double k = m->moe_router_topk > 0 ? m->moe_router_topk : 1;
        double bytes = k * x / (sp ? sz->tp : 1) * (sz->ep - 1) / sz->ep;
        double one = dg_link_time(&links[DG_AXIS_EP], DG_LINK_ALL_TO_ALL, sz->ep, bytes) + dev->comm_task_s;
        t.ep = 2 * passes * one * moe / L;
    }
    return t;
}

double dg_sim_plan_estimate(const dg_train_config *c, const dg_grid_sizes *sz, const dg_sim_device *dev,
                            double *mfu) {
    const dg_model_config *m = &c->model;
    dg_link links[DG_AXIS_COUNT];
    dg_sim_axis_links(dev, NULL, sz, links);
    int bf16 = c->compat.bf16 || c->compat.fp16;
    double peak = bf16 ? dev->peak_16 : dev->peak_fp32, e = bf16 ? 2 : 4;
    double b = m->micro_batch_size, s = m->seq_length, h = m->hidden_size, V = m->vocab_size;
    double p = sz->pp, v = chunks(c, sz->pp), mb = c->num_microbatches > 0 ? c->num_microbatches : 1;
    int sp = c->sequence_parallel && sz->tp > 1;
    layer_time lt = one_layer(c, sz, dev, links, peak);
    double layers = (double)(m->num_layers + p - 1) / p; /* the fullest stage */
    double per_mb = layers * (lt.compute + lt.tp + lt.cp + lt.ep);
    if (p > 1) /* an activation out and a gradient in per chunk */
        per_mb += 2 * v * (dg_link_time(&links[DG_AXIS_PP], DG_LINK_P2P, 2, s / sz->cp * b * h * e / (sp ? sz->tp : 1)) +
                           dev->comm_task_s);
    /* the output layer and loss on the last stage, every micro-batch */
    double head = 6 * b * s * h * V / ((double)sz->tp * sz->cp) / (peak * dev->eff[DG_SIM_GEMM]);
    double step = (mb + (p - 1) / v) * per_mb + mb * head;
    /* data parallelism over the dense group (cp x ep x dp ranks) */
    double P = stage_params(c, sz), dp = (double)sz->cp * sz->ep * sz->dp;
    double gb = c->compat.fp16 || (c->compat.bf16 && c->compat.grad_reduce_in_bf16) ? 2 : 4;
    if (dp > 1) {
        const dg_link *l = &links[DG_AXIS_DP];
        double t = c->use_distributed_optimizer
                       ? dg_link_time(l, DG_LINK_REDUCE_SCATTER, (int)dp, gb * P) +
                             dg_link_time(l, DG_LINK_ALL_GATHER, (int)dp, e * P)
                       : dg_link_time(l, DG_LINK_ALL_REDUCE, (int)dp, gb * P);
        /* overlapped, it hides behind the last micro-batch's backward */
        if (c->overlap_grad_reduce) t = DG_MAX(0, t - 2.0 / 3 * layers * lt.compute);
        step += t;
    }
    /* AdamW over this rank's shard: grad, main param, two moments read; the
     * three written and the 16-bit copy (the gradient norm reads the grad) */
    double shard = c->use_distributed_optimizer ? P / dp : P;
    step += shard * 34 / (dev->mem_bytes_per_s * dev->mem_eff[DG_SIM_OPTIM]);
    double world = (double)sz->tp * sz->cp * sz->ep * sz->dp * sz->pp;
    if (mfu) *mfu = dg_model_flops(m, c->global_batch_size) / (step * world * peak);
    return step;
}
