/* ep_test_model.c — the EP tests' model and data (see ep_test_model.h). */
#include "ep_test_model.h"

#include <string.h>

#include "dg_autodiff.h"
#include "dg_verify.h"
#include "dg_moe_loss.h"
#include "dg_ops.h"
#include "dg_router.h"

void ep_cfg_default(ep_cfg *c) {
    memset(c, 0, sizeof *c);
    c->B = 2;
    c->S = 16;
    c->H = 32;
    c->E = 8;
    c->k = 2;
    c->F = 48;
    c->V = 64;
    c->aux_coeff = 1e-2;
    c->z_coeff = 1e-3;
}

int ep_model_build(ep_model *m, const ep_cfg *c, const dg_ep_opts *o, dg_err *err) {
    memset(m, 0, sizeof *m);
    m->ep_rank = -1;
    dg_graph *g = m->g = dg_graph_new("ep_moe");
    int64_t B = c->B, S = c->S, H = c->H, T = B * S, E = c->E, F = c->F, V = c->V;
    m->tokens = dg_input_new(g, "tokens", DG_I32, 2, DG_SHAPE(B, S));
    m->targets = dg_input_new(g, "targets", DG_I32, 2, DG_SHAPE(B, S));
    m->mask = dg_input_new(g, "loss_mask", DG_F32, 2, DG_SHAPE(B, S));
    int emb = dg_param_new(g, "embedding.word_embeddings.weight", 2, DG_SHAPE(V, H));
    int x = dg_reshape(g, dg_embedding(g, emb, m->tokens), 2, DG_SHAPE(T, H));
    dg_graph_set_layer(g, 0);
    int nw = dg_param_new(g, "decoder.layers.0.pre_mlp_layernorm.weight", 1, DG_SHAPE(H));
    int h = dg_rmsnorm(g, x, nw, 1e-5);
    int wr = dg_param_new(g, "decoder.layers.0.mlp.router.weight", 2, DG_SHAPE(E, H));
    int w1 = dg_ep_expert_param(g, "decoder.layers.0.mlp.experts.linear_fc1.weight", E,
                                o->ep_size, 2 * F, H);
    int w2 = dg_ep_expert_param(g, "decoder.layers.0.mlp.experts.linear_fc2.weight", E,
                                o->ep_size, H, F);
    int logits = dg_linear(g, h, wr);
    dg_router_opts ro = dg_router_opts_default(c->k);
    ro.capacity_factor = c->capacity_factor;
    dg_router_out r;
    if (dg_moe_router(g, logits, &ro, &r) < 0) return dg_err_set(err, g->status, "%s", g->err.msg);
    m->counts = r.tokens_per_expert;
    m->aux = dg_moe_aux_loss(g, logits, r.tokens_per_expert, c->k, ro.score, c->aux_coeff);
    m->z = dg_moe_z_loss(g, logits, c->z_coeff);
    dg_ep_experts_args a = {.x = h, .probs = r.probs, .indices = r.indices, .w1 = w1, .w2 = w2,
                            .num_experts = (int)E, .capacity_factor = c->capacity_factor};
    int y = dg_ep_experts(g, o, &a);
    int x2 = dg_add(g, x, y);
    dg_graph_set_layer(g, -1);
    int fw = dg_param_new(g, "decoder.final_layernorm.weight", 1, DG_SHAPE(H));
    int wout = dg_param_new(g, "output_layer.weight", 2, DG_SHAPE(V, H));
    int lg = dg_reshape(g, dg_linear(g, dg_rmsnorm(g, x2, fw, 1e-5), wout), 3, DG_SHAPE(B, S, V));
    m->lm = dg_softmax_xent(g, lg, m->targets, m->mask, NULL);
    m->loss = dg_add(g, dg_add(g, m->lm, m->aux), m->z);
    if (g->status != DG_OK) return dg_err_set(err, g->status, "%s", g->err.msg);
    m->ep_rank = dg_ep_find_rank_input(g);
    DG_TRY(dg_autodiff(g, m->loss, dg_ops_autodiff(), NULL, err));
    return dg_verify_after(g, "EP block + autodiff", err);
}

#ifdef DG_EP_FULL_MODEL
#include "dg_model.h"
#include "dg_pipeline.h"

/* The logical model (which knows no EP size) through the step pipeline up
 * to its schedule stage: the EP pass lowers the experts for o. */
int ep_model_build_full(ep_model *m, ep_cfg *c, const dg_ep_opts *o, dg_err *err) {
    memset(m, 0, sizeof *m);
    dg_model_config mc;
    dg_model_config_tiny(&mc);
    mc.moe_capacity_factor = c->capacity_factor;
    c->B = mc.micro_batch_size, c->S = mc.seq_length, c->V = mc.vocab_size;
    c->E = mc.num_experts, c->k = mc.moe_router_topk;
    dg_graph *logical = dg_graph_new("ep_model");
    dg_model_io io;
    int st = dg_model_build_forward(logical, &mc, &io, err);
    dg_pipeline_opts po = {.loss = io.loss, .n_microbatches = 1, .autodiff = dg_ops_autodiff(),
                           .scale = &dg_op_scale, .stop_after = DG_STAGE_SCHEDULE,
                           .step_name = "ep_model"};
    po.ep = (dg_pass_ep_opts){o->ep_size, (int)o->dispatcher, o->chunks, o->recv_rows, 0};
    dg_pipeline_result r;
    if (st == DG_OK) st = dg_pipeline_run(logical, &po, &r, err);
    dg_graph_free(logical);
    if (st != DG_OK) return st;
    m->g = r.g;
    r.g = NULL;
    m->tokens = dg_pipeline_map(&r, 0, io.tokens), m->targets = dg_pipeline_map(&r, 0, io.targets);
    m->mask = dg_pipeline_map(&r, 0, io.loss_mask);
    m->loss = dg_pipeline_map(&r, 0, io.loss), m->lm = dg_pipeline_map(&r, 0, io.lm_loss);
    m->aux = dg_pipeline_map(&r, 0, io.aux_loss), m->z = dg_pipeline_map(&r, 0, io.z_loss);
    m->counts = dg_pipeline_map(&r, 0, io.tokens_per_expert[0]);
    m->ep_rank = dg_ep_find_rank_input(m->g);
    dg_pipeline_result_free(&r);
    return DG_OK;
}
#endif

static uint64_t mix(uint64_t s) {
    s ^= s >> 33;
    s *= 0xff51afd7ed558ccdull;
    s ^= s >> 33;
    s *= 0xc4ceb9fe1a85ec53ull;
    return s ^ (s >> 33);
}

static float unit(uint64_t s) { return (float)((mix(s) >> 40) & 0xffffff) / 16777216.0f - 0.5f; }

void ep_fill_param(const dg_graph *g, int t, int ep_rank, float *dst) {
    const dg_tensor *x = &g->tensors[t];
    uint64_t seed = 1469598103934665603ull;
    for (const char *p = x->name; *p; p++) seed = (seed ^ (uint64_t)(unsigned char)*p) * 1099511628211ull;
    int64_t n = dg_tensor_numel(x), off = x->sharding.split[0] == DG_AXIS_EP ? ep_rank * n : 0;
    float scale = strstr(x->name, "norm") ? 0.1f : strstr(x->name, "router") ? 2.0f : 0.3f;
    for (int64_t i = 0; i < n; i++) {
        float u = unit(seed + (uint64_t)(off + i));
        dst[i] = strstr(x->name, "norm") ? 1.0f + scale * u : scale * u;
    }
}

void ep_fill_batch(const ep_cfg *c, int mb, int32_t *tokens, int32_t *targets, float *mask) {
    int64_t n = (int64_t)c->B * c->S;
    for (int64_t i = 0; i < n; i++) {
        uint64_t s = mix(((uint64_t)mb << 32) + (uint64_t)i + 7);
        tokens[i] = (int32_t)(s % (uint64_t)c->V);
        targets[i] = (int32_t)((s >> 20) % (uint64_t)c->V);
        mask[i] = (i + mb) % 7 == 3 ? 0.0f : 1.0f;
    }
}
