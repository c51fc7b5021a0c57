/* dg_sim_build.c — a rank's step graph and plan for any grid coordinate,
 * without MPI: the trainer's setup (train/dg_trainer.c) with the groups'
 * sizes taken from the grid's sizes instead of its comms. */
#include <stdlib.h>
#include <string.h>

#include "dg_autodiff.h"
#include "dg_cp.h"
#include "dg_dist.h"
#include "dg_feed.h"
#include "dg_model.h"
#include "dg_op_basic.h"
#include "dg_op_optim.h"
#include "dg_op_round16.h"
#include "dg_pipeline.h"
#include "dg_recompute.h"
#include "dg_sim_internal.h"
#include "dg_train_pp.h"

/* The tokenizer's vocabulary when the config reads data (the default
 * corpus, --data-path): the trainer sizes the model by it. */
static int data_vocab(const dg_train_config *c, int64_t *vocab, dg_err *err) {
    *vocab = 0;
    if (c->null_vocab_size > 0 || c->mock_data) return DG_OK;
    dg_feed f;
    memset(&f, 0, sizeof f);
    int64_t want[3] = {1, 0, 0};
    DG_TRY(dg_feed_open(&f, c, want, err));
    *vocab = f.vocab;
    dg_feed_close(&f);
    return DG_OK;
}

int dg_sim_config(const dg_train_config *in, int world, dg_train_config *c, dg_grid_sizes *sz, dg_err *err) {
    *c = *in;
    DG_TRY(dg_train_config_check_tp(c, err));
    DG_TRY(dg_train_config_check_cp(c, err));
    DG_TRY(dg_train_pp_check(c, err));
    *sz = (dg_grid_sizes){c->tensor_model_parallel_size, c->context_parallel_size, c->expert_model_parallel_size,
                          c->pipeline_model_parallel_size, 0, c->expert_tensor_parallel_size};
    if (world <= 0) world = DG_MAX(sz->tp, 1) * DG_MAX(sz->cp, 1) * DG_MAX(sz->ep, 1) * DG_MAX(sz->pp, 1);
    DG_TRY(dg_grid_sizes_check(world, sz, err));
    if (sz->cp > 1 && sz->pp > 1)
        return dg_err_set(err, DG_EINPUT,
                          "--context-parallel-size %d with --pipeline-model-parallel-size %d: not supported yet "
                          "(each works alone)", sz->cp, sz->pp);
    c->dp_size = sz->ep * sz->dp; /* data shards: EP is carved out of DP */
    int64_t vocab;
    DG_TRY(data_vocab(c, &vocab, err));
    return dg_train_config_finish(c, vocab, err);
}

/* The optimizer stage's options (as the trainer's optimizer_opts). */
static void optim_opts(const dg_train_config *c, const int group[DG_AXIS_COUNT], int grad_shards,
                       dg_optim_opts *oo) {
    memset(oo, 0, sizeof *oo);
    for (int a = 0; a < DG_AXIS_COUNT; a++) oo->group_size[a] = group[a];
    oo->grad_scale = 1.0 / grad_shards;
    oo->clip_grad = c->clip_grad;
    oo->beta1 = c->adam_beta1;
    oo->beta2 = c->adam_beta2;
    oo->eps = c->adam_eps;
    oo->weight_decay = c->weight_decay;
    oo->ops = dg_optim_ops_get();
}

/* What the trainer's loop reads after a step: the losses and the routers'
 * counts of every micro-batch (kept out of the memory plan's reuse). */
static int *keep_list(const dg_pipeline_result *r, const dg_model_io *lio, int n_mb, int *n_keep) {
    int *keep = dg_malloc(sizeof(int) * (size_t)((4 + DG_MODEL_MAX_TRACKED) * n_mb + 1)), n = 0;
    for (int mb = 0; mb < n_mb; mb++) {
        int wanted[4 + DG_MODEL_MAX_TRACKED] = {lio->lm_loss, lio->loss, lio->aux_loss, lio->z_loss};
        for (int l = 0; l < DG_MODEL_MAX_TRACKED; l++) wanted[4 + l] = lio->tokens_per_expert[l];
        for (int i = 0; i < 4 + DG_MODEL_MAX_TRACKED; i++) {
            int t = wanted[i] < 0 ? -1 : dg_pipeline_map(r, mb, wanted[i]);
            if (t >= 0) keep[n++] = t;
        }
    }
    if (r->optim.status >= 0) keep[n++] = r->optim.status;
    *n_keep = n;
    return keep;
}

int dg_sim_build_stage(const dg_train_config *c, const dg_grid_sizes *sz, int pp_stage, int memory_plan,
                       dg_sim_stage *out, dg_err *err) {
    memset(out, 0, sizeof *out);
    int group[DG_AXIS_COUNT];
    for (int a = 0; a < DG_AXIS_COUNT; a++) group[a] = 1;
    int dp_cp = sz->cp * sz->ep * sz->dp; /* the runtime's DP comm (dg_grid_runtime_groups) */
    group[DG_AXIS_TP] = sz->tp, group[DG_AXIS_CP] = sz->cp, group[DG_AXIS_EP] = sz->ep;
    group[DG_AXIS_DP] = dp_cp, group[DG_AXIS_PP] = sz->pp, group[DG_AXIS_EDP] = dg_grid_edp_size(sz);
    int edp = group[DG_AXIS_EDP];
    dg_graph *logical = dg_graph_new("logical");
    dg_model_io lio;
    int st = dg_model_build_forward(logical, &c->model, &lio, err);
    int64_t bucket = c->ddp_bucket_size > 0 ? c->ddp_bucket_size : DG_MAX(40000000, 1000000 * (int64_t)dp_cp);
    dg_dp_opts dpo = {bucket, c->overlap_grad_reduce, c->use_distributed_optimizer, dp_cp, edp,
                      dg_dist_pack_op(), dp_cp == 1 && edp == 1, c->overlap_param_gather, dg_dist_unpack_op()};
    dg_optim_opts oo;
    optim_opts(c, group, dp_cp / DG_MAX(sz->cp, 1), &oo);
    dg_pipeline_opts po = {.loss = lio.loss, .n_microbatches = c->num_microbatches, .autodiff = dg_ops_autodiff(),
                           .scale = &dg_op_scale, .dp = &dpo, .optim = &oo, .stop_after = DG_STAGE_OPTIMIZER,
                           .step_name = "train_step", .tp_size = c->tensor_model_parallel_size,
                           .cp = dg_train_cp_opts(c)};
    po.sequence_parallel = c->sequence_parallel;
    po.tp_comm_overlap = c->tp_comm_overlap;
    dg_pass_precision_opts prec = {c->compat.fp16 ? DG_ROUND16_FP16 : DG_ROUND16_BF16, &dg_op_round16,
                                   c->compat.fp16 ? &dg_op_loss_scaling : NULL, -1};
    if (c->compat.bf16 || c->compat.fp16) po.precision = &prec;
    po.ep = (dg_pass_ep_opts){DG_MAX(c->model.expert_model_parallel_size, 1), c->model.moe_token_dispatcher_type,
                              DG_MAX(c->model.moe_a2a_overlap_chunks, 1), 0, c->expert_tensor_parallel_size};
    dg_recompute_sel rc = {0};
    dg_recompute_report rcr;
    int rkeep[4] = {lio.lm_loss, lio.loss, lio.aux_loss, lio.z_loss}, n_rkeep = 0;
    for (int i = 0; i < 4; i++)
        if (rkeep[i] >= 0) rkeep[n_rkeep++] = rkeep[i];
    dg_recompute_step rs = {logical, &po, rkeep, n_rkeep};
    /* the flags' regions as they are; a memory budget needs the measured choice */
    if (st == DG_OK && !dg_recompute_select_flags(c, &rc)) {
        dg_recompute_sel_free(&rc);
        st = dg_recompute_plan(c, &rs, &rc, &rcr, err);
    }
    po.recompute = &rc.opts;
    dg_train_pp_opts(c, pp_stage, &po.pp);
    dg_pipeline_result r;
    if (st == DG_OK) st = dg_pipeline_run(logical, &po, &r, err);
    dg_recompute_sel_free(&rc);
    dg_graph_free(logical);
    if (st != DG_OK) return st;
    int n_keep;
    int *keep = keep_list(&r, &lio, c->num_microbatches, &n_keep);
    out->g = r.g;
    r.g = NULL;
    dg_pipeline_result_free(&r);
    /* The memory planner's placement is quadratic in the activations
     * (sched/dg_memplan.c): past a size the simulator plans without it and
     * reports the live-bytes peak, the placement's lower bound. */
    int plan_memory = memory_plan && out->g->n_nodes <= DG_SIM_MEMPLAN_MAX_NODES;
    dg_sched_opts so = {.keep = keep, .n_keep = n_keep, .no_memory_plan = !plan_memory};
    out->plan = dg_sched_plan_new(out->g, &so, err);
    dg_free(keep);
    if (!out->plan) {
        dg_sim_stage_free(out);
        return DG_EINTERNAL;
    }
    return DG_OK;
}

/* Lifetime boundary of an activation on the plan's timeline. */
typedef struct life {
    double t;
    double delta;
} life;

static int life_cmp(const void *pa, const void *pb) {
    const life *a = pa, *b = pb;
    if (a->t != b->t) return a->t < b->t ? -1 : 1;
    return (a->delta > b->delta) - (a->delta < b->delta); /* frees first */
}

double dg_sim_live_peak(const dg_sim_stage *s) {
    const dg_graph *g = s->g;
    const dg_sched_plan *p = s->plan;
    double horizon = 0, *last = dg_malloc(sizeof(double) * (size_t)DG_MAX(g->n_tensors, 1));
    for (int v = 0; v < g->n_nodes; v++) horizon = DG_MAX(horizon, p->sim_end[v]);
    for (int t = 0; t < g->n_tensors; t++) last[t] = -1;
    for (int v = 0; v < g->n_nodes; v++)
        for (int i = 0; i < g->nodes[v].n_in; i++) {
            int t = g->nodes[v].in[i];
            if (t >= 0 && t < g->n_tensors) last[t] = DG_MAX(last[t], p->sim_end[v]);
        }
    life *ev = dg_malloc(sizeof *ev * (size_t)DG_MAX(2 * g->n_tensors, 1));
    int n = 0;
    for (int t = 0; t < g->n_tensors; t++) {
        const dg_tensor *x = &g->tensors[t];
        if (x->role != DG_ROLE_ACTIVATION || x->producer < 0) continue;
        double b = (double)dg_tensor_bytes(x);
        ev[n++] = (life){p->sim_start[x->producer], b};
        ev[n++] = (life){last[t] < 0 ? horizon : last[t], -b};
    }
    qsort(ev, (size_t)n, sizeof *ev, life_cmp);
    double live = 0, peak = 0;
    for (int i = 0; i < n; i++) peak = DG_MAX(peak, live += ev[i].delta);
    dg_free(ev);
    dg_free(last);
    return peak;
}

void dg_sim_stage_free(dg_sim_stage *s) {
    dg_sched_plan_free(s->plan);
    if (s->g) dg_graph_free(s->g);
    memset(s, 0, sizeof *s);
}
