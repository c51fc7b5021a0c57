/* test_sim_memory.c — the simulator's memory model (sim/dg_sim_memory.h,
 * issue 30 item 3) against the published formulas it claims, each written
 * here in its closed form (the model computes term by term):
 *  1. Korthikanti et al. 2022 (arXiv:2205.05198), Table 2: activations of
 *     one layer for the paper's four models (Table 3: 22B, 175B, 530B, 1T;
 *     s 2048, b 1, t 8), every row (no parallelism, TP, TP + SP, TP +
 *     selective, TP + SP + selective, full recompute), within 10%;
 *  2. the paper's first pipeline stage (Section 4.2.3): p micro-batches of
 *     L/p layers each, sbhL (34/t) with SP and selective recompute, for the
 *     same four at their published TP x PP, within 10%;
 *  3. Megatron's theoretical_memory_usage.py (megatron/training/): weights
 *     and optimizer at 18 bytes/param, or 6 + 12/d with the distributed
 *     optimizer (dense and MoE: experts over the expert-data-parallel size),
 *     and its activation formulas (interleaved 1F1B's penalty too), within
 *     10%;
 *  4. the published configurations (sim/dg_sim_published.c) fit their
 *     devices; GPT-3 175B at TP 1 x PP 1 on one A100 80GB is refused by
 *     dg_sim_run with "does not fit", before any graph is built;
 *  5. the vendor profiles' capacities (datasheets). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dg_sim.h"
#include "dg_sim_published.h"
#include "dg_step_opts.h"

static int failures;
#define CHECK(c)                                                                   \
    do {                                                                           \
        if (!(c)) {                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
            failures++;                                                            \
        }                                                                          \
    } while (0)

static void check_near(const char *what, double got, double want, double tol) {
    double r = got / want;
    fprintf(stderr, "  %-58s model %12.5g  formula %12.5g  ratio %.4f\n", what, got, want, r);
    if (!(fabs(r - 1) <= tol)) {
        fprintf(stderr, "  ^ outside ±%.0f%%\n", 100 * tol);
        failures++;
    }
}

/* Flags (space-separated) into a finished config on `world` ranks. */
static int config(const char *flags, int world, dg_train_config *c, dg_grid_sizes *sz) {
    char buf[2048];
    snprintf(buf, sizeof buf, "%s", flags);
    char *argv[128];
    int argc = 0;
    argv[argc++] = (char *)"simulate";
    for (char *p = strtok(buf, " "); p && argc < 127; p = strtok(NULL, " ")) argv[argc++] = p;
    argv[argc] = NULL;
    dg_train_config in;
    dg_train_config_defaults(&in);
    dg_err err = {{0}};
    int st = dg_train_config_parse(&in, argc, argv, 1, &err);
    if (st == DG_OK) st = dg_step_config(&in, world, c, sz, &err);
    if (st != DG_OK) fprintf(stderr, "config '%s': %s\n", flags, err.msg);
    CHECK(st == DG_OK);
    return st;
}

/* The paper's models (Table 3). */
static const struct {
    const char *name;
    int a, h, L, p;
} PAPER[] = {{"22B", 64, 6144, 48, 1}, {"175B", 96, 12288, 96, 8}, {"530B", 128, 20480, 105, 35},
             {"1T", 160, 25600, 128, 64}};

/* The paper's GPT: GeLU MLP of 4h, MHA, dropouts, its attention unfused, bf16. */
#define PAPER_FLAGS                                                                                     \
    "--seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 1 --mock-data --vocab-size 50256 " \
    "--bf16 --normalization LayerNorm --position-embedding-type learned_absolute --attention-backend local " \
    "--attention-dropout 0.1 --hidden-dropout 0.1 "

static void test_table2(void) {
    fprintf(stderr, "Korthikanti et al. 2022, Table 2 (bytes per layer, one micro-batch):\n");
    for (size_t i = 0; i < sizeof PAPER / sizeof PAPER[0]; i++) {
        char flags[1024];
        snprintf(flags, sizeof flags, PAPER_FLAGS "--num-layers %d --hidden-size %d --num-attention-heads %d "
                                                  "--tensor-model-parallel-size 8",
                 PAPER[i].L, PAPER[i].h, PAPER[i].a);
        dg_train_config c;
        dg_grid_sizes sz;
        if (config(flags, 8, &c, &sz) != DG_OK) continue;
        double s = 2048, b = 1, h = PAPER[i].h, a = PAPER[i].a, t = 8, sbh = s * b * h, q = 5 * a * s / h;
        char what[128];
#define ROW(label, tp, sp, rc, want)                                                                    \
    do {                                                                                                \
        snprintf(what, sizeof what, "%s %s", PAPER[i].name, label);                                     \
        check_near(what, dg_sim_mem_layer_activations(&c, tp, 1, tp, sp, 0, rc), want, 0.10);          \
    } while (0)
        ROW("no parallelism sbh(34 + 5as/h)", 1, 0, DG_SIM_RECOMPUTE_NONE, sbh * (34 + q));
        ROW("TP sbh(10 + 24/t + 5as/ht)", 8, 0, DG_SIM_RECOMPUTE_NONE, sbh * (10 + 24 / t + q / t));
        ROW("TP+SP sbh(34/t + 5as/ht)", 8, 1, DG_SIM_RECOMPUTE_NONE, sbh * (34 / t + q / t));
        ROW("TP+selective sbh(10 + 24/t)", 8, 0, DG_SIM_RECOMPUTE_SELECTIVE, sbh * (10 + 24 / t));
        ROW("TP+SP+selective sbh(34/t)", 8, 1, DG_SIM_RECOMPUTE_SELECTIVE, sbh * 34 / t);
        ROW("full recompute 2sbh", 8, 0, DG_SIM_RECOMPUTE_FULL, 2 * sbh);
#undef ROW
    }
}

/* Section 4.2.3: the first stage keeps p micro-batches of L/p layers. */
static void test_first_stage(void) {
    fprintf(stderr, "the first pipeline stage, TP 8 + SP + selective (bytes):\n");
    for (size_t i = 0; i < sizeof PAPER / sizeof PAPER[0]; i++) {
        char flags[1024];
        snprintf(flags, sizeof flags, PAPER_FLAGS "--num-layers %d --hidden-size %d --num-attention-heads %d "
                                                  "--tensor-model-parallel-size 8 --pipeline-model-parallel-size %d "
                                                  "--sequence-parallel --recompute-activations --global-batch-size %d",
                 PAPER[i].L, PAPER[i].h, PAPER[i].a, PAPER[i].p, 8 * PAPER[i].p);
        dg_train_config c;
        dg_grid_sizes sz;
        if (config(flags, 8 * PAPER[i].p, &c, &sz) != DG_OK) continue;
        dg_sim_mem m[64];
        dg_sim_memory_stages(&c, &sz, m);
        char what[128];
        snprintf(what, sizeof what, "%s TP8 PP%d stage 0: sbhL(34/t)", PAPER[i].name, PAPER[i].p);
        check_near(what, m[0].activations, 2048.0 * PAPER[i].h * PAPER[i].L * 34 / 8, 0.10);
        /* and the last stage holds one micro-batch in flight: far less */
        if (PAPER[i].p > 1) CHECK(m[PAPER[i].p - 1].activations < 0.25 * m[0].activations);
    }
}

/* Megatron's theoretical_memory_usage.py, its closed forms: the most loaded
 * shard (stage 0: its layers and the embedding) and the first stage's
 * activations. `glu` 1.5 for SwiGLU; E experts (0: dense) of ffn fm. */
typedef struct mg {
    double h, a, g, F, V, L, s, b, t, p, d, E, fm, topk, ep, world, glu, norm;
    int dist, untie;
} mg;

static double mg_weights(const mg *x) {
    double attn = 2 * x->h * x->h * (1 + x->g / x->a), dense_mlp = 2 * x->h * x->F * x->glu;
    double ln = 2 * x->h * x->norm, routed = 2 * x->h * x->fm * x->E * x->glu, router = x->h * x->E;
    double tp_sh = x->E > 0 ? attn * x->L : (attn + dense_mlp) * x->L;
    double rep = (ln + (x->E > 0 ? router : 0)) * x->L + x->norm * x->h;
    double ex = x->E > 0 ? routed * x->L : 0;
    double ep = x->ep > 0 ? x->ep : 1;
    double tp_most = (tp_sh / x->p + x->V * x->h) / x->t, rep_most = rep / x->p, ex_most = ex / x->p / (x->t * ep);
    if (x->untie && x->p == 1) tp_most += x->V * x->h / x->t;
    double dp = x->world / (x->t * x->p), edp = x->world / (x->t * ep * x->p);
    double bpp = x->dist ? 6 + 12 / dp : 18, ebpp = x->dist ? 6 + 12 / edp : 18;
    return (tp_most + rep_most) * bpp + ex_most * ebpp;
}

/* compute_activation_memory (SP + selective), non-interleaved, m >= p. */
static double mg_act_sp(const mg *x) {
    double a = x->s * x->b * x->h * (18 + 4 * x->F / x->h) * x->L;
    a += 8 * x->s * x->b * x->p + x->s * x->b * x->h * x->p;
    if (x->p == 1) a += x->s * x->b * x->h * 4 * (1 + x->V / x->h);
    return a / x->t;
}

/* compute_activation_memory_without_sp (selective: no 5as/h term), pp 1. */
static double mg_act_nosp(const mg *x) {
    double a = x->s * x->b * x->h * (10 + 24 / x->t) * x->L + 8 * x->s * x->b * x->p + x->s * x->b * x->h * x->p;
    a += (x->s * x->b * x->V / x->t + x->s * x->b * x->h) * 2;
    return a * 1.05;
}

static void stage0(const char *flags, int world, dg_sim_mem *out) {
    dg_train_config c;
    dg_grid_sizes sz;
    memset(out, 0, sizeof *out);
    if (config(flags, world, &c, &sz) != DG_OK) return;
    dg_sim_mem m[64];
    dg_sim_memory_stages(&c, &sz, m);
    *out = m[0];
}

/* The closed forms above are Megatron's own: its file (megatron/training/
 * theoretical_memory_usage.py, NVIDIA/Megatron-LM main, 2026) run on these
 * four configurations gave these bytes, which the forms must give too. */
static void test_oracle_is_megatron(const mg *g175, const mg *g17, const mg *mix) {
    mg nodist = *g175;
    nodist.dist = 0;
    CHECK(fabs(mg_weights(g175) / 20978588160.0 - 1) < 1e-9);
    CHECK(fabs(mg_act_sp(g175) / 10292838400.0 - 1) < 1e-9);
    CHECK(fabs(mg_weights(&nodist) / 50348611584.0 - 1) < 1e-9);
    CHECK(fabs(mg_weights(g17) / 29609100288.0 - 1) < 1e-9);
    CHECK(fabs(mg_act_nosp(g17) / 4274117836.8 - 1) < 1e-9);
    CHECK(fabs(mg_weights(mix) / 20063312640.0 - 1) < 1e-9);
}

static void test_megatron(void) {
    fprintf(stderr, "Megatron's theoretical_memory_usage.py (bytes per GPU, the most loaded stage):\n");
    dg_sim_mem m;
    /* GPT-3 175B, TP 8 x PP 8 x DP 8, SP + selective, distributed optimizer */
    stage0(PAPER_FLAGS "--num-layers 96 --hidden-size 12288 --num-attention-heads 96 --tensor-model-parallel-size 8 "
                       "--pipeline-model-parallel-size 8 --sequence-parallel --recompute-activations "
                       "--use-distributed-optimizer --global-batch-size 512",
           512, &m);
    mg g175 = {.h = 12288, .a = 96, .g = 96, .F = 4 * 12288, .V = 51200, .L = 96, .s = 2048, .b = 1, .t = 8, .p = 8,
               .world = 512, .glu = 1, .norm = 2, .dist = 1};
    check_near("GPT 175B TP8 PP8 DP8 dist-opt: weights + optimizer", m.params + m.grads + m.optimizer,
               mg_weights(&g175), 0.10);
    check_near("GPT 175B TP8 PP8 SP + selective: activations", m.activations, mg_act_sp(&g175), 0.10);
    /* interleaved 1F1B (VP 4: 3 layers a chunk): Megatron's penalty
     * 1 + (p - 1)/(pv) on the first stage's activations */
    dg_sim_mem vp;
    stage0(PAPER_FLAGS "--num-layers 96 --hidden-size 12288 --num-attention-heads 96 --tensor-model-parallel-size 8 "
                       "--pipeline-model-parallel-size 8 --sequence-parallel --recompute-activations "
                       "--num-layers-per-virtual-pipeline-stage 3 --global-batch-size 512",
           512, &vp);
    check_near("GPT 175B TP8 PP8 VP4: activations x (1 + (p-1)/(pv))", vp.activations,
               mg_act_sp(&g175) * (1 + 7.0 / 32), 0.10);
    /* the same without the distributed optimizer: 18 bytes a parameter */
    stage0(PAPER_FLAGS "--num-layers 96 --hidden-size 12288 --num-attention-heads 96 --tensor-model-parallel-size 8 "
                       "--pipeline-model-parallel-size 8 --sequence-parallel --recompute-activations "
                       "--global-batch-size 512",
           512, &m);
    g175.dist = 0;
    check_near("GPT 175B TP8 PP8 DP8: weights + optimizer (18 B/param)", m.params + m.grads + m.optimizer,
               mg_weights(&g175), 0.10);
    /* the 1.7B model, TP 1 x PP 1, selective recompute, no SP */
    stage0(PAPER_FLAGS "--num-layers 24 --hidden-size 2304 --num-attention-heads 24 --recompute-activations "
                       "--global-batch-size 8",
           1, &m);
    mg g17 = {.h = 2304, .a = 24, .g = 24, .F = 4 * 2304, .V = 50304, .L = 24, .s = 2048, .b = 1, .t = 1, .p = 1,
              .world = 1, .glu = 1, .norm = 2};
    check_near("GPT 1.7B TP1 PP1: weights + optimizer", m.params + m.grads + m.optimizer, mg_weights(&g17), 0.10);
    check_near("GPT 1.7B TP1 PP1 selective: activations (without SP)", m.activations, mg_act_nosp(&g17), 0.10);
    /* Mixtral 8x7B, TP 1 x EP 8 x PP 4, 64 GPUs, distributed optimizer:
     * dense parts over DP 16, experts over expert-DP 2 */
    stage0("--num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 "
           "--group-query-attention --num-query-groups 8 --seq-length 4096 --max-position-embeddings 32768 "
           "--position-embedding-type rope --swiglu --normalization RMSNorm --disable-bias-linear "
           "--untie-embeddings-and-output-weights --num-experts 8 --moe-router-topk 2 --mock-data --vocab-size 31999 "
           "--bf16 --micro-batch-size 1 --global-batch-size 256 --expert-model-parallel-size 8 "
           "--pipeline-model-parallel-size 4 --use-distributed-optimizer",
           64, &m);
    mg mix = {.h = 4096, .a = 32, .g = 8, .F = 14336, .V = 32000, .L = 32, .s = 4096, .b = 1, .t = 1, .p = 4,
              .E = 8, .fm = 14336, .topk = 2, .ep = 8, .world = 64, .glu = 1.5, .norm = 1, .dist = 1, .untie = 1};
    check_near("Mixtral 8x7B EP8 PP4 dist-opt: weights + optimizer", m.params + m.grads + m.optimizer,
               mg_weights(&mix), 0.10);
    g175.dist = 1;
    test_oracle_is_megatron(&g175, &g17, &mix);
}

/* The published configurations fit their devices (`simulate --table
 * published` simulates them), and a 175B model on one A100 does not. */
static void test_fit(void) {
    int n;
    const dg_sim_published_row *rows = dg_sim_published_rows(&n);
    for (int i = 0; i < n; i++) {
        dg_train_config c;
        dg_grid_sizes sz;
        if (config(rows[i].flags, rows[i].world, &c, &sz) != DG_OK) continue;
        dg_sim_mem *m = dg_calloc((size_t)sz.pp, sizeof *m);
        dg_sim_memory_stages(&c, &sz, m);
        double worst = 0;
        for (int k = 0; k < sz.pp; k++) worst = fmax(worst, m[k].total);
        dg_free(m);
        dg_sim_device d;
        dg_err err = {{0}};
        CHECK(dg_sim_device_load(rows[i].device, &d, &err) == DG_OK);
        fprintf(stderr, "published %-13s needs %6.1f GB of %6.1f GB per GPU\n", rows[i].model, worst / 1e9,
                d.mem_capacity_bytes / 1e9);
        CHECK(worst > 0.2 * d.mem_capacity_bytes && worst <= d.mem_capacity_bytes);
    }
    dg_train_config in;
    dg_train_config_defaults(&in);
    char flags[] = PAPER_FLAGS "--num-layers 96 --hidden-size 12288 --num-attention-heads 96 --global-batch-size 8";
    char *argv[64];
    int argc = 0;
    argv[argc++] = (char *)"simulate";
    for (char *p = strtok(flags, " "); p; p = strtok(NULL, " ")) argv[argc++] = p;
    dg_err err = {{0}};
    CHECK(dg_train_config_parse(&in, argc, argv, 1, &err) == DG_OK);
    dg_sim_device d;
    CHECK(dg_sim_device_load("a100", &d, &err) == DG_OK);
    dg_sim_opts o = {.world_size = 1, .quiet = 1};
    dg_sim_result r;
    double t0 = dg_now();
    int st = dg_sim_run(&in, &d, NULL, &o, &r, &err);
    fprintf(stderr, "175B TP1 PP1 on a100: %s (%.2f s)\n", err.msg, dg_now() - t0);
    CHECK(st == DG_EINPUT);
    CHECK(strstr(err.msg, "does not fit: needs") && strstr(err.msg, "of 80.0 GB per GPU") &&
          strstr(err.msg, "optimizer state") && !strchr(err.msg, '\n'));
    CHECK(dg_now() - t0 < 5); /* refused before building 96 layers' graphs */
    if (st == DG_OK) dg_sim_result_free(&r);
}

/* Datasheet capacities (10^9 bytes), and this machine's memory for local. */
static void test_capacities(void) {
    static const struct {
        const char *name;
        double gb;
    } want[] = {{"a100", 80}, {"a100-80gb", 80}, {"a100-40gb", 40}, {"h100", 80}, {"h200", 141}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        dg_sim_device d;
        dg_err err = {{0}};
        CHECK(dg_sim_device_load(want[i].name, &d, &err) == DG_OK);
        CHECK(d.mem_capacity_bytes == want[i].gb * 1e9 && !d.mem_per_node);
    }
    dg_sim_device d;
    dg_sim_device_local_default(&d);
    CHECK(d.mem_capacity_bytes > 1e8 && d.mem_per_node == 1);
}

int main(void) {
    test_table2();
    test_first_stage();
    test_megatron();
    test_fit();
    test_capacities();
    if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
