/* dg_step_opts.c — the step pipeline's options from the flags (see the header). */
#include "dg_step_opts.h"

#include <string.h>

#include "dg_cp.h"
#include "dg_dist.h"
#include "dg_feed.h"
#include "dg_grid_opts.h"
#include "dg_op_basic.h"
#include "dg_op_optim.h"
#include "dg_op_cast.h"
#include "dg_tokenizer.h"
#include "dg_train_pp.h"

/* The tokenizer's vocabulary when the config reads data (the default
 * corpus, --data-path) or names a tokenizer other than NullTokenizer (mock
 * data draws from its ids): the trainer sizes the model by it. Otherwise
 * dg_train_config_finish knows it from --vocab-size. */
static int data_vocab(const dg_train_config *c, int64_t *vocab, dg_err *err) {
    *vocab = 0;
    int other = c->tokenizer_type[0] && strcmp(c->tokenizer_type, DG_TOK_NULL_NAME);
    if (!other && (c->null_vocab_size > 0 || c->mock_data)) return DG_OK;
    dg_feed f;
    memset(&f, 0, sizeof f);
    int64_t want[3] = {1, 0, 0};
    DG_TRY(dg_feed_open(&f, c, want, err));
    *vocab = f.vocab;
    dg_feed_close(&f);
    return DG_OK;
}

int dg_step_config(const dg_train_config *in, int world, dg_train_config *c, dg_grid_sizes *sz, dg_err *err) {
    *c = *in;
    DG_TRY(dg_grid_opts_check(c, err));
    *sz = dg_grid_opts_sizes(c);
    if (world <= 0) world = DG_MAX(sz->tp, 1) * DG_MAX(sz->cp, 1) * DG_MAX(sz->ep, 1) * DG_MAX(sz->pp, 1);
    DG_TRY(dg_grid_sizes_check(world, sz, err));
    c->dp_size = sz->ep * sz->dp; /* data shards: EP is carved out of DP */
    int64_t vocab;
    DG_TRY(data_vocab(c, &vocab, err));
    return dg_train_config_finish(c, vocab, err);
}

void dg_step_groups(const dg_grid_sizes *sz, int group[DG_AXIS_COUNT], int *grad_shards) {
    for (int a = 0; a < DG_AXIS_COUNT; a++) group[a] = 1;
    group[DG_AXIS_TP] = sz->tp, group[DG_AXIS_CP] = sz->cp, group[DG_AXIS_EP] = sz->ep;
    group[DG_AXIS_DP] = sz->cp * sz->ep * sz->dp, group[DG_AXIS_PP] = sz->pp;
    group[DG_AXIS_EDP] = dg_grid_edp_size(sz);
    *grad_shards = sz->ep * sz->dp;
}

void dg_step_opts_init(dg_step_opts *s, const dg_train_config *c, const dg_model_io *lio,
                       const int group[DG_AXIS_COUNT], int grad_shards, int pp_stage) {
    memset(s, 0, sizeof *s);
    int dp_cp = group[DG_AXIS_DP], edp = group[DG_AXIS_EDP];
    /* Megatron's default bucket: max(40M, 1M x DP) elements. A world of one
     * has nothing to reduce: buckets are only a layout then. */
    int64_t bucket = c->ddp_bucket_size > 0 ? c->ddp_bucket_size : DG_MAX(40000000, 1000000 * (int64_t)dp_cp);
    s->dp = (dg_dp_opts){bucket, c->overlap_grad_reduce, c->use_distributed_optimizer, dp_cp, edp,
                         dg_dist_pack_op(), dp_cp == 1 && edp == 1, c->overlap_param_gather, dg_dist_unpack_op(),
                         c->compat.grad_reduce_in_bf16 ? &dg_op_cast : NULL};
    /* the optimizer stage (graph/passes/dg_pass_optim.h): the gradient norm,
     * clipping, the NaN/inf skip and AdamW as nodes over the DP buckets */
    for (int a = 0; a < DG_AXIS_COUNT; a++) s->optim.group_size[a] = group[a];
    s->optim.grad_scale = 1.0 / DG_MAX(grad_shards, 1);
    s->optim.clip_grad = c->clip_grad;
    s->optim.beta1 = c->adam_beta1;
    s->optim.beta2 = c->adam_beta2;
    s->optim.eps = c->adam_eps;
    s->optim.weight_decay = c->weight_decay;
    s->optim.ops = dg_optim_ops_get();
    dg_pipeline_opts *po = &s->po;
    *po = (dg_pipeline_opts){.loss = lio->loss, .n_microbatches = c->num_microbatches, .autodiff = dg_ops_autodiff(),
                             .scale = &dg_op_scale, .dp = &s->dp, .optim = &s->optim,
                             .stop_after = DG_STAGE_OPTIMIZER, .step_name = "train_step",
                             .tp = {c->tensor_model_parallel_size, c->sequence_parallel, c->tp_comm_overlap},
                             .cp = dg_train_cp_opts(c)};
    po->mb_overlap = c->overlap_moe_expert_parallel_comm;
    /* --bf16 / --fp16 (dg_pass_precision.h; fp16 with its loss scale) */
    s->precision = (dg_pass_precision_opts){c->compat.fp16 ? DG_F16 : DG_BF16, &dg_op_cast,
                                            c->compat.fp16 ? &dg_op_loss_scaling : NULL, -1};
    if (c->compat.bf16 || c->compat.fp16) po->precision = &s->precision;
    po->ep = (dg_pass_ep_opts){DG_MAX(c->model.expert_model_parallel_size, 1), c->model.moe_token_dispatcher_type,
                               DG_MAX(c->model.moe_a2a_overlap_chunks, 1), 0, c->expert_tensor_parallel_size};
    dg_train_pp_opts(c, pp_stage, &po->pp);
}
