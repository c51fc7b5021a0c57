/* test_cp_ring.c — ring attention's op chain (parallel/cp/dg_op_ring_attn.h) with
 * the ring emulated in one graph: rank r's step s reads rank r-s's local
 * K/V leaves where the real ring reads what it received, so the chain of
 * blocks and lse merges is the one each rank runs, without communication.
 *
 *  - values: for cp = 1, 2, 3, 4 and MHA / GQA, every rank's o and lse
 *    equal causal attention over the whole sequence (the attention op) at
 *    that rank's chunks (r and 2cp-1-r): within 2e-5 + 2e-4 |ref|;
 *  - finite differences through dg_autodiff of the sum of every rank's
 *    output, with respect to every rank's local q, k and v (dg_gradcheck's
 *    default tolerances): the block's adjoint in each mode (diagonal,
 *    lower, upper) and the merge's adjoint, with K/V gradients flowing
 *    across ranks as the ring's backward carries them;
 *  - the backward the ring runs (cp_ring_attn_out's adjoint): each block's
 *    cp_attn_block_bwd from the final o and lse, summed over the steps for
 *    dq and over the ranks that held a K/V chunk for its dk, dv, equals
 *    autodiff through the merges (just checked against finite differences),
 *    with gradients entering through o and through lse: within 1e-5 + 1e-4
 *    |ref|;
 *  - all three again with windows (issue 29: the blocks then run per
 *    chunk pair, kernels/cpu/dg_cpu_ring_attn.h), against windowed
 *    attention over the whole sequence;
 *  - the merge alone: a row whose second part is empty (lse -inf) passes
 *    the first through, and both -inf gives o = 0, lse = -inf.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "dg_cpu_gemm.h"
#include "dg_cpu_ring_attn.h"
#include "dg_exec_serial.h"
#include "dg_gradcheck.h"
#include "dg_layout.h"
#include "dg_op_attention.h"
#include "dg_op_basic.h"
#include "dg_op_ring_attn.h"
#include "dg_pass_cp.h"
#include "dg_autodiff.h"

typedef struct ring_case {
    int cp;
    int64_t B, c, Hq, Hkv, D; /* c: tokens per chunk */
    int64_t window;           /* 0: none; W: each query sees the W keys up to its own */
} ring_case;

#define MAX_CP 4

typedef struct ring_graph {
    int q[MAX_CP], k[MAX_CP], v[MAX_CP], rank[MAX_CP]; /* leaves per rank */
    int o[MAX_CP], lse[MAX_CP];
} ring_graph;

static int add_block(dg_graph *g, const ring_case *c, int q, int k, int v, int rank, int step, int *lse) {
    dg_attrs a;
    memset(&a, 0, sizeof a);
    a.i[0] = c->cp;
    a.i[1] = step;
    a.i[2] = c->window;
    a.f[0] = 1.0 / sqrt((double)c->D);
    int outs[2] = {-1, -1};
    int o = dg_graph_add(g, &dg_op_cp_attn_block, &a, (int[]){q, k, v, rank}, 4, outs, NULL);
    *lse = outs[1];
    return o;
}

/* Every rank's ring, K/V of rank r - s at step s. role: the q/k/v leaves'. */
static int leaf(dg_graph *g, const char *name, dg_role role, const int64_t *shape) {
    return role == DG_ROLE_PARAMETER ? dg_param_new(g, name, 4, shape) : dg_input_new(g, name, DG_F32, 4, shape);
}

static void build_ring(dg_graph *g, const ring_case *c, dg_role role, ring_graph *rg) {
    int64_t L = 2 * c->c;
    for (int r = 0; r < c->cp; r++) {
        char n[32];
        snprintf(n, sizeof n, "q%d", r);
        rg->q[r] = leaf(g, n, role, DG_SHAPE(c->B, L, c->Hq, c->D));
        snprintf(n, sizeof n, "k%d", r);
        rg->k[r] = leaf(g, n, role, DG_SHAPE(c->B, L, c->Hkv, c->D));
        snprintf(n, sizeof n, "v%d", r);
        rg->v[r] = leaf(g, n, role, DG_SHAPE(c->B, L, c->Hkv, c->D));
        snprintf(n, sizeof n, "rank%d", r);
        rg->rank[r] = dg_input_new(g, n, DG_I32, 1, DG_SHAPE(1));
    }
    for (int r = 0; r < c->cp; r++) {
        int l = -1, o = add_block(g, c, rg->q[r], rg->k[r], rg->v[r], rg->rank[r], 0, &l);
        for (int s = 1; s < c->cp; s++) {
            int j = (r - s + c->cp) % c->cp, ls = -1;
            int os = add_block(g, c, rg->q[r], rg->k[j], rg->v[j], rg->rank[r], s, &ls);
            int outs[2] = {-1, -1};
            dg_graph_add(g, &dg_op_lse_merge, NULL, (int[]){o, l, os, ls}, 4, outs, NULL);
            o = outs[0];
            l = outs[1];
        }
        rg->o[r] = o;
        rg->lse[r] = l;
    }
}

/* ---- values against attention over the whole sequence ---------------------------------- */

static int near(double got, double ref) { return fabs(got - ref) <= 2e-5 + 2e-4 * fabs(ref); }

static void check_values(const ring_case *c) {
    int64_t S = 2 * c->c * c->cp, L = 2 * c->c, HqD = c->Hq * c->D, HkvD = c->Hkv * c->D;
    dg_graph *g = dg_graph_new("ring");
    int gq = dg_input_new(g, "gq", DG_F32, 4, DG_SHAPE(c->B, S, c->Hq, c->D));
    int gk = dg_input_new(g, "gk", DG_F32, 4, DG_SHAPE(c->B, S, c->Hkv, c->D));
    int gv = dg_input_new(g, "gv", DG_F32, 4, DG_SHAPE(c->B, S, c->Hkv, c->D));
    int glse = -1, go = dg_attention_var(g, gq, gk, gv, 1, 0, c->window, DG_ATTN_SOFTMAX_VANILLA, -1, &glse);
    ring_graph rg;
    build_ring(g, c, DG_ROLE_INPUT, &rg);
    assert_int_equal(g->status, DG_OK);
    dg_buffers b;
    dg_buffers_alloc(g, &b);
    dg_test_rng rng = {77};
    dg_test_fill_normal(&rng, dg_buf_f32(&b, gq), c->B * S * HqD, 1.0);
    dg_test_fill_normal(&rng, dg_buf_f32(&b, gk), c->B * S * HkvD, 1.0);
    dg_test_fill_normal(&rng, dg_buf_f32(&b, gv), c->B * S * HkvD, 1.0);
    for (int r = 0; r < c->cp; r++) { /* rank r's chunks, as the data feed cuts them */
        *dg_buf_i32(&b, rg.rank[r]) = r;
        for (int64_t bb = 0; bb < c->B; bb++)
            for (int64_t s = 0; s < L; s++) {
                int64_t p = dg_layout_cp_position(s, c->c, r, c->cp);
                memcpy(dg_buf_f32(&b, rg.q[r]) + (bb * L + s) * HqD, dg_buf_f32(&b, gq) + (bb * S + p) * HqD, sizeof(float) * (size_t)HqD);
                memcpy(dg_buf_f32(&b, rg.k[r]) + (bb * L + s) * HkvD, dg_buf_f32(&b, gk) + (bb * S + p) * HkvD, sizeof(float) * (size_t)HkvD);
                memcpy(dg_buf_f32(&b, rg.v[r]) + (bb * L + s) * HkvD, dg_buf_f32(&b, gv) + (bb * S + p) * HkvD, sizeof(float) * (size_t)HkvD);
            }
    }
    dg_err err = {{0}};
    assert_int_equal(dg_run_serial(g, NULL, &b, NULL, &err), DG_OK);
    int bad = 0;
    for (int r = 0; r < c->cp; r++)
        for (int64_t bb = 0; bb < c->B; bb++)
            for (int64_t s = 0; s < L; s++) {
                int64_t p = dg_layout_cp_position(s, c->c, r, c->cp);
                const float *o = dg_buf_f32(&b, rg.o[r]) + (bb * L + s) * HqD, *ref = dg_buf_f32(&b, go) + (bb * S + p) * HqD;
                for (int64_t i = 0; i < HqD; i++) bad += !near(o[i], ref[i]);
                for (int64_t h = 0; h < c->Hq; h++)
                    bad += !near(dg_buf_f32(&b, rg.lse[r])[(bb * c->Hq + h) * L + s],
                                 dg_buf_f32(&b, glse)[(bb * c->Hq + h) * S + p]);
            }
    if (bad) fprintf(stderr, "cp %d Hq %lld Hkv %lld window %lld: %d values differ from attention over the whole sequence\n",
                     c->cp, (long long)c->Hq, (long long)c->Hkv, (long long)c->window, bad);
    assert_int_equal(bad, 0);
    dg_buffers_free(&b);
    dg_graph_free(g);
}

static void test_values(void **state) {
    (void)state;
    const ring_case cases[] = {
        {1, 2, 5, 2, 2, 8, 0},  {2, 2, 5, 4, 2, 8, 0},  {3, 1, 7, 4, 4, 8, 0},
        {4, 1, 70, 4, 2, 16, 0}, /* chunks over one attention tile */
        {2, 1, 6, 8, 2, 8, 0},   /* GQA, groups of 4 */
        /* windows (issue 29): within a chunk, across one, across several,
         * longer than the sequence; chunks over a tile */
        {2, 2, 5, 4, 2, 8, 3}, {3, 1, 7, 4, 4, 8, 9}, {4, 1, 6, 2, 1, 8, 13}, {2, 1, 5, 2, 2, 8, 50},
        {4, 1, 70, 4, 2, 16, 100},
    };
    for (size_t i = 0; i < DG_ARRAY_LEN(cases); i++) check_values(&cases[i]);
}

/* ---- finite differences -------------------------------------------------------------- */

static int build_gc(dg_graph *g, void *ctx) {
    const ring_case *c = ctx;
    ring_graph rg;
    build_ring(g, c, DG_ROLE_PARAMETER, &rg);
    int out = rg.o[0];
    for (int r = 1; r < c->cp; r++) out = dg_add(g, out, rg.o[r]);
    return out;
}

static void init_gc(const dg_graph *g, dg_buffers *b, void *ctx) {
    (void)ctx;
    for (int t = 0; t < g->n_tensors; t++)
        if (g->tensors[t].role == DG_ROLE_INPUT && !strncmp(g->tensors[t].name, "rank", 4))
            *dg_buf_i32(b, t) = atoi(g->tensors[t].name + 4);
}

static void test_gradcheck(void **state) {
    (void)state;
    const ring_case cases[] = {{2, 1, 3, 2, 2, 8, 0},    {3, 1, 2, 4, 2, 8, 0},    {4, 1, 2, 2, 1, 8, 0},
                               {2, 1, 3, 2, 2, 8, 4}, {3, 1, 3, 2, 1, 8, 5}, {4, 1, 2, 2, 1, 8, 3}};
    int fails = 0;
    for (size_t i = 0; i < DG_ARRAY_LEN(cases); i++) {
        char what[64];
        snprintf(what, sizeof what, "ring attention cp %d Hq %lld Hkv %lld window %lld", cases[i].cp,
                 (long long)cases[i].Hq, (long long)cases[i].Hkv, (long long)cases[i].window);
        dg_gradcheck_opts opts = {.max_checks = 24, .nthreads = i % 2 ? 2 : 1};
        fails += dg_gradcheck(what, build_gc, init_gc, (void *)&cases[i], &opts);
    }
    assert_int_equal(fails, 0);
}

/* ---- the ring's backward from the final (o, lse) -------------------------------------------- */

static void check_final_stats(const ring_case *c) {
    int64_t L = 2 * c->c;
    dg_graph *g = dg_graph_new("ring_bwd");
    ring_graph rg;
    build_ring(g, c, DG_ROLE_PARAMETER, &rg);
    int R = dg_input_new(g, "R", DG_F32, 4, DG_SHAPE(c->B, L, c->Hq, c->D));
    int R2 = dg_input_new(g, "R2", DG_F32, 3, DG_SHAPE(c->B, c->Hq, L));
    int out = rg.o[0], out2 = rg.lse[0];
    for (int r = 1; r < c->cp; r++) {
        out = dg_add(g, out, rg.o[r]);
        out2 = dg_add(g, out2, rg.lse[r]);
    }
    int loss = dg_add(g, dg_sum(g, dg_mul(g, out, R)), dg_sum(g, dg_mul(g, out2, R2)));
    dg_err err = {{0}};
    assert_int_equal(dg_autodiff(g, loss, dg_ops_autodiff(), NULL, &err), DG_OK);
    /* the ring's backward, emulated: rank r's step s holds rank r-s's K/V */
    int dq[MAX_CP], dk[MAX_CP], dv[MAX_CP];
    for (int r = 0; r < c->cp; r++) dq[r] = dk[r] = dv[r] = -1;
    for (int r = 0; r < c->cp; r++)
        for (int s = 0; s < c->cp; s++) {
            int j = (r - s + c->cp) % c->cp;
            dg_attrs a;
            memset(&a, 0, sizeof a);
            a.i[0] = c->cp;
            a.i[1] = s;
            a.i[2] = c->window;
            a.f[0] = 1.0 / sqrt((double)c->D);
            int in[8] = {rg.q[r], rg.k[j], rg.v[j], rg.rank[r], rg.o[r], R, rg.lse[r], R2}, o3[3];
            dg_graph_add(g, &dg_op_cp_attn_block_bwd, &a, in, 8, o3, NULL);
            dq[r] = dq[r] < 0 ? o3[0] : dg_add(g, dq[r], o3[0]);
            dk[j] = dk[j] < 0 ? o3[1] : dg_add(g, dk[j], o3[1]);
            dv[j] = dv[j] < 0 ? o3[2] : dg_add(g, dv[j], o3[2]);
        }
    assert_int_equal(g->status, DG_OK);
    dg_buffers b;
    dg_buffers_alloc(g, &b);
    dg_test_rng rng = {99};
    for (int t = 0; t < g->n_tensors; t++) {
        const dg_tensor *x = &g->tensors[t];
        if (x->producer >= 0) continue;
        if (x->dtype == DG_I32) *dg_buf_i32(&b, t) = atoi(x->name + 4);
        else dg_test_fill_normal(&rng, dg_buf_f32(&b, t), dg_tensor_numel(x), 1.0);
    }
    assert_int_equal(dg_run_serial(g, NULL, &b, NULL, &err), DG_OK);
    int bad = 0;
    for (int r = 0; r < c->cp; r++) {
        const int got[3] = {dq[r], dk[r], dv[r]}, ref[3] = {rg.q[r], rg.k[r], rg.v[r]};
        for (int w = 0; w < 3; w++) {
            int gr = g->tensors[ref[w]].grad;
            assert_true(gr >= 0);
            const float *x = dg_buf_f32(&b, got[w]), *y = dg_buf_f32(&b, gr);
            for (int64_t i = 0; i < dg_tensor_numel(&g->tensors[gr]); i++) bad += fabs(x[i] - y[i]) > 1e-5 + 1e-4 * fabs(y[i]);
        }
    }
    if (bad) fprintf(stderr, "cp %d: %d gradients of the ring's backward differ from autodiff's\n", c->cp, bad);
    assert_int_equal(bad, 0);
    dg_buffers_free(&b);
    dg_graph_free(g);
}

static void test_final_stats(void **state) {
    (void)state;
    const ring_case cases[] = {{1, 1, 4, 2, 2, 8, 0},     {2, 2, 5, 4, 2, 8, 0},        {3, 1, 3, 2, 2, 8, 0},
                               {4, 1, 70, 4, 2, 16, 0},   {2, 2, 5, 4, 2, 8, 3},     {3, 1, 4, 2, 1, 8, 6},
                               {4, 1, 70, 4, 2, 16, 90}};
    for (size_t i = 0; i < DG_ARRAY_LEN(cases); i++) check_final_stats(&cases[i]);
}

/* ---- the merge's empty rows ------------------------------------------------------------ */

static void test_merge_empty(void **state) {
    (void)state;
    float o1[2] = {1.5f, -2.0f}, o2[2] = {0, 0}, l1[1] = {0.25f}, l2[1] = {-INFINITY}, o[2], l[1];
    dg_cpu_lse_merge_fwd(1, 1, 1, 2, o1, l1, o2, l2, o, l);
    assert_true(o[0] == o1[0] && o[1] == o1[1] && l[0] == l1[0]);
    l1[0] = -INFINITY;
    dg_cpu_lse_merge_fwd(1, 1, 1, 2, o1, l1, o2, l2, o, l);
    assert_true(o[0] == 0.0f && o[1] == 0.0f && l[0] == -INFINITY);
}

int main(void) {
    dg_cpu_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_gradcheck),
        cmocka_unit_test(test_final_stats),
        cmocka_unit_test(test_merge_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
