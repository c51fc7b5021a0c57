/* test_attn_variants.c — the fused attention op's variants (issue 29):
 * sliding windows (attrs.i[1]) and softmax sinks (attrs.i[2]: Megatron's
 * off-by-one zero logit and the learnable per-head logit).
 *
 *  - o, lse, and attention_bwd's dq, dk, dv and attention_sink_bwd's dsink
 *    (through dg_autodiff, with gradients entering through o and lse)
 *    against a naive double reference that applies the mask element by
 *    element: windows below, at and across the tile (64), GQA and MQA, S
 *    over several tiles so whole key tiles fall outside the window;
 *  - finite differences of q, k, v and the sink through dg_autodiff;
 *  - 1, 2 and 3 threads give bitwise identical results;
 *  - attn_sink (the sink CP folds into its merged attention) after vanilla
 *    attention equals the fused op with the sink, and passes finite
 *    differences (q, k, v and the sink, from o' and from lse');
 *  - bad attrs and a missing sink input are refused by the rules.
 * Tolerances as test_attention.c's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "dg_autodiff.h"
#include "dg_cpu_attention.h"
#include "dg_cpu_gemm.h"
#include "dg_exec_serial.h"
#include "dg_gradcheck.h"
#include "dg_op_attention.h"
#include "dg_op_attn_sink.h"
#include "dg_op_basic.h"
#include "dg_ops.h"

typedef struct var_case {
    int64_t B, S, Hq, Hkv, D;
    int causal;
    int64_t window;
    int softmax;
} var_case;

static const var_case k_cases[] = {
    {2, 100, 4, 2, 16, 1, 8, 0},    /* a small window, GQA */
    {1, 200, 3, 1, 8, 1, 64, 1},    /* a window of one tile, off-by-one, MQA */
    {1, 300, 2, 2, 16, 1, 100, 2},  /* a window across tiles, learnable sinks */
    {1, 130, 4, 2, 8, 1, 1, 2},     /* each query sees only itself */
    {2, 77, 4, 1, 8, 1, 0, 2},      /* sinks alone */
    {1, 90, 2, 1, 8, 0, 0, 1},      /* non-causal with a zero sink */
    {1, 150, 4, 4, 8, 1, 500, 0},   /* a window longer than the sequence */
};

static int near(double got, double ref) { return fabs(got - ref) <= 2e-5 + 2e-4 * fabs(ref); }

static int visible(const var_case *c, int64_t i, int64_t j) {
    if (c->causal && j > i) return 0;
    if (c->window > 0 && j <= i - c->window) return 0;
    return 1;
}

/* Full masked softmax per (b, h) in double, with the sink's logit in the
 * denominator; gradients from dO (and dlse, may be NULL). */
static void reference(const var_case *c, const float *q, const float *k, const float *v, const float *sink,
                      const float *dO, const float *dlse, double *o, double *lse, double *dq, double *dk,
                      double *dv, double *dsink) {
    const int64_t B = c->B, S = c->S, Hq = c->Hq, Hkv = c->Hkv, D = c->D, G = Hq / Hkv;
    const double scale = 1.0 / sqrt((double)D);
    double *p = dg_malloc(sizeof(double) * (size_t)(S * S));
    memset(dq, 0, sizeof(double) * (size_t)(B * S * Hq * D));
    memset(dk, 0, sizeof(double) * (size_t)(B * S * Hkv * D));
    memset(dv, 0, sizeof(double) * (size_t)(B * S * Hkv * D));
    memset(dsink, 0, sizeof(double) * (size_t)Hq);
#define QI(b, i, h) (((b) * S + (i)) * Hq + (h)) * D
#define KI(b, j, h) (((b) * S + (j)) * Hkv + (h)) * D
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++) {
            const int64_t kh = h / G;
            const double sk = c->softmax == 2 ? sink[h] : 0.0;
            for (int64_t i = 0; i < S; i++) {
                double mx = c->softmax ? sk : -INFINITY;
                for (int64_t j = 0; j < S; j++) {
                    double s = 0;
                    for (int64_t e = 0; e < D; e++) s += (double)q[QI(b, i, h) + e] * k[KI(b, j, kh) + e];
                    p[i * S + j] = s * scale;
                    if (visible(c, i, j)) mx = fmax(mx, s * scale);
                }
                double sum = c->softmax ? exp(sk - mx) : 0.0;
                for (int64_t j = 0; j < S; j++)
                    if (visible(c, i, j)) sum += exp(p[i * S + j] - mx);
                double l = mx + log(sum);
                lse[(b * Hq + h) * S + i] = l;
                for (int64_t j = 0; j < S; j++) p[i * S + j] = visible(c, i, j) ? exp(p[i * S + j] - l) : 0.0;
                for (int64_t e = 0; e < D; e++) {
                    double acc = 0;
                    for (int64_t j = 0; j < S; j++) acc += p[i * S + j] * v[KI(b, j, kh) + e];
                    o[QI(b, i, h) + e] = acc;
                }
                double delta = 0;
                for (int64_t e = 0; e < D; e++) delta += (double)dO[QI(b, i, h) + e] * o[QI(b, i, h) + e];
                if (dlse) delta -= dlse[(b * Hq + h) * S + i];
                dsink[h] -= exp(sk - l) * delta;
                for (int64_t j = 0; j < S; j++) {
                    double pij = p[i * S + j];
                    if (pij == 0.0) continue;
                    double dp = 0;
                    for (int64_t e = 0; e < D; e++) dp += (double)dO[QI(b, i, h) + e] * v[KI(b, j, kh) + e];
                    double ds = pij * (dp - delta);
                    for (int64_t e = 0; e < D; e++) {
                        dq[QI(b, i, h) + e] += scale * ds * k[KI(b, j, kh) + e];
                        dk[KI(b, j, kh) + e] += scale * ds * q[QI(b, i, h) + e];
                        dv[KI(b, j, kh) + e] += pij * dO[QI(b, i, h) + e];
                    }
                }
            }
        }
#undef QI
#undef KI
    dg_free(p);
}

/* q, k, v (and the sink) as parameters; o and lse; the backward by
 * autodiff seeded with inputs do (for o) and dlse (for lse). */
typedef struct var_graph {
    dg_graph *g;
    int q, k, v, sink, o, lse, dO, dlse;
    int dq, dk, dv, dsink;
} var_graph;

static var_graph build(const var_case *c) {
    var_graph a = {.sink = -1, .dsink = -1};
    a.g = dg_graph_new("attn_var");
    a.q = dg_param_new(a.g, "q", 4, DG_SHAPE(c->B, c->S, c->Hq, c->D));
    a.k = dg_param_new(a.g, "k", 4, DG_SHAPE(c->B, c->S, c->Hkv, c->D));
    a.v = dg_param_new(a.g, "v", 4, DG_SHAPE(c->B, c->S, c->Hkv, c->D));
    if (c->softmax == DG_ATTN_SOFTMAX_LEARNABLE) a.sink = dg_param_new(a.g, "sink", 1, DG_SHAPE(c->Hq));
    a.o = dg_attention_var(a.g, a.q, a.k, a.v, c->causal, 0, c->window, c->softmax, a.sink, &a.lse);
    assert_true(a.o >= 0);
    a.dO = dg_input_new(a.g, "do", DG_F32, 4, DG_SHAPE(c->B, c->S, c->Hq, c->D));
    a.dlse = dg_input_new(a.g, "dlse", DG_F32, 3, DG_SHAPE(c->B, c->Hq, c->S));
    assert_int_equal(a.g->status, DG_OK);
    dg_err err = {{0}};
    int st = dg_autodiff_seeded(a.g, -1, 2, (int[]){a.o, a.lse}, (int[]){a.dO, a.dlse}, dg_ops_autodiff(), NULL, &err);
    if (st != DG_OK) fail_msg("autodiff: %s", err.msg);
    a.dq = a.g->tensors[a.q].grad;
    a.dk = a.g->tensors[a.k].grad;
    a.dv = a.g->tensors[a.v].grad;
    if (a.sink >= 0) a.dsink = a.g->tensors[a.sink].grad;
    return a;
}

static void fill(const var_graph *a, dg_buffers *b, uint64_t seed, double qk_std) {
    dg_test_rng rng = {seed};
    for (int t = 0; t < a->g->n_tensors; t++) {
        const dg_tensor *x = &a->g->tensors[t];
        if (x->producer >= 0) continue;
        dg_test_fill_normal(&rng, b->ptr[t], dg_tensor_numel(x), t == a->q || t == a->k ? qk_std : 1.0);
    }
}

static void run(const var_graph *a, dg_buffers *b, const dg_team *team) {
    dg_err err = {{0}};
    if (dg_run_serial(a->g, NULL, b, team, &err) != DG_OK) fail_msg("run failed: %s", err.msg);
}

static int compare(const char *what, const float *got, const double *ref, int64_t n) {
    int bad = 0;
    for (int64_t i = 0; i < n; i++)
        if (!near(got[i], ref[i])) {
            if (bad < 5) fprintf(stderr, "%s[%lld]: got %.7g, reference %.7g\n", what, (long long)i, got[i], ref[i]);
            bad++;
        }
    return bad;
}

static int64_t numel(const var_graph *a, int t) { return dg_tensor_numel(&a->g->tensors[t]); }

static void check_values(double qk_std) {
    for (size_t ci = 0; ci < DG_ARRAY_LEN(k_cases); ci++) {
        const var_case *c = &k_cases[ci];
        var_graph a = build(c);
        dg_buffers b;
        dg_buffers_alloc(a.g, &b);
        fill(&a, &b, 31 + ci, qk_std);
        run(&a, &b, NULL);
        double *o = dg_malloc(sizeof(double) * (size_t)numel(&a, a.o));
        double *lse = dg_malloc(sizeof(double) * (size_t)numel(&a, a.lse));
        double *dq = dg_malloc(sizeof(double) * (size_t)numel(&a, a.q));
        double *dk = dg_malloc(sizeof(double) * (size_t)numel(&a, a.k));
        double *dv = dg_malloc(sizeof(double) * (size_t)numel(&a, a.v));
        double *ds = dg_malloc(sizeof(double) * (size_t)c->Hq);
        reference(c, b.ptr[a.q], b.ptr[a.k], b.ptr[a.v], a.sink >= 0 ? b.ptr[a.sink] : NULL, b.ptr[a.dO],
                  b.ptr[a.dlse], o, lse, dq, dk, dv, ds);
        int bad = compare("o", b.ptr[a.o], o, numel(&a, a.o)) + compare("lse", b.ptr[a.lse], lse, numel(&a, a.lse)) +
                  compare("dq", b.ptr[a.dq], dq, numel(&a, a.q)) + compare("dk", b.ptr[a.dk], dk, numel(&a, a.k)) +
                  compare("dv", b.ptr[a.dv], dv, numel(&a, a.v));
        if (a.dsink >= 0) {
            /* a sum over B * S rows: the tolerance grows with it */
            for (int64_t h = 0; h < c->Hq; h++)
                if (fabs(((float *)b.ptr[a.dsink])[h] - ds[h]) > 1e-4 * (double)(c->B * c->S) * 1e-2 + 2e-4 * fabs(ds[h])) {
                    fprintf(stderr, "dsink[%lld]: got %.7g, reference %.7g\n", (long long)h,
                            ((float *)b.ptr[a.dsink])[h], ds[h]);
                    bad++;
                }
        }
        if (bad)
            fail_msg("case %zu (S%lld Hq%lld Hkv%lld causal %d window %lld softmax %d, q/k std %g): %d mismatches", ci,
                     (long long)c->S, (long long)c->Hq, (long long)c->Hkv, c->causal, (long long)c->window, c->softmax,
                     qk_std, bad);
        dg_free(o), dg_free(lse), dg_free(dq), dg_free(dk), dg_free(dv), dg_free(ds);
        dg_buffers_free(&b);
        dg_graph_free(a.g);
    }
}

static void test_values(void **state) {
    (void)state;
    check_values(1.0);
}

/* Scores spread over tens: the running max moves, and a window's rows
 * start on tiles where they see nothing (their max stays -inf). */
static void test_values_large_scores(void **state) {
    (void)state;
    check_values(4.0);
}

typedef struct gc_case {
    var_case c;
    int from_lse;
} gc_case;

static int build_gc(dg_graph *g, void *ctx) {
    const gc_case *gc = ctx;
    const var_case *c = &gc->c;
    int q = dg_param_new(g, "q", 4, DG_SHAPE(c->B, c->S, c->Hq, c->D));
    int k = dg_param_new(g, "k", 4, DG_SHAPE(c->B, c->S, c->Hkv, c->D));
    int v = dg_param_new(g, "v", 4, DG_SHAPE(c->B, c->S, c->Hkv, c->D));
    int sink = c->softmax == DG_ATTN_SOFTMAX_LEARNABLE ? dg_param_new(g, "sink", 1, DG_SHAPE(c->Hq)) : -1;
    int lse = -1;
    int o = dg_attention_var(g, q, k, v, c->causal, 0, c->window, c->softmax, sink, &lse);
    return gc->from_lse ? lse : o;
}

static void test_gradcheck(void **state) {
    (void)state;
    const gc_case cases[] = {
        {{1, 70, 4, 2, 8, 1, 5, 2}, 0},  /* window and learnable sinks over two tiles */
        {{1, 70, 4, 2, 8, 1, 5, 2}, 1},  /* the same through lse */
        {{2, 9, 2, 1, 8, 1, 3, 1}, 0},   /* off-by-one */
        {{1, 80, 2, 2, 8, 1, 66, 0}, 0}, /* a window just over a tile */
    };
    int fails = 0;
    for (size_t i = 0; i < DG_ARRAY_LEN(cases); i++) {
        gc_case c = cases[i];
        char what[96];
        snprintf(what, sizeof what, "attention S%lld window %lld softmax %d from %s", (long long)c.c.S,
                 (long long)c.c.window, c.c.softmax, c.from_lse ? "lse" : "o");
        dg_gradcheck_opts opts = {.max_checks = 24, .nthreads = i % 2 ? 2 : 1};
        fails += dg_gradcheck(what, build_gc, NULL, &c, &opts);
    }
    assert_int_equal(fails, 0);
}

static void test_threads_bitwise(void **state) {
    (void)state;
    const var_case c = {2, 200, 4, 2, 16, 1, 70, 2};
    var_graph a = build(&c);
    const int outs[] = {a.o, a.lse, a.dq, a.dk, a.dv, a.dsink};
    dg_buffers b;
    dg_buffers_alloc(a.g, &b);
    fill(&a, &b, 5, 1.0);
    run(&a, &b, NULL);
    void *ref[6];
    for (int i = 0; i < 6; i++) {
        size_t bytes = dg_tensor_bytes(&a.g->tensors[outs[i]]);
        ref[i] = dg_malloc(bytes);
        memcpy(ref[i], b.ptr[outs[i]], bytes);
    }
    for (int nth = 2; nth <= 3; nth++) {
        for (int i = 0; i < 6; i++) memset(b.ptr[outs[i]], 0xff, dg_tensor_bytes(&a.g->tensors[outs[i]]));
        dg_test_team *team = dg_test_team_new(nth);
        run(&a, &b, dg_test_team_get(team));
        dg_test_team_free(team);
        for (int i = 0; i < 6; i++)
            if (memcmp(ref[i], b.ptr[outs[i]], dg_tensor_bytes(&a.g->tensors[outs[i]])) != 0)
                fail_msg("%d threads: output %d (%s) differs from 1 thread", nth, i, a.g->tensors[outs[i]].name);
    }
    for (int i = 0; i < 6; i++) dg_free(ref[i]);
    dg_buffers_free(&b);
    dg_graph_free(a.g);
}

/* The fused sink against vanilla attention then attn_sink on the same
 * leaves: o and lse (attn_sink's gradients: the finite differences below). */
static void test_sink_post_op(void **state) {
    (void)state;
    for (int softmax = 1; softmax <= 2; softmax++) {
        const var_case c = {2, 70, 4, 2, 8, 1, 9, softmax};
        var_graph a = build(&c);
        /* the same leaves feed the second form, in the same graph */
        int lse0 = -1, o0 = dg_attention_var(a.g, a.q, a.k, a.v, 1, 0, c.window, 0, -1, &lse0);
        int lse1 = -1, o1 = dg_attn_sink(a.g, o0, lse0, softmax, a.sink, &lse1);
        assert_true(o1 >= 0);
        dg_buffers b;
        dg_buffers_alloc(a.g, &b);
        fill(&a, &b, 91, 1.0);
        run(&a, &b, NULL);
        int bad = 0;
        for (int64_t i = 0; i < numel(&a, a.o); i++)
            bad += !near(((float *)b.ptr[o1])[i], ((float *)b.ptr[a.o])[i]);
        for (int64_t i = 0; i < numel(&a, a.lse); i++)
            bad += !near(((float *)b.ptr[lse1])[i], ((float *)b.ptr[a.lse])[i]);
        if (bad) fail_msg("softmax %d: attn_sink after attention differs from the fused sink in %d values", softmax, bad);
        dg_buffers_free(&b);
        dg_graph_free(a.g);
    }
}

typedef struct sink_gc {
    int softmax, from_lse;
} sink_gc;

static int build_sink_gc(dg_graph *g, void *ctx) {
    const sink_gc *sc = ctx;
    int q = dg_param_new(g, "q", 4, DG_SHAPE(1, 20, 2, 8));
    int k = dg_param_new(g, "k", 4, DG_SHAPE(1, 20, 1, 8));
    int v = dg_param_new(g, "v", 4, DG_SHAPE(1, 20, 1, 8));
    int sink = sc->softmax == 2 ? dg_param_new(g, "sink", 1, DG_SHAPE(2)) : -1;
    int lse = -1, o = dg_attention_var(g, q, k, v, 1, 0, 0, 0, -1, &lse);
    int lse2 = -1, o2 = dg_attn_sink(g, o, lse, sc->softmax, sink, &lse2);
    return sc->from_lse ? lse2 : o2;
}

static void test_sink_post_op_gradcheck(void **state) {
    (void)state;
    const sink_gc cases[] = {{2, 0}, {2, 1}, {1, 0}};
    int fails = 0;
    for (size_t i = 0; i < DG_ARRAY_LEN(cases); i++) {
        sink_gc c = cases[i];
        char what[64];
        snprintf(what, sizeof what, "attn_sink softmax %d from %s", c.softmax, c.from_lse ? "lse" : "o");
        dg_gradcheck_opts opts = {.max_checks = 24};
        fails += dg_gradcheck(what, build_sink_gc, NULL, &c, &opts);
    }
    assert_int_equal(fails, 0);
}

static void expect_rule(int causal, int64_t window, int softmax, int give_sink, const char *rule) {
    dg_graph *g = dg_graph_new("bad");
    int q = dg_param_new(g, "q", 4, DG_SHAPE(1, 8, 4, 8));
    int k = dg_param_new(g, "k", 4, DG_SHAPE(1, 8, 2, 8));
    int sink = give_sink ? dg_param_new(g, "sink", 1, DG_SHAPE(3)) : -1;
    int o = dg_attention_var(g, q, k, k, causal, 0, window, softmax, sink, NULL);
    assert_int_equal(o, -1);
    assert_int_equal(g->status, DG_EINPUT);
    if (!strstr(g->err.msg, rule)) fail_msg("message '%s' does not name %s", g->err.msg, rule);
    dg_graph_free(g);
}

/* The cost counts the pairs a window leaves: S = 10, W = 4: 4 * 5 / 2 + 6 * 4 = 34 per head. */
static void test_window_cost(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("cost");
    int q = dg_param_new(g, "q", 4, DG_SHAPE(2, 10, 4, 8));
    int k = dg_param_new(g, "k", 4, DG_SHAPE(2, 10, 2, 8));
    int o = dg_attention_var(g, q, k, k, 1, 0, 4, 0, -1, NULL);
    assert_true(o >= 0);
    const dg_node *n = &g->nodes[g->tensors[o].producer];
    dg_cost cost = {0, 0};
    n->op->cost(g, n, &cost);
    assert_true(fabs(cost.flops - 4.0 * 2 * 4 * 34 * 8) < 1e-6);
    dg_graph_free(g);
}

static void test_rules(void **state) {
    (void)state;
    expect_rule(0, 4, 0, 0, "rule 'attrs' broken");  /* a window needs causal */
    expect_rule(1, -1, 0, 0, "rule 'attrs' broken"); /* negative window */
    expect_rule(1, 0, 3, 0, "rule 'attrs' broken");  /* no such softmax */
    expect_rule(1, 0, 2, 1, "rule 'shape' broken");  /* sink [3] for 4 heads */
}

int main(void) {
    dg_cpu_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values),    cmocka_unit_test(test_values_large_scores),
        cmocka_unit_test(test_gradcheck), cmocka_unit_test(test_threads_bitwise),
        cmocka_unit_test(test_rules),     cmocka_unit_test(test_sink_post_op),
        cmocka_unit_test(test_sink_post_op_gradcheck), cmocka_unit_test(test_window_cost),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
