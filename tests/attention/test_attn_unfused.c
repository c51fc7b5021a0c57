/* test_attn_unfused — unfused attention (ops/dg_op_attn_unfused,
 * kernels/cpu/dg_cpu_attn_unfused):
 *  - the chain scores -> softmax -> context computes the fused attention's
 *    o and, through autodiff, its dq, dk, dv (MHA, GQA, MQA, causal and
 *    not), within 2e-5 + 2e-4 |ref|;
 *  - finite differences through dg_autodiff for each op alone (scores,
 *    context, context_t with a group of 2, softmax causal and not) and for
 *    the whole chain with attention dropout (the mask drawn again in the
 *    backward);
 *  - the kernels give the same bits with 1, 2 and 3 threads;
 *  - shape rules reject mismatched inputs with "rule '...' broken". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "dg_autodiff.h"
#include "dg_cpu_attn_unfused.h"
#include "dg_cpu_gemm.h"
#include "dg_exec_serial.h"
#include "dg_gradcheck.h"
#include "dg_op_attention.h"
#include "dg_op_attn_unfused.h"
#include "dg_op_basic.h"

typedef struct ucase {
    int64_t B, S, Hq, Hkv, D;
    int causal;
} ucase;

/* ---- the chain against the fused op ------------------------------------------------- */

typedef struct side {
    dg_graph *g;
    int q, k, v, r, o;
} side;

/* o = attention(q, k, v) (fused or the unfused chain), loss = sum(o r) */
static side build_side(const ucase *c, int unfused) {
    side s;
    s.g = dg_graph_new(unfused ? "unfused" : "fused");
    s.q = dg_param_new(s.g, "q", 4, DG_SHAPE(c->B, c->S, c->Hq, c->D));
    s.k = dg_param_new(s.g, "k", 4, DG_SHAPE(c->B, c->S, c->Hkv, c->D));
    s.v = dg_param_new(s.g, "v", 4, DG_SHAPE(c->B, c->S, c->Hkv, c->D));
    s.r = dg_input_new(s.g, "r", DG_F32, 4, DG_SHAPE(c->B, c->S, c->Hq, c->D));
    double scale = 1.0 / sqrt((double)c->D);
    s.o = unfused ? dg_attention_unfused(s.g, s.q, s.k, s.v, c->causal, scale, 0.0, -1, 0)
                  : dg_attention_ex(s.g, s.q, s.k, s.v, c->causal, scale, NULL);
    int loss = dg_sum(s.g, dg_mul(s.g, s.o, s.r));
    dg_err err = {{0}};
    assert_int_equal(dg_autodiff(s.g, loss, dg_ops_autodiff(), NULL, &err), DG_OK);
    assert_int_equal(s.g->status, DG_OK);
    return s;
}

static void run_side(const side *s, dg_buffers *b, uint64_t seed) {
    dg_test_rng rng = {seed};
    int leaves[] = {s->q, s->k, s->v, s->r};
    for (size_t i = 0; i < DG_ARRAY_LEN(leaves); i++)
        dg_test_fill_normal(&rng, b->ptr[leaves[i]], dg_tensor_numel(&s->g->tensors[leaves[i]]), 1.0);
    dg_err err = {{0}};
    if (dg_run_serial(s->g, NULL, b, NULL, &err) != DG_OK) fail_msg("run failed: %s", err.msg);
}

static int compare(const char *what, const float *got, const float *ref, int64_t n) {
    int bad = 0;
    for (int64_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - ref[i]) <= 2e-5 + 2e-4 * fabs((double)ref[i]))) {
            if (bad++ < 5) fprintf(stderr, "%s[%lld]: unfused %.7g, fused %.7g\n", what, (long long)i, got[i], ref[i]);
        }
    return bad;
}

static void test_matches_fused(void **state) {
    (void)state;
    const ucase cases[] = {{2, 37, 4, 2, 16, 1}, {1, 70, 3, 1, 8, 1}, {1, 64, 2, 2, 32, 1}, {2, 20, 4, 4, 8, 0},
                           {1, 1, 2, 1, 4, 1}};
    for (size_t ci = 0; ci < DG_ARRAY_LEN(cases); ci++) {
        side f = build_side(&cases[ci], 0), u = build_side(&cases[ci], 1);
        dg_buffers bf, bu;
        dg_buffers_alloc(f.g, &bf);
        dg_buffers_alloc(u.g, &bu);
        run_side(&f, &bf, 5 + ci);
        run_side(&u, &bu, 5 + ci);
        int pf[] = {f.o, f.g->tensors[f.q].grad, f.g->tensors[f.k].grad, f.g->tensors[f.v].grad};
        int pu[] = {u.o, u.g->tensors[u.q].grad, u.g->tensors[u.k].grad, u.g->tensors[u.v].grad};
        const char *names[] = {"o", "dq", "dk", "dv"};
        int bad = 0;
        for (int i = 0; i < 4; i++) {
            assert_true(pf[i] >= 0 && pu[i] >= 0);
            bad += compare(names[i], bu.ptr[pu[i]], bf.ptr[pf[i]], dg_tensor_numel(&f.g->tensors[pf[i]]));
        }
        if (bad) fail_msg("case %zu: %d values differ from the fused attention", ci, bad);
        dg_buffers_free(&bf);
        dg_buffers_free(&bu);
        dg_graph_free(f.g);
        dg_graph_free(u.g);
    }
}

/* ---- finite differences ------------------------------------------------------------------- */

typedef struct gc_case {
    int which; /* 0 scores, 1 context, 2 context_t, 3 softmax, 4 the chain with dropout */
    ucase c;
} gc_case;

static int build_gc(dg_graph *g, void *ctx) {
    const gc_case *gc = ctx;
    const ucase *c = &gc->c;
    int64_t B = c->B, S = c->S, Hq = c->Hq, Hkv = c->Hkv, D = c->D;
    switch (gc->which) {
    case 0:
        return dg_attn_scores(g, dg_param_new(g, "a", 4, DG_SHAPE(B, S, Hq, D)),
                              dg_param_new(g, "b", 4, DG_SHAPE(B, S, Hkv, D)), 0.7);
    case 1:
        return dg_attn_context(g, dg_param_new(g, "p", 4, DG_SHAPE(B, Hq, S, S)),
                               dg_param_new(g, "b", 4, DG_SHAPE(B, S, Hkv, D)), 0.7);
    case 2:
        return dg_attn_context_t(g, dg_param_new(g, "p", 4, DG_SHAPE(B, Hq, S, S)),
                                 dg_param_new(g, "a", 4, DG_SHAPE(B, S, Hq, D)), 0.7, (int)(Hq / Hkv));
    case 3: return dg_attn_softmax(g, dg_param_new(g, "s", 4, DG_SHAPE(B, Hq, S, S)), c->causal);
    default: {
        int q = dg_param_new(g, "q", 4, DG_SHAPE(B, S, Hq, D));
        int k = dg_param_new(g, "k", 4, DG_SHAPE(B, S, Hkv, D));
        int v = dg_param_new(g, "v", 4, DG_SHAPE(B, S, Hkv, D));
        int key = dg_input_new(g, "rng_key", DG_I32, 1, DG_SHAPE(4));
        return dg_attention_unfused(g, q, k, v, c->causal, 1.0 / sqrt((double)D), 0.3, key, 7);
    }
    }
}

static void init_key(const dg_graph *g, dg_buffers *b, void *ctx) {
    (void)ctx;
    for (int t = 0; t < g->n_tensors; t++)
        if (!strcmp(g->tensors[t].name, "rng_key")) {
            int32_t *k = b->ptr[t];
            k[0] = 1234, k[1] = 3, k[2] = 0, k[3] = 0;
        }
}

static void test_gradcheck(void **state) {
    (void)state;
    const gc_case cases[] = {
        {0, {2, 9, 4, 2, 8, 1}}, {1, {2, 9, 4, 2, 8, 1}}, {2, {1, 9, 4, 2, 8, 1}}, {3, {1, 9, 2, 2, 8, 1}},
        {3, {1, 9, 2, 2, 8, 0}}, {4, {1, 12, 4, 2, 8, 1}}, {4, {2, 10, 2, 1, 8, 0}},
    };
    const char *names[] = {"attn_scores", "attn_context", "attn_context_t", "attn_softmax", "unfused chain + dropout"};
    int fails = 0;
    for (size_t i = 0; i < DG_ARRAY_LEN(cases); i++) {
        char what[96];
        snprintf(what, sizeof what, "%s causal %d", names[cases[i].which], cases[i].c.causal);
        dg_gradcheck_opts opts = {.max_checks = 24, .nthreads = i % 2 ? 2 : 1};
        fails += dg_gradcheck(what, build_gc, init_key, (void *)&cases[i], &opts);
    }
    assert_int_equal(fails, 0);
}

/* ---- thread counts ------------------------------------------------------------------------ */

static void test_threads_bitwise(void **state) {
    (void)state;
    dg_unfused_dims d = {2, 45, 4, 2, 16};
    int64_t nh = d.B * d.S * d.Ha * d.D, nk = d.B * d.S * d.Hb * d.D, ns = d.B * d.Ha * d.S * d.S;
    float *a = dg_malloc(sizeof(float) * (size_t)nh), *b = dg_malloc(sizeof(float) * (size_t)nk);
    dg_test_rng rng = {9};
    dg_test_fill_normal(&rng, a, nh, 1.0);
    dg_test_fill_normal(&rng, b, nk, 1.0);
    float *ref[5], *got[5];
    int64_t sizes[5] = {ns, ns, nh, nk, ns};
    for (int i = 0; i < 5; i++) {
        ref[i] = dg_malloc(sizeof(float) * (size_t)sizes[i]);
        got[i] = dg_malloc(sizeof(float) * (size_t)sizes[i]);
    }
    for (int nth = 1; nth <= 3; nth++) {
        dg_test_team *tt = dg_test_team_new(nth);
        const dg_team *t = dg_test_team_get(tt);
        float **o = nth == 1 ? ref : got;
        for (int i = 0; i < 5; i++) memset(o[i], 0xff, sizeof(float) * (size_t)sizes[i]);
        dg_cpu_attn_scores(t, &d, 0.25f, a, b, o[0]);
        dg_cpu_attn_softmax(t, d.B * d.Ha * d.S, d.S, 1, o[0], o[1]);
        dg_cpu_attn_context(t, &d, 1.0f, o[1], b, o[2]);
        dg_cpu_attn_context_t(t, &d, 0.5f, o[1], a, o[3]);
        dg_cpu_attn_softmax_bwd(t, d.B * d.Ha * d.S, d.S, o[1], o[0], o[4]);
        if (nth > 1)
            for (int i = 0; i < 5; i++)
                if (memcmp(ref[i], got[i], sizeof(float) * (size_t)sizes[i]))
                    fail_msg("kernel %d differs with %d threads", i, nth);
        dg_test_team_free(tt);
    }
    for (int i = 0; i < 5; i++) {
        dg_free(ref[i]);
        dg_free(got[i]);
    }
    dg_free(a);
    dg_free(b);
}

/* ---- shape rules --------------------------------------------------------------------------- */

static void test_shape_rules(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("bad");
    int q = dg_param_new(g, "q", 4, DG_SHAPE(1, 8, 4, 8));
    int k = dg_param_new(g, "k", 4, DG_SHAPE(1, 8, 3, 8)); /* 3 does not divide 4 */
    assert_true(dg_attn_scores(g, q, k, 1.0) < 0);
    assert_non_null(strstr(g->err.msg, "rule 'shape' broken"));
    dg_graph_free(g);
    g = dg_graph_new("bad2");
    int p = dg_param_new(g, "p", 4, DG_SHAPE(1, 4, 8, 7)); /* not square */
    assert_true(dg_attn_softmax(g, p, 1) < 0);
    assert_non_null(strstr(g->err.msg, "rule 'shape' broken"));
    dg_graph_free(g);
    g = dg_graph_new("bad3");
    p = dg_param_new(g, "p", 4, DG_SHAPE(1, 4, 8, 8));
    int a = dg_param_new(g, "a", 4, DG_SHAPE(1, 8, 4, 8));
    assert_true(dg_attn_context_t(g, p, a, 1.0, 3) < 0);
    assert_non_null(strstr(g->err.msg, "rule 'attrs' broken"));
    dg_graph_free(g);
}

int main(void) {
    dg_cpu_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_fused),
        cmocka_unit_test(test_gradcheck),
        cmocka_unit_test(test_threads_bitwise),
        cmocka_unit_test(test_shape_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
