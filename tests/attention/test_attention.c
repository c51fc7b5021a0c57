/* test_attention.c — the fused attention op and its backward.
 *
 *  - forward o and lse against a naive reference (full softmax, double
 *    accumulation) for MHA, GQA, MQA, causal and not, S below, at and not a
 *    multiple of the tile (DG_ATTN_TILE = 64), D from 4 to 128; again with
 *    scores spread over tens (q, k of std 4) for the online rescaling;
 *  - attention_bwd's dq, dk, dv (with and without a dlse input) against the
 *    same reference's gradients;
 *  - finite differences of q, k, v through dg_autodiff (dg_gradcheck), for
 *    gradients flowing from o and from lse;
 *  - 1, 2 and 3 threads give bitwise identical forward and backward;
 *  - shape rules reject bad inputs with "rule '...' broken" messages;
 *  - workspace grows linearly in S (no S x S buffer).
 * Tolerances: values |got - ref| <= 2e-5 + 2e-4 |ref| (float32 tiles and a
 * ~1 ulp polynomial exp against double); gradcheck eps 1e-2, rtol 2e-2,
 * atol 1e-3 (the dg_gradcheck defaults), with D = 8 so scores are O(1). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "dg_cpu_attention.h"
#include "dg_cpu_gemm.h"
#include "dg_exec_serial.h"
#include "dg_gradcheck.h"
#include "dg_op_attention.h"
#include "dg_op_basic.h"

typedef struct shape_case {
    int64_t B, S, Hq, Hkv, D;
    int causal;
    double scale; /* <= 0: default 1/sqrt(D) */
} shape_case;

static const shape_case k_cases[] = {
    {2, 100, 4, 2, 16, 1, 0},   /* GQA, S = 64 + 36 */
    {1, 130, 3, 1, 8, 1, 0},    /* MQA, S = 2*64 + 2 */
    {1, 64, 2, 2, 32, 1, 0},    /* MHA, S exactly one tile */
    {1, 1, 2, 1, 4, 1, 0},      /* a single token */
    {1, 20, 2, 1, 8, 1, 0.37},  /* S below one tile, explicit scale */
    {2, 77, 4, 4, 8, 0, 0},     /* non-causal MHA */
    {1, 150, 4, 2, 24, 0, 0},   /* non-causal GQA, 3 tiles */
    {1, 200, 8, 2, 64, 1, 0},   /* GQA, group of 4, D = 64 */
    {1, 70, 2, 1, 128, 1, 0},   /* MQA, D = 128 (Mixtral's head size) */
};

static double case_scale(const shape_case *c) {
    return c->scale > 0 ? c->scale : 1.0 / sqrt((double)c->D);
}

static int near(double got, double ref) { return fabs(got - ref) <= 2e-5 + 2e-4 * fabs(ref); }

/* ---- naive reference ---------------------------------------------------------- */

/* Full softmax per (b, h) in double: o, lse, and (when dO is given) dq, dk,
 * dv. dlse may be NULL. Output arrays are doubles in the tensors' layouts. */
static void reference(const shape_case *c, const float *q, const float *k, const float *v,
                      const float *dO, const float *dlse, double *o, double *lse, double *dq,
                      double *dk, double *dv) {
    const int64_t B = c->B, S = c->S, Hq = c->Hq, Hkv = c->Hkv, D = c->D, G = Hq / Hkv;
    const double scale = case_scale(c);
    double *p = dg_malloc(sizeof(double) * (size_t)(S * S));
    double *ds = dg_malloc(sizeof(double) * (size_t)(S * S));
    if (dq) {
        memset(dq, 0, sizeof(double) * (size_t)(B * S * Hq * D));
        memset(dk, 0, sizeof(double) * (size_t)(B * S * Hkv * D));
        memset(dv, 0, sizeof(double) * (size_t)(B * S * Hkv * D));
    }
#define QI(b, i, h) (((b) * S + (i)) * Hq + (h)) * D
#define KI(b, j, h) (((b) * S + (j)) * Hkv + (h)) * D
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++) {
            const int64_t kh = h / G;
            for (int64_t i = 0; i < S; i++) {
                const int64_t n = c->causal ? i + 1 : S;
                double mx = -INFINITY;
                for (int64_t j = 0; j < n; j++) {
                    double s = 0;
                    for (int64_t e = 0; e < D; e++)
                        s += (double)q[QI(b, i, h) + e] * k[KI(b, j, kh) + e];
                    p[i * S + j] = s * scale;
                    mx = fmax(mx, s * scale);
                }
                double sum = 0;
                for (int64_t j = 0; j < n; j++) sum += exp(p[i * S + j] - mx);
                double l = mx + log(sum);
                lse[(b * Hq + h) * S + i] = l;
                for (int64_t j = 0; j < S; j++) p[i * S + j] = j < n ? exp(p[i * S + j] - l) : 0.0;
                for (int64_t e = 0; e < D; e++) {
                    double acc = 0;
                    for (int64_t j = 0; j < n; j++) acc += p[i * S + j] * v[KI(b, j, kh) + e];
                    o[QI(b, i, h) + e] = acc;
                }
            }
            if (!dq) continue;
            for (int64_t i = 0; i < S; i++) {
                double delta = 0;
                for (int64_t e = 0; e < D; e++)
                    delta += (double)dO[QI(b, i, h) + e] * o[QI(b, i, h) + e];
                if (dlse) delta -= dlse[(b * Hq + h) * S + i];
                for (int64_t j = 0; j < S; j++) {
                    double dp = 0;
                    for (int64_t e = 0; e < D; e++)
                        dp += (double)dO[QI(b, i, h) + e] * v[KI(b, j, kh) + e];
                    ds[i * S + j] = p[i * S + j] * (dp - delta);
                }
            }
            for (int64_t i = 0; i < S; i++)
                for (int64_t j = 0; j < S; j++) {
                    double pij = p[i * S + j], dsij = ds[i * S + j];
                    if (pij == 0.0) continue;
                    for (int64_t e = 0; e < D; e++) {
                        dq[QI(b, i, h) + e] += scale * dsij * k[KI(b, j, kh) + e];
                        dk[KI(b, j, kh) + e] += scale * dsij * q[QI(b, i, h) + e];
                        dv[KI(b, j, kh) + e] += pij * dO[QI(b, i, h) + e];
                    }
                }
        }
#undef QI
#undef KI
    dg_free(p);
    dg_free(ds);
}

/* ---- a graph with attention and (optionally) attention_bwd --------------------- */

typedef struct attn_graph {
    dg_graph *g;
    int q, k, v, o, lse;
    int dO, dlse;     /* inputs of the backward node, -1 without */
    int dq, dk, dv;   /* its outputs */
} attn_graph;

static attn_graph build_graph(const shape_case *c, int with_bwd, int with_dlse) {
    attn_graph a = {.dO = -1, .dlse = -1, .dq = -1, .dk = -1, .dv = -1};
    a.g = dg_graph_new("attn");
    a.q = dg_param_new(a.g, "q", 4, DG_SHAPE(c->B, c->S, c->Hq, c->D));
    a.k = dg_param_new(a.g, "k", 4, DG_SHAPE(c->B, c->S, c->Hkv, c->D));
    a.v = dg_param_new(a.g, "v", 4, DG_SHAPE(c->B, c->S, c->Hkv, c->D));
    a.o = dg_attention_ex(a.g, a.q, a.k, a.v, c->causal, c->scale, &a.lse);
    assert_true(a.o >= 0 && a.lse >= 0);
    if (with_bwd) {
        a.dO = dg_input_new(a.g, "do", DG_F32, 4, DG_SHAPE(c->B, c->S, c->Hq, c->D));
        int in[7] = {a.q, a.k, a.v, a.o, a.dO, a.lse, -1};
        if (with_dlse)
            in[6] = a.dlse = dg_input_new(a.g, "dlse", DG_F32, 3, DG_SHAPE(c->B, c->Hq, c->S));
        const dg_node *fwd = &a.g->nodes[a.g->tensors[a.o].producer];
        dg_attrs at = fwd->attrs;
        int outs[3];
        int n_in = with_dlse ? 7 : 6;
        assert_true(dg_graph_add(a.g, &dg_op_attention_bwd, &at, in, n_in, outs, NULL) >= 0);
        a.dq = outs[0];
        a.dk = outs[1];
        a.dv = outs[2];
    }
    assert_int_equal(a.g->status, DG_OK);
    return a;
}

/* Normal leaves; q and k with standard deviation qk_std (scores grow as its
 * square), the rest with 1. */
static void fill_leaves_std(const attn_graph *a, dg_buffers *b, uint64_t seed, double qk_std) {
    dg_test_rng rng = {seed};
    for (int t = 0; t < a->g->n_tensors; t++) {
        const dg_tensor *x = &a->g->tensors[t];
        double std = t == a->q || t == a->k ? qk_std : 1.0;
        if (x->producer < 0) dg_test_fill_normal(&rng, b->ptr[t], dg_tensor_numel(x), std);
    }
}

static void fill_leaves(const attn_graph *a, dg_buffers *b, uint64_t seed) {
    fill_leaves_std(a, b, seed, 1.0);
}

static void run(const attn_graph *a, dg_buffers *b, const dg_team *team) {
    dg_err err = {{0}};
    int st = dg_run_serial(a->g, NULL, b, team, &err);
    if (st != DG_OK) fail_msg("run failed: %s", err.msg);
}

static int64_t numel(const attn_graph *a, int t) { return dg_tensor_numel(&a->g->tensors[t]); }

/* Count mismatches of a float buffer against a double reference. */
static int compare(const char *what, const float *got, const double *ref, int64_t n) {
    int bad = 0;
    for (int64_t i = 0; i < n; i++)
        if (!near(got[i], ref[i])) {
            if (bad < 5)
                fprintf(stderr, "%s[%lld]: got %.7g, reference %.7g\n", what, (long long)i, got[i],
                        ref[i]);
            bad++;
        }
    return bad;
}

/* ---- tests ------------------------------------------------------------------------- */

/* Forward of every case, with q and k of standard deviation qk_std. */
static void check_forward(double qk_std) {
    for (size_t ci = 0; ci < DG_ARRAY_LEN(k_cases); ci++) {
        const shape_case *c = &k_cases[ci];
        attn_graph a = build_graph(c, 0, 0);
        dg_buffers b;
        dg_buffers_alloc(a.g, &b);
        fill_leaves_std(&a, &b, 11 + ci, qk_std);
        run(&a, &b, NULL);
        double *o = dg_malloc(sizeof(double) * (size_t)numel(&a, a.o));
        double *lse = dg_malloc(sizeof(double) * (size_t)numel(&a, a.lse));
        reference(c, b.ptr[a.q], b.ptr[a.k], b.ptr[a.v], NULL, NULL, o, lse, NULL, NULL, NULL);
        int bad = compare("o", b.ptr[a.o], o, numel(&a, a.o)) +
                  compare("lse", b.ptr[a.lse], lse, numel(&a, a.lse));
        if (bad)
            fail_msg("case %zu (B%lld S%lld Hq%lld Hkv%lld D%lld causal %d, q/k std %g): %d mismatches",
                     ci, (long long)c->B, (long long)c->S, (long long)c->Hq, (long long)c->Hkv,
                     (long long)c->D, c->causal, qk_std, bad);
        dg_free(o);
        dg_free(lse);
        dg_buffers_free(&b);
        dg_graph_free(a.g);
    }
}

static void test_forward_values(void **state) {
    (void)state;
    check_forward(1.0);
}

/* Scores with a spread of tens: peaky softmax rows whose running max moves
 * from tile to tile, so the online rescaling is exercised for real. */
static void test_forward_large_scores(void **state) {
    (void)state;
    check_forward(4.0);
}

static void test_backward_values(void **state) {
    (void)state;
    for (size_t ci = 0; ci < DG_ARRAY_LEN(k_cases); ci++)
        for (int with_dlse = 0; with_dlse < 2; with_dlse++) {
            const shape_case *c = &k_cases[ci];
            attn_graph a = build_graph(c, 1, with_dlse);
            dg_buffers b;
            dg_buffers_alloc(a.g, &b);
            fill_leaves(&a, &b, 100 + ci);
            run(&a, &b, NULL);
            double *o = dg_malloc(sizeof(double) * (size_t)numel(&a, a.o));
            double *lse = dg_malloc(sizeof(double) * (size_t)numel(&a, a.lse));
            double *dq = dg_malloc(sizeof(double) * (size_t)numel(&a, a.dq));
            double *dk = dg_malloc(sizeof(double) * (size_t)numel(&a, a.dk));
            double *dv = dg_malloc(sizeof(double) * (size_t)numel(&a, a.dv));
            reference(c, b.ptr[a.q], b.ptr[a.k], b.ptr[a.v], b.ptr[a.dO],
                      with_dlse ? b.ptr[a.dlse] : NULL, o, lse, dq, dk, dv);
            int bad = compare("dq", b.ptr[a.dq], dq, numel(&a, a.dq)) +
                      compare("dk", b.ptr[a.dk], dk, numel(&a, a.dk)) +
                      compare("dv", b.ptr[a.dv], dv, numel(&a, a.dv));
            if (bad) fail_msg("case %zu dlse %d: %d gradient mismatches", ci, with_dlse, bad);
            dg_free(o);
            dg_free(lse);
            dg_free(dq);
            dg_free(dk);
            dg_free(dv);
            dg_buffers_free(&b);
            dg_graph_free(a.g);
        }
}

typedef struct gc_case {
    shape_case shape;
    int from_lse; /* 1: the checked output is lse (gradient enters through dlse) */
} gc_case;

static int build_gc(dg_graph *g, void *ctx) {
    const gc_case *gc = ctx;
    const shape_case *c = &gc->shape;
    int q = dg_param_new(g, "q", 4, DG_SHAPE(c->B, c->S, c->Hq, c->D));
    int k = dg_param_new(g, "k", 4, DG_SHAPE(c->B, c->S, c->Hkv, c->D));
    int v = dg_param_new(g, "v", 4, DG_SHAPE(c->B, c->S, c->Hkv, c->D));
    int lse = -1;
    int o = dg_attention_ex(g, q, k, v, c->causal, c->scale, &lse);
    return gc->from_lse ? lse : o;
}

static void test_gradcheck(void **state) {
    (void)state;
    const gc_case cases[] = {
        {{1, 70, 4, 2, 8, 1, 0}, 0},  /* GQA over two tiles (64 + 6) */
        {{2, 9, 2, 1, 8, 1, 0}, 0},   /* MQA */
        {{1, 70, 2, 2, 8, 1, 0}, 0},  /* MHA over two tiles */
        {{1, 66, 2, 1, 8, 0, 0}, 0},  /* non-causal */
        {{1, 70, 4, 2, 8, 1, 0}, 1},  /* through lse only: do is a zero fill */
    };
    int fails = 0;
    for (size_t i = 0; i < DG_ARRAY_LEN(cases); i++) {
        gc_case c = cases[i];
        char what[96];
        snprintf(what, sizeof what, "attention S%lld Hq%lld Hkv%lld causal %d from %s",
                 (long long)c.shape.S, (long long)c.shape.Hq, (long long)c.shape.Hkv, c.shape.causal,
                 c.from_lse ? "lse" : "o");
        dg_gradcheck_opts opts = {.max_checks = 24, .nthreads = i % 2 ? 2 : 1};
        fails += dg_gradcheck(what, build_gc, NULL, &c, &opts);
    }
    assert_int_equal(fails, 0);
}

/* Forward and backward give the same bits with 1, 2 and 3 threads. */
static void test_threads_bitwise(void **state) {
    (void)state;
    /* the last one has fewer work units than threads */
    const shape_case cases[] = {{2, 200, 4, 2, 32, 1, 0}, {1, 130, 3, 1, 16, 0, 0}, {1, 5, 2, 1, 8, 1, 0}};
    for (size_t ci = 0; ci < DG_ARRAY_LEN(cases); ci++) {
        attn_graph a = build_graph(&cases[ci], 1, 1);
        const int outs[] = {a.o, a.lse, a.dq, a.dk, a.dv};
        dg_buffers b;
        dg_buffers_alloc(a.g, &b);
        fill_leaves(&a, &b, 77);
        run(&a, &b, NULL);
        void *ref[5];
        for (int i = 0; i < 5; i++) {
            size_t bytes = dg_tensor_bytes(&a.g->tensors[outs[i]]);
            ref[i] = dg_malloc(bytes);
            memcpy(ref[i], b.ptr[outs[i]], bytes);
        }
        for (int nth = 2; nth <= 3; nth++) {
            for (int i = 0; i < 5; i++) /* poison: every output must be rewritten */
                memset(b.ptr[outs[i]], 0xff, dg_tensor_bytes(&a.g->tensors[outs[i]]));
            dg_test_team *team = dg_test_team_new(nth);
            run(&a, &b, dg_test_team_get(team));
            dg_test_team_free(team);
            for (int i = 0; i < 5; i++)
                if (memcmp(ref[i], b.ptr[outs[i]], dg_tensor_bytes(&a.g->tensors[outs[i]])) != 0)
                    fail_msg("case %zu, %d threads: output %d (%s) differs from 1 thread", ci, nth, i,
                             a.g->tensors[outs[i]].name);
        }
        for (int i = 0; i < 5; i++) dg_free(ref[i]);
        dg_buffers_free(&b);
        dg_graph_free(a.g);
    }
}

static void expect_rejected(int64_t Hq, int64_t Hkv, int64_t Dq, int64_t Dk, int kdims, int causal,
                            const char *rule) {
    dg_graph *g = dg_graph_new("bad");
    int q = dg_param_new(g, "q", 4, DG_SHAPE(1, 8, Hq, Dq));
    int k = kdims == 4 ? dg_param_new(g, "k", 4, DG_SHAPE(1, 8, Hkv, Dk))
                       : dg_param_new(g, "k", 3, DG_SHAPE(8, Hkv, Dk));
    int v = dg_param_new(g, "v", 4, DG_SHAPE(1, 8, Hkv, Dk));
    int lse = 0;
    int o = dg_attention_ex(g, q, k, v, causal, 0, &lse);
    assert_int_equal(o, -1);
    assert_int_equal(lse, -1);
    assert_int_equal(g->status, DG_EINPUT);
    if (!strstr(g->err.msg, rule)) fail_msg("message '%s' does not name %s", g->err.msg, rule);
    dg_graph_free(g);
}

static void test_shape_rules(void **state) {
    (void)state;
    expect_rejected(4, 3, 8, 8, 4, 1, "rule 'shape' broken"); /* Hq % Hkv != 0 */
    expect_rejected(4, 2, 8, 16, 4, 1, "rule 'shape' broken"); /* D differs */
    expect_rejected(4, 2, 8, 8, 3, 1, "rule 'shape' broken");  /* k not 4-D */
    expect_rejected(4, 2, 8, 8, 4, 2, "rule 'attrs' broken");  /* causal not 0/1 */

    /* a good node: shapes of o and lse, attrs, cost */
    dg_graph *g = dg_graph_new("ok");
    int q = dg_param_new(g, "q", 4, DG_SHAPE(2, 8, 4, 16));
    int k = dg_param_new(g, "k", 4, DG_SHAPE(2, 8, 1, 16));
    int lse = -1;
    int o = dg_attention(g, q, k, k, 0, &lse);
    assert_true(o >= 0 && lse >= 0);
    char buf[64];
    assert_string_equal(dg_shape_str(&g->tensors[o], buf), "[2,8,4,16]");
    assert_string_equal(dg_shape_str(&g->tensors[lse], buf), "[2,4,8]");
    const dg_node *n = &g->nodes[g->tensors[o].producer];
    assert_int_equal(n->attrs.i[0], 1);
    assert_true(fabs(n->attrs.f[0] - 0.25) < 1e-12);
    dg_cost cost = {0, 0};
    n->op->cost(g, n, &cost);
    assert_true(fabs(cost.flops - 4.0 * 2 * 4 * (8 * 9 / 2) * 16) < 1e-6);
    dg_graph_free(g);
}

/* The workspace holds per-thread tiles and, in the backward, one float per
 * query row: quadrupling S at most quadruples it. */
static void test_workspace_linear(void **state) {
    (void)state;
    dg_attn_dims d512 = {.B = 1, .S = 512, .Hq = 8, .Hkv = 2, .D = 64, .causal = 1, .scale = 0.125f}, d2048 = d512;
    d2048.S = 2048;
    size_t f1 = dg_cpu_attention_fwd_workspace(&d512, 2), f4 = dg_cpu_attention_fwd_workspace(&d2048, 2);
    size_t b1 = dg_cpu_attention_bwd_workspace(&d512, 2), b4 = dg_cpu_attention_bwd_workspace(&d2048, 2);
    assert_int_equal(f1, f4); /* forward scratch does not depend on S */
    assert_true(b4 <= 4 * b1);
    /* far below one S x S score matrix per head */
    assert_true(b4 < sizeof(float) * 2048 * 2048);
}

int main(void) {
    dg_cpu_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_values),  cmocka_unit_test(test_forward_large_scores),
        cmocka_unit_test(test_backward_values),
        cmocka_unit_test(test_gradcheck),       cmocka_unit_test(test_threads_bitwise),
        cmocka_unit_test(test_shape_rules),     cmocka_unit_test(test_workspace_linear),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
