/* test_attn_dropout — attention dropout inside the fused attention op
 * (ops/dg_op_attention.h attrs f[1], i[3]; kernels/cpu/dg_cpu_attention.h,
 * dg_attn_drop), against an independent reference:
 *  - forward and backward against the unfused chain (scores -> softmax ->
 *    dropout op -> context, ops/dg_op_attn_unfused.h) with the same key and
 *    site: the dropout op draws the mask there, the fused kernel its own
 *    online-softmax draw; o, dq, dk, dv within 2e-5 + 2e-4 |ref| (MHA, GQA,
 *    MQA, causal and not, sequences across tile boundaries);
 *  - finite differences of the backward with the mask fixed by the key
 *    (causal GQA; a window with a learnable sink too);
 *  - the keep rate: with q = 0 (uniform probabilities) and v = 1, o times
 *    (1 - p) is a row's kept fraction; over 2^19 draws it is 1 - p within 5
 *    standard deviations, and with the training flag 0 o is exactly 1;
 *  - a key that names a later first head draws those heads' part of the
 *    whole mask (TP's slice: dg_op_attn_key.h);
 *  - the kernels give the same bits with 1 and 3 threads. */
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
#include "dg_op_attn_key.h"
#include "dg_op_attn_unfused.h"
#include "dg_op_basic.h"

#define P_DROP 0.3
#define SITE 11

typedef struct dcase {
    int64_t B, S, Hq, Hkv, D;
    int causal;
} dcase;

static void set_key(const dg_graph *g, dg_buffers *b, int train) {
    for (int t = 0; t < g->n_tensors; t++)
        if (!strcmp(g->tensors[t].name, "key")) {
            int32_t *k = dg_buf_i32(b, t);
            k[0] = 1234, k[1] = 7, k[2] = 40, k[3] = train;
        }
}

/* The fused op with dropout on q, k, v and a 4-int key named "key". */
static int fused(dg_graph *g, int q, int k, int v, int causal, double p, int64_t window, int softmax, int sink) {
    int key = dg_input_new(g, "key", DG_I32, 1, DG_SHAPE(4));
    dg_attn_opts o = {.causal = causal, .scale = 1.0 / sqrt((double)g->tensors[q].shape[3]), .window = window,
                      .softmax = softmax, .sink = sink, .dropout = p, .key = dg_attn_key(g, key, -1, 0),
                      .site = SITE};
    return dg_attention_opt(g, q, k, v, &o, NULL);
}

/* ---- against the unfused chain ------------------------------------------------------ */

typedef struct side {
    dg_graph *g;
    int q, k, v, r, o;
} side;

static side build_side(const dcase *c, int unfused, double p) {
    side s;
    s.g = dg_graph_new(unfused ? "unfused" : "fused");
    s.q = dg_param_new(s.g, "q", 4, DG_SHAPE(c->B, c->S, c->Hq, c->D));
    s.k = dg_param_new(s.g, "k", 4, DG_SHAPE(c->B, c->S, c->Hkv, c->D));
    s.v = dg_param_new(s.g, "v", 4, DG_SHAPE(c->B, c->S, c->Hkv, c->D));
    s.r = dg_input_new(s.g, "r", DG_F32, 4, DG_SHAPE(c->B, c->S, c->Hq, c->D));
    if (unfused) {
        int key = dg_input_new(s.g, "key", DG_I32, 1, DG_SHAPE(4));
        s.o = dg_attention_unfused(s.g, s.q, s.k, s.v, c->causal, 1.0 / sqrt((double)c->D), p, key, SITE);
    } else {
        s.o = fused(s.g, s.q, s.k, s.v, c->causal, p, 0, DG_ATTN_SOFTMAX_VANILLA, -1);
    }
    int loss = dg_sum(s.g, dg_mul(s.g, s.o, s.r));
    dg_err err = {{0}};
    assert_int_equal(dg_autodiff(s.g, loss, dg_ops_autodiff(), NULL, &err), DG_OK);
    assert_int_equal(s.g->status, DG_OK);
    return s;
}

static void run_side(const side *s, dg_buffers *b, uint64_t seed, int train) {
    dg_test_rng rng = {seed};
    int leaves[] = {s->q, s->k, s->v, s->r};
    for (size_t i = 0; i < DG_ARRAY_LEN(leaves); i++)
        dg_test_fill_normal(&rng, b->ptr[leaves[i]], dg_tensor_numel(&s->g->tensors[leaves[i]]), 1.0);
    set_key(s->g, b, train);
    dg_err err = {{0}};
    if (dg_run_serial(s->g, NULL, b, NULL, &err) != DG_OK) fail_msg("run failed: %s", err.msg);
}

static int compare(const char *what, const float *got, const float *ref, int64_t n) {
    int bad = 0;
    for (int64_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - ref[i]) <= 2e-5 + 2e-4 * fabs((double)ref[i]))) {
            if (bad++ < 5) fprintf(stderr, "%s[%lld]: fused %.7g, unfused %.7g\n", what, (long long)i, got[i], ref[i]);
        }
    return bad;
}

static void test_matches_unfused(void **state) {
    (void)state;
    const dcase cases[] = {{2, 37, 4, 2, 16, 1}, {1, 70, 3, 1, 8, 1}, {1, 130, 2, 2, 8, 1}, {2, 20, 4, 4, 8, 0},
                           {1, 1, 2, 1, 4, 1}};
    for (size_t ci = 0; ci < DG_ARRAY_LEN(cases); ci++) {
        side f = build_side(&cases[ci], 0, P_DROP), u = build_side(&cases[ci], 1, P_DROP);
        side n = build_side(&cases[ci], 0, 0.0);
        dg_buffers bf, bu, bn;
        dg_buffers_alloc(f.g, &bf);
        dg_buffers_alloc(u.g, &bu);
        dg_buffers_alloc(n.g, &bn);
        run_side(&f, &bf, 5 + ci, 1);
        run_side(&u, &bu, 5 + ci, 1);
        run_side(&n, &bn, 5 + ci, 1);
        int pf[] = {f.o, f.g->tensors[f.q].grad, f.g->tensors[f.k].grad, f.g->tensors[f.v].grad};
        int pu[] = {u.o, u.g->tensors[u.q].grad, u.g->tensors[u.k].grad, u.g->tensors[u.v].grad};
        const char *names[] = {"o", "dq", "dk", "dv"};
        int bad = 0;
        for (int i = 0; i < 4; i++) {
            assert_true(pf[i] >= 0 && pu[i] >= 0);
            bad += compare(names[i], bf.ptr[pf[i]], bu.ptr[pu[i]], dg_tensor_numel(&f.g->tensors[pf[i]]));
        }
        if (bad) fail_msg("case %zu: %d values differ from the unfused chain with dropout", ci, bad);
        /* and the dropout did something: o differs from no dropout's */
        int64_t no = dg_tensor_numel(&f.g->tensors[f.o]);
        if (cases[ci].S > 1 && !memcmp(bf.ptr[f.o], bn.ptr[n.o], sizeof(float) * (size_t)no))
            fail_msg("case %zu: dropout %g changed nothing", ci, P_DROP);
        dg_buffers_free(&bf);
        dg_buffers_free(&bu);
        dg_buffers_free(&bn);
        dg_graph_free(f.g);
        dg_graph_free(u.g);
        dg_graph_free(n.g);
    }
}

/* ---- finite differences ------------------------------------------------------------------- */

typedef struct gc_case {
    dcase c;
    int64_t window;
    int softmax;
} gc_case;

static int build_gc(dg_graph *g, void *ctx) {
    const gc_case *gc = ctx;
    const dcase *c = &gc->c;
    int q = dg_param_new(g, "q", 4, DG_SHAPE(c->B, c->S, c->Hq, c->D));
    int k = dg_param_new(g, "k", 4, DG_SHAPE(c->B, c->S, c->Hkv, c->D));
    int v = dg_param_new(g, "v", 4, DG_SHAPE(c->B, c->S, c->Hkv, c->D));
    int sink = gc->softmax == DG_ATTN_SOFTMAX_LEARNABLE ? dg_param_new(g, "sink", 1, DG_SHAPE(c->Hq)) : -1;
    return fused(g, q, k, v, c->causal, P_DROP, gc->window, gc->softmax, sink);
}

static void test_gradcheck(void **state) {
    (void)state;
    const gc_case cases[] = {
        {{1, 12, 4, 2, 8, 1}, 0, DG_ATTN_SOFTMAX_VANILLA},
        {{2, 10, 2, 1, 8, 0}, 0, DG_ATTN_SOFTMAX_VANILLA},
        {{1, 12, 4, 2, 8, 1}, 5, DG_ATTN_SOFTMAX_LEARNABLE},
    };
    int fails = 0;
    for (size_t i = 0; i < DG_ARRAY_LEN(cases); i++) {
        char what[96];
        snprintf(what, sizeof what, "attention dropout case %zu", i);
        dg_gradcheck_opts opts = {.max_checks = 24, .nthreads = i % 2 ? 2 : 1};
        fails += dg_gradcheck(what, build_gc, dg_gc_init_key, (void *)&cases[i], &opts);
    }
    assert_int_equal(fails, 0);
}

/* ---- the keep rate ------------------------------------------------------------------------- */

/* o of attention with q = 0 (all probabilities 1/S, not causal) and v = 1,
 * times (1 - p): each row's kept fraction. Returns the mean over rows. */
static double kept_fraction(int train, float *min_o, float *max_o) {
    const int64_t B = 2, S = 256, H = 4, D = 4;
    dg_graph *g = dg_graph_new("rate");
    int q = dg_input_new(g, "q", DG_F32, 4, DG_SHAPE(B, S, H, D));
    int k = dg_input_new(g, "k", DG_F32, 4, DG_SHAPE(B, S, H, D));
    int v = dg_input_new(g, "v", DG_F32, 4, DG_SHAPE(B, S, H, D));
    int o = fused(g, q, k, v, 0, P_DROP, 0, DG_ATTN_SOFTMAX_VANILLA, -1);
    assert_int_equal(g->status, DG_OK);
    dg_buffers b;
    dg_buffers_alloc(g, &b);
    int64_t n = B * S * H * D;
    float *qb = b.ptr[q], *kb = b.ptr[k], *vb = b.ptr[v];
    dg_test_rng rng = {3};
    dg_test_fill_normal(&rng, kb, n, 1.0);
    for (int64_t i = 0; i < n; i++) qb[i] = 0.0f, vb[i] = 1.0f;
    set_key(g, &b, train);
    dg_err err = {{0}};
    if (dg_run_serial(g, NULL, &b, NULL, &err) != DG_OK) fail_msg("run failed: %s", err.msg);
    const float *ob = b.ptr[o];
    double sum = 0;
    *min_o = INFINITY, *max_o = -INFINITY;
    for (int64_t i = 0; i < n; i += D) { /* one value per row: D equal ones */
        sum += ob[i] * (1.0 - P_DROP);
        *min_o = fminf(*min_o, ob[i]);
        *max_o = fmaxf(*max_o, ob[i]);
    }
    dg_buffers_free(&b);
    dg_graph_free(g);
    return sum / (double)(B * S * H);
}

static void test_keep_rate(void **state) {
    (void)state;
    float lo, hi;
    double kept = kept_fraction(1, &lo, &hi);
    double draws = 2.0 * 256 * 4 * 256, sd = sqrt(P_DROP * (1 - P_DROP) / draws);
    if (fabs(kept - (1 - P_DROP)) > 5 * sd)
        fail_msg("kept fraction %.5f, expected %.3f within %.5f", kept, 1 - P_DROP, 5 * sd);
    if (!(hi > lo)) fail_msg("every row kept the same: %g", lo);
    kept = kept_fraction(0, &lo, &hi);
    if (lo != 1.0f || hi != 1.0f) fail_msg("evaluation (training flag 0) dropped: o in [%g, %g]", lo, hi);
}

/* ---- the head offset: TP's slice of the mask ------------------------------------------------ */

static void test_head_offset(void **state) {
    (void)state;
    const int64_t B = 1, S = 40, H = 4, D = 8, h0 = 2;
    /* the whole: 4 heads; the slice: heads 2, 3 with the key's first head 2 */
    dg_graph *gw = dg_graph_new("whole"), *gs = dg_graph_new("slice");
    int qw = dg_input_new(gw, "q", DG_F32, 4, DG_SHAPE(B, S, H, D));
    int kw = dg_input_new(gw, "k", DG_F32, 4, DG_SHAPE(B, S, H, D));
    int vw = dg_input_new(gw, "v", DG_F32, 4, DG_SHAPE(B, S, H, D));
    int ow = fused(gw, qw, kw, vw, 1, P_DROP, 0, DG_ATTN_SOFTMAX_VANILLA, -1);
    int qs = dg_input_new(gs, "q", DG_F32, 4, DG_SHAPE(B, S, H - h0, D));
    int ks = dg_input_new(gs, "k", DG_F32, 4, DG_SHAPE(B, S, H - h0, D));
    int vs = dg_input_new(gs, "v", DG_F32, 4, DG_SHAPE(B, S, H - h0, D));
    int keys = dg_input_new(gs, "key", DG_I32, 1, DG_SHAPE(4));
    int coord = dg_input_new(gs, "coord", DG_I32, 1, DG_SHAPE(1));
    dg_attn_opts so = {.causal = 1, .scale = 1.0 / sqrt((double)D), .dropout = P_DROP,
                       .key = dg_attn_key(gs, keys, coord, H - h0), .site = SITE};
    int os = dg_attention_opt(gs, qs, ks, vs, &so, NULL);
    assert_int_equal(gw->status, DG_OK);
    assert_int_equal(gs->status, DG_OK);
    dg_buffers bw, bs;
    dg_buffers_alloc(gw, &bw);
    dg_buffers_alloc(gs, &bs);
    dg_test_rng rng = {17};
    int w[] = {qw, kw, vw}, s[] = {qs, ks, vs};
    for (int i = 0; i < 3; i++) {
        float *x = bw.ptr[w[i]], *y = bs.ptr[s[i]];
        dg_test_fill_normal(&rng, x, B * S * H * D, 1.0);
        for (int64_t t = 0; t < B * S; t++) memcpy(y + t * (H - h0) * D, x + (t * H + h0) * D, sizeof(float) * (size_t)((H - h0) * D));
    }
    set_key(gw, &bw, 1);
    set_key(gs, &bs, 1);
    *dg_buf_i32(&bs, coord) = 1; /* rank 1 of 2: first head 1 x 2 */
    dg_err err = {{0}};
    if (dg_run_serial(gw, NULL, &bw, NULL, &err) != DG_OK || dg_run_serial(gs, NULL, &bs, NULL, &err) != DG_OK)
        fail_msg("run failed: %s", err.msg);
    const float *x = bw.ptr[ow], *y = bs.ptr[os];
    for (int64_t t = 0; t < B * S; t++)
        if (memcmp(y + t * (H - h0) * D, x + (t * H + h0) * D, sizeof(float) * (size_t)((H - h0) * D)))
            fail_msg("token %lld: the slice's heads differ from the whole's heads %lld..", (long long)t, (long long)h0);
    dg_buffers_free(&bw);
    dg_buffers_free(&bs);
    dg_graph_free(gw);
    dg_graph_free(gs);
}

/* ---- thread counts ------------------------------------------------------------------------ */

static void test_threads_bitwise(void **state) {
    (void)state;
    dg_attn_dims d = {2, 150, 4, 2, 16, 1, 0.25f, 0, 0, 0, {.p = 0.0f}};
    const int32_t key[DG_ATTN_KEY_LEN] = {99, 2, 8, 1, 0};
    d.drop = dg_attn_drop_make(key, SITE, P_DROP);
    int64_t nq = d.B * d.S * d.Hq * d.D, nk = d.B * d.S * d.Hkv * d.D, nl = d.B * d.Hq * d.S;
    int64_t sizes[] = {nq, nk, nk, nq, nq, nl, nq, nk, nk}; /* q k v do | o lse dq dk dv */
    float *buf[2][9];
    dg_test_rng rng = {21};
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < 9; i++) buf[r][i] = dg_malloc(sizeof(float) * (size_t)sizes[i]);
    for (int i = 0; i < 4; i++) {
        dg_test_fill_normal(&rng, buf[0][i], sizes[i], 1.0);
        memcpy(buf[1][i], buf[0][i], sizeof(float) * (size_t)sizes[i]);
    }
    for (int r = 0; r < 2; r++) {
        int nth = r ? 3 : 1;
        dg_test_team *tt = dg_test_team_new(nth);
        const dg_team *t = dg_test_team_get(tt);
        size_t ws = dg_cpu_attention_fwd_workspace(&d, nth);
        if (dg_cpu_attention_bwd_workspace(&d, nth) > ws) ws = dg_cpu_attention_bwd_workspace(&d, nth);
        void *w = dg_aligned_alloc(ws);
        float **b = buf[r];
        dg_cpu_attention_fwd(t, &d, b[0], b[1], b[2], b[4], b[5], w);
        dg_cpu_attention_bwd(t, &d, b[0], b[1], b[2], b[4], b[3], b[5], NULL, b[6], b[7], b[8], w);
        dg_free(w);
        dg_test_team_free(tt);
    }
    for (int i = 4; i < 9; i++)
        if (memcmp(buf[0][i], buf[1][i], sizeof(float) * (size_t)sizes[i]))
            fail_msg("output %d differs between 1 and 3 threads", i);
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < 9; i++) dg_free(buf[r][i]);
}

int main(void) {
    dg_cpu_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_unfused),
        cmocka_unit_test(test_gradcheck),
        cmocka_unit_test(test_keep_rate),
        cmocka_unit_test(test_head_offset),
        cmocka_unit_test(test_threads_bitwise),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
