/* test_cuda_coverage.c — every compute op of the step graphs `dagatron train`
 * runs has a CUDA kernel (a CPU test: it reads the CUDA table, runs nothing).
 *
 * For each layout below it builds the whole step of each rank (every
 * micro-batch, backward, DP with its pack/unpack, the optimizer) with the
 * builder `dagatron train` and `dagatron dump --graph step --world-size N
 * --rank R` use (train/dg_step_opts.h), without MPI: a rank's graph depends
 * only on the sizes of its groups and its pipeline stage. Every node whose op
 * is not a collective (op->comm == DG_COMM_NONE) must have a kernel in the
 * CUDA table (dg_cuda_kernel_for); a layout fails listing each op that has
 * none, once, so the output reads as the list of kernels still to write.
 *
 * Registered whenever the CUDA sources are built (tests/cuda/CMakeLists.txt),
 * GPU or not: with the stub library every op would be missing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "dg_cuda_exec.h"
#include "dg_graph.h"
#include "dg_model.h"
#include "dg_pipeline.h"
#include "dg_step_build.h"
#include "dg_step_opts.h"
#include "dg_train_config.h"

/* The main job's MoE model without grouped-query attention, which MLA excludes. */
#define MLA_MOE                                                                                                \
    "--num-attention-heads 8 --swiglu "                                                                        \
    "--untie-embeddings-and-output-weights --normalization RMSNorm --position-embedding-type rope "             \
    "--disable-bias-linear --hidden-dropout 0.0 --attention-dropout 0.0 --num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 512 " \
    "--moe-aux-loss-coeff 1e-2 --moe-z-loss-coeff 1e-3 --micro-batch-size 4 --global-batch-size 8"
/* Every layout starts from `dagatron train`'s defaults (Megatron's dense GPT
 * at the main job's size: LayerNorm, GeLU, learned absolute positions,
 * biases, tied embeddings, dropout 0.1, clipping 1.0) on mock data. */
#define COMMON "--mock-data --vocab-size 1000"
/* The main job's MoE model, as scripts/run_main.sh trains it. */
#define MOE                                                                                                    \
    "--num-attention-heads 8 --group-query-attention --num-query-groups 4 --swiglu "                            \
    "--untie-embeddings-and-output-weights --normalization RMSNorm --position-embedding-type rope "             \
    "--disable-bias-linear --hidden-dropout 0.0 --attention-dropout 0.0 --num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 512 " \
    "--moe-aux-loss-coeff 1e-2 --moe-z-loss-coeff 1e-3 --micro-batch-size 4 --global-batch-size 8"

typedef struct layout {
    const char *name;
    int world;         /* ranks; every rank's step is checked (PP: both stages) */
    const char *flags; /* after COMMON */
} layout;

static const layout layouts[] = {
    {"dense", 1, ""},
    {"moe", 1, MOE},
    {"tp2+sp", 2, "--tensor-model-parallel-size 2 --sequence-parallel"},
    {"ep2", 2, MOE " --expert-model-parallel-size 2"},
    {"dp2+zero", 2, "--use-distributed-optimizer"},
    {"pp2 1f1b", 2, "--pipeline-model-parallel-size 2 --global-batch-size 16"},
    {"cp2", 2, "--context-parallel-size 2"},
    /* multi-latent attention with YaRN (issue 29), its heads split over tp */
    {"mla tp2", 2, MLA_MOE " --multi-latent-attention --q-lora-rank 64 --kv-lora-rank 32 --qk-head-dim 32 "
                   "--qk-pos-emb-head-dim 16 --v-head-dim 32 --qk-layernorm --rotary-scaling-factor 40 "
                   "--tensor-model-parallel-size 2 --sequence-parallel"},
};

/* dg_train_config_parse on "COMMON flags", split at spaces. */
static void parse(const layout *l, dg_train_config *c) {
    static char buf[2048];
    char *argv[128];
    int argc = 0;
    snprintf(buf, sizeof buf, "%s %s", COMMON, l->flags);
    argv[argc++] = "test_cuda_coverage";
    for (char *tok = strtok(buf, " "); tok && argc < 127; tok = strtok(NULL, " ")) argv[argc++] = tok;
    argv[argc] = NULL;
    dg_train_config_defaults(c);
    dg_err err = {{0}};
    if (dg_train_config_parse(c, argc, argv, 1, &err) != DG_OK) fail_msg("%s: %s", l->name, err.msg);
}

/* Rank `rank`'s step graph of layout l, as `dagatron train` builds it
 * (train/dg_step_build.h). */
static dg_graph *step_graph(const layout *l, int rank) {
    dg_train_config in, c;
    dg_grid_sizes sz;
    dg_err err = {{0}};
    parse(l, &in);
    if (dg_step_config(&in, l->world, &c, &sz, &err) != DG_OK) fail_msg("%s: %s", l->name, err.msg);
    dg_step_rank at;
    dg_step_rank_of(&sz, dg_grid_coord_of(&sz, rank).pp, &at);
    dg_step_built b;
    if (dg_step_build(&c, &at, NULL, &b, &err) != DG_OK) fail_msg("%s rank %d: %s", l->name, rank, err.msg);
    dg_graph *g = b.step.g;
    b.step.g = NULL;
    dg_step_built_free(&b);
    return g;
}

static int listed(const dg_op_def *const *ops, int n, const dg_op_def *op) {
    for (int i = 0; i < n; i++)
        if (ops[i] == op) return 1;
    return 0;
}

static void test_layout(void **state) {
    const layout *l = *state;
    const dg_op_def *missing[256];
    int n_missing = 0, n_checked = 0;
    for (int rank = 0; rank < l->world; rank++) {
        dg_graph *g = step_graph(l, rank);
        for (int i = 0; i < g->n_nodes; i++) {
            const dg_op_def *op = g->nodes[i].op;
            if (op->comm != DG_COMM_NONE) continue;
            n_checked++;
            if (!dg_cuda_kernel_for(op) && !listed(missing, n_missing, op) && n_missing < 256)
                missing[n_missing++] = op;
        }
        dg_graph_free(g);
    }
    assert_true(n_checked > 0);
    if (n_missing == 0) return;
    char names[4096] = "";
    for (int i = 0; i < n_missing; i++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? " " : "", missing[i]->name);
    fail_msg("%s: %d ops without a CUDA kernel: %s", l->name, n_missing, names);
}

int main(void) {
    struct CMUnitTest tests[DG_ARRAY_LEN(layouts)];
    for (size_t i = 0; i < DG_ARRAY_LEN(layouts); i++)
        tests[i] = (struct CMUnitTest){layouts[i].name, test_layout, NULL, NULL, (void *)&layouts[i]};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
