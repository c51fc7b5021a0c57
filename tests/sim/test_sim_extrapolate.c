/* test_sim_extrapolate.c — issue 30 item 5: a step of many micro-batches
 * is simulated from two shorter runs, extrapolated (sim/dg_sim_run.c); its
 * step time, MFU, bubble and exposed comm stay within 1% of simulating
 * every micro-batch (dg_sim_run_mode's full = 1), and its nodes and FLOPs
 * are the full run's, on 1F1B, the interleaved schedule and MoE with EP
 * and DP (overlapped reduce). With the memory plan wanted, stages small
 * enough for it are planned as before: every micro-batch simulated, the
 * same figures. No timing of this machine. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dg_sim_internal.h"

static int failures;
#define CHECK(c)                                                                   \
    do {                                                                           \
        if (!(c)) {                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
            failures++;                                                            \
        }                                                                          \
    } while (0)

static void base_cfg(dg_train_config *c) {
    dg_train_config_defaults(c);
    c->mock_data = 1;
    c->null_vocab_size = 64;
    c->model.num_layers = 8;
    c->swiglu = 1;
    c->disable_bias_linear = 1;
    snprintf(c->normalization, sizeof c->normalization, "RMSNorm");
    snprintf(c->position_embedding_type, sizeof c->position_embedding_type, "rope");
    c->model.untie_embeddings = 1;
    c->train_iters = 10;
    c->lr_decay_iters = 10;
    c->lr_warmup_iters = 0;
}

static int near(double a, double b, double rel) { return fabs(a - b) <= rel * fmax(fabs(a), fabs(b)) + 1e-12; }

/* c on `world` ranks with m micro-batches: extrapolated against full. */
static void compare(const char *what, dg_train_config *c, int world, int m, int memory_plan) {
    c->global_batch_size = m * c->model.micro_batch_size * (world / (c->pipeline_model_parallel_size *
                                                                     c->tensor_model_parallel_size));
    dg_sim_device d;
    dg_sim_device_local_default(&d);
    dg_sim_opts o = {.world_size = world, .no_memory_plan = !memory_plan, .quiet = 1};
    dg_sim_result r[2];
    for (int full = 0; full < 2; full++) {
        dg_err err = {{0}};
        int st = dg_sim_run_mode(c, &d, NULL, &o, full, &r[full], &err);
        if (st != DG_OK) fprintf(stderr, "%s (full %d): %s\n", what, full, err.msg);
        CHECK(st == DG_OK);
        if (st != DG_OK) return;
    }
    dg_sim_result *x = &r[0], *f = &r[1];
    fprintf(stderr, "%s: m %d, step %.6g / %.6g s, MFU %.5f / %.5f, bubble %.5f / %.5f, exposed %.6g / %.6g s\n",
            what, x->n_microbatches, x->step_s, f->step_s, x->mfu, f->mfu, x->bubble_frac, f->bubble_frac,
            x->exposed_comm_s, f->exposed_comm_s);
    CHECK(x->n_microbatches == m && f->n_microbatches == m);
    CHECK(near(x->step_s, f->step_s, 0.01));
    CHECK(near(x->mfu, f->mfu, 0.01));
    CHECK(fabs(x->bubble_frac - f->bubble_frac) <= 0.01 * fmax(f->bubble_frac, 0.05));
    CHECK(near(x->exposed_comm_s, f->exposed_comm_s, 0.02) || fabs(x->exposed_comm_s - f->exposed_comm_s) <= 0.002 * f->step_s);
    CHECK(near(x->graph_flops, f->graph_flops, 1e-6));
    for (int i = 0; i < x->n_ranks; i++) {
        CHECK(x->rank[i].n_nodes == f->rank[i].n_nodes);
        CHECK(x->rank[i].memory_planned == memory_plan && f->rank[i].memory_planned == memory_plan);
        if (memory_plan) CHECK(x->rank[i].planned_bytes == f->rank[i].planned_bytes && x->rank[i].end_s == f->rank[i].end_s);
        CHECK(near(x->rank[i].persistent_bytes, f->rank[i].persistent_bytes, 1e-6));
    }
    dg_sim_result_free(&r[0]);
    dg_sim_result_free(&r[1]);
}

int main(void) {
    dg_train_config c;
    base_cfg(&c); /* 1F1B, 4 stages, tp 2 */
    c.pipeline_model_parallel_size = 4;
    c.tensor_model_parallel_size = 2;
    compare("1F1B pp 4 tp 2", &c, 8, 24, 0);
    compare("1F1B pp 4 tp 2, memory plan", &c, 8, 24, 1);
    base_cfg(&c); /* interleaved: 2 chunks per stage */
    c.pipeline_model_parallel_size = 4;
    c.num_layers_per_virtual_pipeline_stage = 1;
    compare("interleaved pp 4 vp 2", &c, 4, 32, 0);
    base_cfg(&c); /* MoE, EP 2 x DP, overlapped reduce and gather */
    c.model.num_experts = 4;
    c.model.moe_router_topk = 2;
    c.expert_model_parallel_size = 2;
    c.pipeline_model_parallel_size = 2;
    c.use_distributed_optimizer = 1;
    c.overlap_grad_reduce = 1;
    c.overlap_param_gather = 1;
    compare("MoE ep 2 pp 2, overlapped", &c, 4, 16, 0);
    if (failures) fprintf(stderr, "test_sim_extrapolate: %d failure(s)\n", failures);
    else printf("test_sim_extrapolate: ok\n");
    return failures ? 1 : 0;
}
