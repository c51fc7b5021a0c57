/* test_sched_moe.c — acceptance 1 and 2 on the real two-layer MoE model
 * (moe/dg_model.c, forward + autodiff backward):
 *   1. loss and every gradient are bitwise identical with 1 and 2 compute
 *      workers and over 5 repeated runs, and equal to the serial reference;
 *   2. the planned peak is at most half the naive sum of activations (both
 *      printed) and the overlap validator passes.
 * Links the whole runtime (ops/, moe/), unlike the other sched tests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "dg_autodiff.h"
#include "dg_buffers.h"
#include "dg_cpu_gemm.h"
#include "dg_exec_serial.h"
#include "dg_ep_model.h"
#include "dg_model.h"
#include "dg_op_basic.h"
#include "dg_sched.h"

typedef struct moe {
    dg_graph *g;
    dg_model_config c;
    dg_model_io io;
    int keep[4], n_keep;
    int *outs; /* tensors compared: the losses, then every parameter gradient */
    int n_outs;
} moe;

static void build(moe *m) {
    memset(m, 0, sizeof *m);
    dg_model_config_tiny(&m->c);
    dg_err err = {{0}};
    if (dg_model_forward_local(&m->g, "moe", &m->c, NULL, &m->io, &err) != DG_OK ||
        dg_autodiff(m->g, m->io.loss, dg_ops_autodiff(), NULL, &err) != DG_OK)
        fail_msg("model: %s", err.msg);
    int ls[] = {m->io.loss, m->io.lm_loss, m->io.aux_loss, m->io.z_loss};
    m->outs = malloc(sizeof(int) * (size_t)m->g->n_tensors);
    for (int i = 0; i < 4; i++)
        if (ls[i] >= 0) m->keep[m->n_keep++] = ls[i], m->outs[m->n_outs++] = ls[i];
    for (int t = 0; t < m->g->n_tensors; t++)
        if (m->g->tensors[t].role == DG_ROLE_PARAMETER && m->g->tensors[t].grad >= 0)
            m->outs[m->n_outs++] = m->g->tensors[t].grad;
}

/* Deterministic parameters and batch, written through `ptr`. */
static void fill(const moe *m, void *(*ptr)(void *, int), void *ctx) {
    uint64_t s = 20261122;
    for (int t = 0; t < m->g->n_tensors; t++) {
        const dg_tensor *x = &m->g->tensors[t];
        if (x->role != DG_ROLE_PARAMETER) continue;
        float *p = ptr(ctx, t);
        for (int64_t i = 0; i < dg_tensor_numel(x); i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            float u = (float)((s >> 40) & 0xffffff) / 16777216.0f - 0.5f;
            p[i] = strstr(x->name, "norm") ? 1.0f + 0.1f * u : (strstr(x->name, "router") ? 1.0f : 0.16f) * u;
        }
    }
    int64_t n = (int64_t)m->c.micro_batch_size * m->c.seq_length;
    int32_t *tok = ptr(ctx, m->io.tokens), *tgt = ptr(ctx, m->io.targets);
    float *mask = ptr(ctx, m->io.loss_mask);
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        tok[i] = (int32_t)((s >> 33) % (uint64_t)m->c.vocab_size);
        tgt[i] = (int32_t)((s >> 13) % (uint64_t)m->c.vocab_size);
        mask[i] = i % 7 == 3 ? 0.0f : 1.0f;
    }
}

static void *rt_ptr(void *rt, int t) { return dg_runtime_ptr(rt, t); }
static void *buf_ptr(void *b, int t) { return ((dg_buffers *)b)->ptr[t]; }

static size_t outs_bytes(const moe *m) {
    size_t n = 0;
    for (int i = 0; i < m->n_outs; i++) n += dg_tensor_bytes(dg_Tc(m->g, m->outs[i]));
    return n;
}

static void gather(const moe *m, void *(*ptr)(void *, int), void *ctx, char *dst) {
    for (int i = 0; i < m->n_outs; i++) {
        size_t b = dg_tensor_bytes(dg_Tc(m->g, m->outs[i]));
        memcpy(dst, ptr(ctx, m->outs[i]), b);
        dst += b;
    }
}

/* Name the first differing output, for a readable failure. */
static void expect_equal(const moe *m, const char *a, const char *b, const char *what) {
    size_t o = 0;
    for (int i = 0; i < m->n_outs; i++) {
        size_t n = dg_tensor_bytes(dg_Tc(m->g, m->outs[i]));
        if (memcmp(a + o, b + o, n))
            fail_msg("%s: tensor %d '%s' differs", what, m->outs[i], m->g->tensors[m->outs[i]].name);
        o += n;
    }
}

static void run_sched(const moe *m, dg_sched_plan *p, int threads, int runs, char **out) {
    dg_err err = {{0}};
    dg_runtime_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.compute_threads = threads;
    dg_runtime *rt = dg_runtime_new(&ro, &err);
    assert_non_null(rt);
    assert_int_equal(dg_runtime_bind(rt, p, &err), DG_OK);
    fill(m, rt_ptr, rt);
    for (int r = 0; r < runs; r++) {
        dg_sched_stats st;
        if (dg_sched_run(p, rt, &st, &err) != DG_OK) fail_msg("run: %s", err.msg);
        if (r == 0) {
            char pre[32];
            snprintf(pre, sizeof pre, "%d worker(s): ", threads);
            dg_sched_stats_print(&st, stdout, pre);
        }
        gather(m, rt_ptr, rt, out[r]);
    }
    dg_runtime_free(rt);
}

static void test_moe_bitwise(void **state) {
    (void)state;
    moe m;
    build(&m);
    dg_err err = {{0}};
    dg_sched_opts o = {.keep = m.keep, .n_keep = m.n_keep};
    dg_sched_plan *p = dg_sched_plan_new(m.g, &o, &err);
    if (!p) fail_msg("plan: %s", err.msg);
    size_t nb = outs_bytes(&m);
    char *one[1] = {malloc(nb)}, *two[5];
    for (int r = 0; r < 5; r++) two[r] = malloc(nb);
    run_sched(&m, p, 1, 1, one);
    run_sched(&m, p, 2, 5, two);
    for (int r = 0; r < 5; r++) expect_equal(&m, one[0], two[r], "2 workers vs 1");
    run_sched(&m, p, 3, 1, two); /* more workers than cores */
    expect_equal(&m, one[0], two[0], "3 workers vs 1");
    printf("moe: %d nodes, %d compared tensors (loss %.9g), identical over 1/2 workers x 5 runs\n",
           m.g->n_nodes, m.n_outs, (double)*(float *)one[0]);

    /* and identical to the serial reference executor */
    dg_buffers b;
    dg_buffers_alloc(m.g, &b);
    fill(&m, buf_ptr, &b);
    if (dg_run_serial(m.g, NULL, &b, NULL, &err) != DG_OK) fail_msg("serial: %s", err.msg);
    char *ref = malloc(nb);
    gather(&m, buf_ptr, &b, ref);
    expect_equal(&m, ref, one[0], "scheduler vs serial reference");
    free(ref);
    dg_buffers_free(&b);
    free(one[0]);
    for (int r = 0; r < 5; r++) free(two[r]);
    dg_sched_plan_free(p);
    free(m.outs);
    dg_graph_free(m.g);
}

static void test_moe_memory_plan(void **state) {
    (void)state;
    moe m;
    build(&m);
    dg_err err = {{0}};
    dg_sched_opts o = {.keep = m.keep, .n_keep = m.n_keep};
    dg_sched_plan *p = dg_sched_plan_new(m.g, &o, &err);
    if (!p) fail_msg("plan: %s", err.msg);
    dg_sched_plan_print(p, stdout);
    printf("moe: planned peak %zu bytes, naive sum %zu bytes, %d memory edges\n", p->mem.arena_bytes,
           p->mem.naive_bytes, p->n_mem_edges);
    assert_int_equal(dg_memplan_validate(m.g, &p->mem, &err), DG_OK);
    assert_true(2 * p->mem.arena_bytes <= p->mem.naive_bytes);
    dg_sched_plan_free(p);
    free(m.outs);
    dg_graph_free(m.g);
}

/* argv[1]: "memplan" or "bitwise" runs one test (two ctest entries), none
 * runs both. */
int main(int argc, char **argv) {
    dg_cpu_init(); /* OpenBLAS single-threaded: the team owns the cores */
    const struct CMUnitTest memplan[] = {cmocka_unit_test(test_moe_memory_plan)};
    const struct CMUnitTest bitwise[] = {cmocka_unit_test(test_moe_bitwise)};
    int st = 0;
    if (argc < 2 || !strcmp(argv[1], "memplan")) st |= cmocka_run_group_tests(memplan, NULL, NULL);
    if (argc < 2 || !strcmp(argv[1], "bitwise")) st |= cmocka_run_group_tests(bitwise, NULL, NULL);
    return st;
}
