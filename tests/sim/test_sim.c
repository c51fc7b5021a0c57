/* test_sim.c — `dagatron simulate`'s core (sim/dg_sim.h), structural
 * properties that a wrong simulator breaks (no timing of this machine):
 *  1. a 1-rank step simulated on a device equal to the scheduler's default
 *     cost model ends when the plan's own simulation does;
 *  2. PP 2 with m micro-batches shows the 1F1B bubble (p-1)/(m+p-1);
 *  3. doubling a link's bandwidth never slows the step, and a slower link
 *     leaves more communication exposed;
 *  4. MFU is in (0, 1); the model FLOPs are Megatron's formula;
 *  5. the virtual trace has one process per stage with both streams, and
 *     calibrating from it gives back a profile that predicts the same step;
 *  6. bad input (a world that does not divide, an unknown profile, a
 *     malformed profile file) is DG_EINPUT with one line;
 *  7. --bf16 with TP and PP builds (graph/passes/dg_pass_pp.c used to put
 *     the rounded copy of a last-stage weight on stage 0 and send it, which
 *     TP's layouts refused), and no stage sends a weight's rounded copy. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dg_collective.h"
#include "dg_flops.h"
#include "dg_sim_internal.h"
#include "dg_step_opts.h"

static int failures;
#define CHECK(c)                                                                   \
    do {                                                                           \
        if (!(c)) {                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
            failures++;                                                            \
        }                                                                          \
    } while (0)

/* A small Mixtral-style model (tiny vocabulary: stages stay near equal). */
static void small_cfg(dg_train_config *c) {
    dg_train_config_defaults(c);
    c->mock_data = 1;
    c->null_vocab_size = 64;
    c->model.num_layers = 4;
    c->model.num_experts = 4;
    c->model.moe_router_topk = 2;
    c->swiglu = 1;
    c->disable_bias_linear = 1;
    snprintf(c->normalization, sizeof c->normalization, "RMSNorm");
    snprintf(c->position_embedding_type, sizeof c->position_embedding_type, "rope");
    c->model.untie_embeddings = 1;
    c->train_iters = 10;
    c->lr_decay_iters = 10;
    c->lr_warmup_iters = 0;
}

/* The device dg_prio.h's default cost model describes. */
static void default_model_device(dg_sim_device *d) {
    dg_sim_device_local_default(d);
    dg_cost_model m = dg_cost_model_default();
    d->peak_fp32 = d->peak_16 = m.flops_per_s;
    d->mem_bytes_per_s = m.mem_bytes_per_s;
    d->task_s = d->comm_task_s = m.task_s;
    for (int k = 0; k < DG_SIM_KIND_COUNT; k++) d->eff[k] = d->mem_eff[k] = 1;
}

static double run(const dg_train_config *c, const dg_sim_device *d, const char *links, int world,
                  dg_sim_result *r) {
    dg_link_spec s;
    memset(&s, 0, sizeof s);
    dg_err err = {{0}};
    if (links) CHECK(dg_link_spec_parse(links, "--emulate-link", &s, &err) == DG_OK);
    dg_sim_opts o = {.world_size = world, .quiet = 1};
    int st = dg_sim_run(c, d, &s, &o, r, &err);
    if (st != DG_OK) fprintf(stderr, "dg_sim_run: %s\n", err.msg);
    CHECK(st == DG_OK);
    return st == DG_OK ? r->step_s : NAN;
}

static void test_one_rank_equals_plan(void) {
    dg_train_config c;
    small_cfg(&c);
    c.model.num_experts = 0; /* dense: no EP, a world of one */
    dg_sim_device d;
    default_model_device(&d);
    dg_sim_result r;
    double step = run(&c, &d, NULL, 1, &r);
    dg_sim_result_free(&r);
    dg_train_config f;
    dg_grid_sizes sz;
    dg_err err = {{0}};
    CHECK(dg_step_config(&c, 1, &f, &sz, &err) == DG_OK);
    dg_sim_stage s;
    CHECK(dg_sim_build_stage(&f, &sz, 0, 1, NULL, &s, &err) == DG_OK);
    double span = 0;
    for (int v = 0; v < s.plan->n_nodes; v++) span = fmax(span, s.plan->sim_end[v]);
    CHECK(span > 0 && fabs(step - span) <= 1e-9 * span);
    if (!(fabs(step - span) <= 1e-9 * span)) fprintf(stderr, "simulated %.9g s, plan %.9g s\n", step, span);
    dg_sim_stage_free(&s);
}

static void test_pp_bubble(void) {
    dg_train_config c;
    small_cfg(&c);
    c.pipeline_model_parallel_size = 2;
    c.model.num_experts = 0;
    dg_sim_device d;
    dg_sim_device_local_default(&d);
    int ms[2] = {4, 8};
    for (int i = 0; i < 2; i++) {
        c.global_batch_size = ms[i] * c.model.micro_batch_size;
        dg_sim_result r;
        run(&c, &d, NULL, 2, &r);
        double ideal = 1.0 / (ms[i] + 1);
        CHECK(r.n_microbatches == ms[i] && r.n_ranks == 2);
        CHECK(fabs(r.bubble_frac - ideal) < 0.04);
        if (!(fabs(r.bubble_frac - ideal) < 0.04)) fprintf(stderr, "m %d: bubble %.3f, ideal %.3f\n", ms[i], r.bubble_frac, ideal);
        dg_sim_result_free(&r);
    }
    /* no pipeline: no bubble to speak of */
    c.pipeline_model_parallel_size = 1;
    c.global_batch_size = 4 * c.model.micro_batch_size;
    dg_sim_result r;
    run(&c, &d, NULL, 1, &r);
    CHECK(r.bubble_frac < 0.01);
    dg_sim_result_free(&r);
}

static void test_links_and_mfu(void) {
    dg_train_config c;
    small_cfg(&c);
    c.expert_model_parallel_size = 2;
    c.global_batch_size = 4 * c.model.micro_batch_size; /* 2 micro-batches per data shard */
    dg_sim_device d;
    dg_sim_device_local_default(&d);
    const char *specs[] = {"0.05,10", "0.1,10", "0.2,10", "0.4,10", "0.8,10", "100,10"};
    double prev = INFINITY, prev_exposed = INFINITY;
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
        dg_sim_result r;
        double step = run(&c, &d, specs[i], 2, &r);
        CHECK(step <= prev * (1 + 1e-12));
        CHECK(r.exposed_comm_s <= prev_exposed * (1 + 1e-12));
        CHECK(r.mfu > 0 && r.mfu < 1);
        CHECK(r.hidden_frac >= 0 && r.hidden_frac <= 1);
        dg_train_config f;
        dg_grid_sizes sz;
        dg_err err = {{0}};
        CHECK(dg_step_config(&c, 2, &f, &sz, &err) == DG_OK);
        CHECK(fabs(r.model_flops - dg_model_flops(&f.model, f.global_batch_size)) <= 1e-9 * r.model_flops);
        prev = step;
        prev_exposed = r.exposed_comm_s;
        dg_sim_result_free(&r);
    }
}

static void test_trace_and_calibration(void) {
    dg_train_config c;
    small_cfg(&c);
    c.pipeline_model_parallel_size = 2;
    c.global_batch_size = 4 * c.model.micro_batch_size;
    dg_sim_device d;
    dg_sim_device_local_default(&d);
    d.eff[DG_SIM_GEMM] = 0.4; /* something the fit must find */
    d.mem_eff[DG_SIM_ELEMWISE] = 0.2;
    const char *path = "test_sim_trace.json";
    dg_link_spec s;
    memset(&s, 0, sizeof s);
    dg_err err = {{0}};
    dg_sim_opts o = {.world_size = 2, .trace_path = path, .quiet = 1};
    dg_sim_result r;
    CHECK(dg_sim_run(&c, &d, &s, &o, &r, &err) == DG_OK);
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    if (!f) return;
    static char buf[1 << 24];
    buf[fread(buf, 1, sizeof buf - 1, f)] = 0;
    fclose(f);
    cJSON *root = cJSON_Parse(buf);
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(root, "traceEvents"), *e;
    int seen[2][2] = {{0}};
    cJSON_ArrayForEach(e, ev) {
        const cJSON *ph = cJSON_GetObjectItemCaseSensitive(e, "ph");
        int pid = cJSON_GetObjectItemCaseSensitive(e, "pid")->valueint;
        int tid = cJSON_GetObjectItemCaseSensitive(e, "tid")->valueint;
        if (cJSON_IsString(ph) && !strcmp(ph->valuestring, "X") && pid >= 0 && pid < 2 && tid >= 0 && tid < 2)
            seen[pid][tid]++;
    }
    cJSON_Delete(root);
    CHECK(seen[0][0] > 0 && seen[0][1] > 0 && seen[1][0] > 0 && seen[1][1] > 0);
    /* the virtual run as if it were a real one: the fit gives it back */
    dg_sim_device base, fitted;
    dg_sim_device_local_default(&base);
    CHECK(dg_sim_calibrate_from_trace(&c, 2, path, &base, &fitted, &err) == DG_OK);
    dg_sim_result r2;
    double step2 = run(&c, &fitted, NULL, 2, &r2);
    CHECK(fabs(step2 - r.step_s) < 0.05 * r.step_s);
    if (!(fabs(step2 - r.step_s) < 0.05 * r.step_s)) fprintf(stderr, "fitted %.4f s vs %.4f s\n", step2, r.step_s);
    dg_sim_result_free(&r);
    dg_sim_result_free(&r2);
    remove(path);
}

static void expect_einput(int st, const dg_err *err, const char *word) {
    CHECK(st == DG_EINPUT && strstr(err->msg, word) && !strchr(err->msg, '\n'));
    if (!(st == DG_EINPUT && strstr(err->msg, word))) fprintf(stderr, "got %d: %s\n", st, err->msg);
}

static void test_bad_input(void) {
    dg_train_config c;
    small_cfg(&c);
    c.expert_model_parallel_size = 2;
    dg_sim_device d;
    dg_sim_device_local_default(&d);
    dg_link_spec s;
    memset(&s, 0, sizeof s);
    dg_sim_opts o = {.world_size = 3, .quiet = 1};
    dg_sim_result r;
    dg_err err = {{0}};
    expect_einput(dg_sim_run(&c, &d, &s, &o, &r, &err), &err, "3");
    memset(&err, 0, sizeof err);
    expect_einput(dg_sim_device_load("nosuch", &d, &err), &err, "nosuch");
    FILE *f = fopen("test_sim_bad_profile.json", "w");
    CHECK(f != NULL);
    if (f) {
        fputs("{\"peak_fp32\": -1}", f);
        fclose(f);
    }
    memset(&err, 0, sizeof err);
    expect_einput(dg_sim_device_load("test_sim_bad_profile.json", &d, &err), &err, "peak_fp32");
    remove("test_sim_bad_profile.json");
}

/* Whether stage graph g sends a tensor computed from parameters alone. */
static int sends_a_weight(const dg_graph *g) {
    for (int v = 0; v < g->n_nodes; v++) {
        const dg_node *n = &g->nodes[v];
        if (n->op->comm != DG_COMM_SEND || n->group != DG_AXIS_PP) continue;
        int p = g->tensors[n->in[0]].producer;
        if (p < 0) continue;
        int params = 1;
        for (int k = 0; k < g->nodes[p].n_in; k++) params &= g->tensors[g->nodes[p].in[k]].role == DG_ROLE_PARAMETER;
        if (params) return 1;
    }
    return 0;
}

static void test_bf16_tp_pp(void) {
    for (int untie = 0; untie < 2; untie++) {
        dg_train_config c;
        small_cfg(&c);
        c.model.num_experts = 0;
        c.model.untie_embeddings = untie;
        c.compat.bf16 = 1;
        c.tensor_model_parallel_size = 2;
        c.pipeline_model_parallel_size = 2;
        dg_train_config f;
        dg_grid_sizes sz;
        dg_err err = {{0}};
        CHECK(dg_step_config(&c, 4, &f, &sz, &err) == DG_OK);
        for (int s = 0; s < 2; s++) {
            dg_sim_stage st;
            int ok = dg_sim_build_stage(&f, &sz, s, 0, NULL, &st, &err) == DG_OK;
            if (!ok) fprintf(stderr, "bf16 tp 2 pp 2 (untie %d) stage %d: %s\n", untie, s, err.msg);
            CHECK(ok);
            if (ok) CHECK(!sends_a_weight(st.g));
            if (ok) dg_sim_stage_free(&st);
        }
    }
}

int main(void) {
    test_one_rank_equals_plan();
    test_pp_bubble();
    test_links_and_mfu();
    test_trace_and_calibration();
    test_bad_input();
    test_bf16_tp_pp();
    if (failures) fprintf(stderr, "test_sim: %d failure(s)\n", failures);
    else printf("test_sim: ok\n");
    return failures ? 1 : 0;
}
