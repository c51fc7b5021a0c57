/* test_dense_grad.c — finite-difference gradients (dg_gradcheck: build ->
 * autodiff -> compare) for the dense transformer ops: embedding, rmsnorm,
 * layernorm (also per head, as --qk-layernorm uses them), rope, reshape,
 * swiglu, gelu_tanh, glu (SwiGLU and quick GeGLU with Megatron's GLU
 * offset and clamp), softmax cross-entropy, and a small language-model
 * chain of them.
 *
 * Tolerances: dg_gradcheck's defaults (central differences with eps 1e-2,
 * pass when |analytic - numeric| <= 1e-3 + 2e-2 * max(|analytic|, |numeric|))
 * unless a test states otherwise. The forward is fp32, so eps cannot be much
 * smaller without rounding noise dominating the difference quotient.
 * Every check also runs with a 2-thread team (opts.nthreads = 2). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>
#include <math.h>

#include "dg_exec_serial.h"
#include "dg_gradcheck.h"
#include "dg_cpu_dropout.h"
#include "dg_ops.h"

/* Run one gradcheck with 1 and with 2 threads. */
static void gc(const char *what, dg_gc_build_fn build, dg_gc_init_fn init, void *ctx,
               const dg_gradcheck_opts *base) {
    for (int nth = 1; nth <= 2; nth++) {
        dg_gradcheck_opts o = {0};
        if (base) o = *base;
        o.nthreads = nth;
        assert_int_equal(dg_gradcheck(what, build, init, ctx, &o), 0);
    }
}

/* Fill an int32 leaf named `name` with values in [0, mod), using a fixed
 * pattern that repeats ids (so scatter-adds accumulate). */
static void fill_ids(const dg_graph *g, dg_buffers *b, const char *name, int mod) {
    for (int t = 0; t < g->n_tensors; t++) {
        if (strcmp(g->tensors[t].name, name) != 0) continue;
        int32_t *p = dg_buf_i32(b, t);
        int64_t n = dg_tensor_numel(&g->tensors[t]);
        for (int64_t i = 0; i < n; i++) p[i] = (int32_t)((i * 5 + 3) % mod);
        return;
    }
    fail_msg("no tensor named %s", name);
}

/* A loss mask with zeros in it: rows 1, 4, 7, ... are masked out. */
static void fill_mask(const dg_graph *g, dg_buffers *b, const char *name) {
    for (int t = 0; t < g->n_tensors; t++) {
        if (strcmp(g->tensors[t].name, name) != 0) continue;
        float *p = dg_buf_f32(b, t);
        int64_t n = dg_tensor_numel(&g->tensors[t]);
        for (int64_t i = 0; i < n; i++) p[i] = (i % 3 == 1) ? 0.0f : 1.0f;
        return;
    }
    fail_msg("no tensor named %s", name);
}

/* ---- embedding ------------------------------------------------------------------ */

#define EMB_V 7

static int build_embedding(dg_graph *g, void *ctx) {
    (void)ctx;
    int table = dg_param_new(g, "table", 2, DG_SHAPE(EMB_V, 5));
    int tok = dg_input_new(g, "tokens", DG_I32, 2, DG_SHAPE(2, 6));
    return dg_embedding(g, table, tok);
}

static void init_tokens(const dg_graph *g, dg_buffers *b, void *ctx) {
    (void)ctx;
    fill_ids(g, b, "tokens", EMB_V);
}

static void test_embedding_grad(void **s) {
    (void)s;
    /* all V*H = 35 elements checked: rows hit 0, 1 and several times */
    dg_gradcheck_opts o = {.max_checks = 40};
    gc("embedding", build_embedding, init_tokens, NULL, &o);
}

/* ---- norms ------------------------------------------------------------------------ */

static int build_rmsnorm(dg_graph *g, void *ctx) {
    (void)ctx;
    int x = dg_param_new(g, "x", 3, DG_SHAPE(2, 3, 8));
    int w = dg_param_new(g, "w", 1, DG_SHAPE(8));
    return dg_rmsnorm(g, x, w, 1e-5);
}

static void test_rmsnorm_grad(void **s) {
    (void)s;
    gc("rmsnorm", build_rmsnorm, NULL, NULL, NULL);
}

static int build_layernorm(dg_graph *g, void *ctx) {
    (void)ctx;
    int x = dg_param_new(g, "x", 3, DG_SHAPE(2, 3, 8));
    int w = dg_param_new(g, "w", 1, DG_SHAPE(8));
    int b = dg_param_new(g, "b", 1, DG_SHAPE(8));
    return dg_layernorm(g, x, w, b, 1e-5);
}

static void test_layernorm_grad(void **s) {
    (void)s;
    gc("layernorm", build_layernorm, NULL, NULL, NULL);
}

/* --qk-layernorm's use of the norms: each head's D of x [B, S, heads, D],
 * one weight (and bias) of D shared by the heads, so its gradient sums
 * over heads as well as tokens. */
static int build_qk_norm(dg_graph *g, void *ctx) {
    int x = dg_param_new(g, "x", 4, DG_SHAPE(2, 3, 4, 6));
    int w = dg_param_new(g, "w", 1, DG_SHAPE(6));
    if (!ctx) return dg_rmsnorm(g, x, w, 1e-6);
    int b = dg_param_new(g, "b", 1, DG_SHAPE(6));
    return dg_layernorm(g, x, w, b, 1e-6);
}

static void test_qk_norm_grad(void **s) {
    (void)s;
    gc("qk rmsnorm", build_qk_norm, NULL, NULL, NULL);
    int layernorm = 1;
    gc("qk layernorm", build_qk_norm, NULL, &layernorm, NULL);
}

/* ---- rope ----------------------------------------------------------------------------- */

static int build_rope(dg_graph *g, void *ctx) {
    int64_t pos0 = *(const int64_t *)ctx;
    int x = dg_param_new(g, "x", 4, DG_SHAPE(2, 5, 3, 8));
    return dg_rope(g, x, 10000.0, pos0);
}

static void test_rope_grad(void **s) {
    (void)s;
    int64_t pos0 = 0;
    gc("rope", build_rope, NULL, &pos0, NULL);
    pos0 = 7;
    gc("rope pos_offset=7", build_rope, NULL, &pos0, NULL);
}

/* ---- reshape ----------------------------------------------------------------------- */

/* [2, 3, 8] -> [6, -1] -> [2, 3, 2, 4], then rope so the gradient is not
 * just r reshaped. */
static int build_reshape(dg_graph *g, void *ctx) {
    (void)ctx;
    int x = dg_param_new(g, "x", 3, DG_SHAPE(2, 3, 8));
    int y = dg_reshape(g, x, 2, DG_SHAPE(6, -1));
    y = dg_reshape(g, y, 4, DG_SHAPE(2, 3, 2, 4));
    return dg_rope(g, y, 100.0, 0);
}

static void test_reshape_grad(void **s) {
    (void)s;
    gc("reshape", build_reshape, NULL, NULL, NULL);
}

/* ---- activations --------------------------------------------------------------------- */

static int build_swiglu(dg_graph *g, void *ctx) {
    (void)ctx;
    int x = dg_param_new(g, "x", 3, DG_SHAPE(2, 3, 12));
    return dg_swiglu(g, x);
}

static void test_swiglu_grad(void **s) {
    (void)s;
    gc("swiglu", build_swiglu, NULL, NULL, NULL);
}

static int build_gelu(dg_graph *g, void *ctx) {
    (void)ctx;
    int x = dg_param_new(g, "x", 2, DG_SHAPE(3, 10));
    return dg_gelu_tanh(g, x);
}

static void test_gelu_grad(void **s) {
    (void)s;
    dg_gradcheck_opts o = {.scale = 2.0}; /* reach the saturated tails too */
    gc("gelu_tanh", build_gelu, NULL, NULL, &o);
}

/* glu: act(min(a, c)) * (clamp(b, -c, c) + offset) over [2, 3, 2F]. The
 * clamp c = 0.6 at scale 1 clamps about half of the elements; elements
 * within 0.05 of +-c are moved off it, so the central difference (eps
 * 1e-2) never straddles a kink. */
typedef struct glu_ctx {
    dg_glu_act act;
    double offset, clamp;
} glu_ctx;

static int build_glu(dg_graph *g, void *ctx) {
    const glu_ctx *c = ctx;
    int x = dg_param_new(g, "x", 3, DG_SHAPE(2, 3, 12));
    return dg_glu(g, x, c->act, c->offset, c->clamp);
}

static void init_glu(const dg_graph *g, dg_buffers *b, void *ctx) {
    const glu_ctx *c = ctx;
    for (int t = 0; t < g->n_tensors; t++) {
        if (strcmp(g->tensors[t].name, "x") != 0) continue;
        float *p = dg_buf_f32(b, t);
        for (int64_t i = 0; i < dg_tensor_numel(&g->tensors[t]); i++)
            if (c->clamp > 0 && (fabs(p[i] - c->clamp) < 0.05 || fabs(p[i] + c->clamp) < 0.05)) p[i] += 0.12f;
    }
}

static void test_glu_grad(void **s) {
    (void)s;
    const glu_ctx cases[] = {
        {DG_GLU_QUICK_GELU, 0.0, 0.0}, {DG_GLU_QUICK_GELU, 1.0, 0.0}, {DG_GLU_QUICK_GELU, 1.0, 0.6},
        {DG_GLU_SILU, 0.0, 0.6},       {DG_GLU_SILU, 0.5, 0.0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        glu_ctx c = cases[i];
        dg_gradcheck_opts o = {.scale = 1.5};
        gc("glu", build_glu, init_glu, &c, &o);
    }
}

/* Forward values against the formula written out (quick_gelu(z) =
 * z sigmoid(1.702 z), Megatron's activations.py), clamp and offset
 * included, and glu with silu and neither equals swiglu bit for bit. */
static void test_glu_values(void **s) {
    (void)s;
    dg_graph *g = dg_graph_new("glu_values");
    int x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(1, 8));
    int yq = dg_glu(g, x, DG_GLU_QUICK_GELU, 1.0, 0.7);
    int ys = dg_glu(g, x, DG_GLU_SILU, 0.0, 0.0), yw = dg_swiglu(g, x);
    assert_int_equal(g->status, DG_OK);
    dg_buffers b;
    dg_buffers_alloc(g, &b);
    const float in[8] = {-1.5f, 0.3f, 0.9f, 2.0f, /* linear half: */ 0.5f, -1.2f, 0.8f, 0.1f};
    memcpy(b.ptr[x], in, sizeof in);
    dg_test_team *team = dg_test_team_new(1);
    dg_err err = {{0}};
    assert_int_equal(dg_run_serial(g, NULL, &b, dg_test_team_get(team), &err), DG_OK);
    const float *q = b.ptr[yq], *sv = b.ptr[ys], *sw = b.ptr[yw];
    for (int j = 0; j < 4; j++) {
        double a = DG_MIN(in[j], 0.7), l = DG_MAX(DG_MIN(in[4 + j], 0.7), -0.7);
        double want = a / (1.0 + exp(-1.702 * a)) * (l + 1.0);
        assert_true(fabs(q[j] - want) <= 1e-6 * (1.0 + fabs(want)));
        assert_memory_equal(&sv[j], &sw[j], sizeof(float));
    }
    dg_test_team_free(team);
    dg_buffers_free(&b);
    dg_graph_free(g);
}

/* ---- bias add, learned position embedding ------------------------------------------- */

static int build_bias(dg_graph *g, void *ctx) {
    (void)ctx;
    int x = dg_param_new(g, "x", 3, DG_SHAPE(2, 3, 7));
    int b = dg_param_new(g, "b", 1, DG_SHAPE(7));
    /* b used twice: its gradient sums both rows' sums */
    return dg_mul(g, dg_bias_add(g, x, b), dg_bias_add(g, x, b));
}

static void test_bias_grad(void **s) {
    (void)s;
    gc("bias_add", build_bias, NULL, NULL, NULL);
}

/* table has 6 positions, the sequence 4: rows 4 and 5 get a zero gradient */
static int build_pos(dg_graph *g, void *ctx) {
    (void)ctx;
    int x = dg_param_new(g, "x", 3, DG_SHAPE(2, 4, 5));
    int t = dg_param_new(g, "table", 2, DG_SHAPE(6, 5));
    int y = dg_pos_embed_add(g, x, t);
    return dg_mul(g, y, y);
}

static void test_pos_embed_grad(void **s) {
    (void)s;
    dg_gradcheck_opts o = {.max_checks = 30}; /* every table element, unused rows included */
    gc("pos_embed_add", build_pos, NULL, NULL, &o);
}

/* ---- dropout ---------------------------------------------------------------------- */

static int build_dropout(dg_graph *g, void *ctx) {
    (void)ctx;
    int x = dg_param_new(g, "x", 3, DG_SHAPE(3, 4, 5));
    int key = dg_input_new(g, "key", DG_I32, 1, DG_SHAPE(4));
    int y = dg_dropout(g, x, key, 0.3, 5);
    return dg_mul(g, y, y);
}

static void test_dropout_grad(void **s) {
    (void)s;
    gc("dropout", build_dropout, dg_gc_init_key, NULL, NULL);
}

/* The mask: about p of the elements dropped, the rest scaled by 1 / (1 - p);
 * the same for any thread count; a sample's mask does not depend on which
 * micro-batch row holds it; another site, seed or iteration draws another;
 * evaluation (key[3] = 0) is the identity. */
static void test_dropout_mask(void **s) {
    (void)s;
    enum { B = 4, N = 4096 };
    static float x[B * N], y1[B * N], y2[B * N], y3[N];
    for (int i = 0; i < B * N; i++) x[i] = 1.0f + (float)(i % 7);
    dg_test_team *t1 = dg_test_team_new(1), *t2 = dg_test_team_new(2);
    int32_t key[4] = {1234, 7, 100, 1};
    dg_cpu_dropout(dg_test_team_get(t1), x, y1, key, 3, 0.1, B, N);
    dg_cpu_dropout(dg_test_team_get(t2), x, y2, key, 3, 0.1, B, N);
    assert_memory_equal(y1, y2, sizeof y1);
    int dropped = 0;
    for (int i = 0; i < B * N; i++) {
        if (y1[i] == 0.0f) dropped++;
        else assert_true(y1[i] == x[i] * (float)(1.0 / 0.9));
    }
    assert_true(dropped > 0.09 * B * N && dropped < 0.11 * B * N);
    int32_t key2[4] = {1234, 7, 102, 1}; /* sample 102 alone: row 2 above */
    dg_cpu_dropout(dg_test_team_get(t1), x + 2 * N, y3, key2, 3, 0.1, 1, N);
    assert_memory_equal(y3, y1 + 2 * N, sizeof y3);
    int32_t variants[3][4] = {{1234, 7, 100, 1}, {1235, 7, 100, 1}, {1234, 8, 100, 1}};
    for (int v = 0; v < 3; v++) {
        dg_cpu_dropout(dg_test_team_get(t1), x, y2, variants[v], v == 0 ? 4 : 3, 0.1, B, N);
        assert_memory_not_equal(y1, y2, sizeof y1);
    }
    int32_t eval[4] = {1234, 7, 100, 0};
    dg_cpu_dropout(dg_test_team_get(t1), x, y2, eval, 3, 0.1, B, N);
    assert_memory_equal(x, y2, sizeof x);
    dg_test_team_free(t1);
    dg_test_team_free(t2);
}

/* ---- cross-entropy -------------------------------------------------------------------- */

#define XENT_V 11

typedef struct xent_case {
    int masked;  /* pass a loss mask with zeros */
    int flat;    /* logits [N, V] with targets [B, S] */
} xent_case;

static int build_xent(dg_graph *g, void *ctx) {
    const xent_case *c = ctx;
    int logits = c->flat ? dg_param_new(g, "logits", 2, DG_SHAPE(8, XENT_V))
                         : dg_param_new(g, "logits", 3, DG_SHAPE(2, 4, XENT_V));
    int tg = dg_input_new(g, "targets", DG_I32, 2, DG_SHAPE(2, 4));
    int mask = c->masked ? dg_input_new(g, "loss_mask", DG_F32, 2, DG_SHAPE(2, 4)) : -1;
    return dg_softmax_xent(g, logits, tg, mask, NULL);
}

static void init_xent(const dg_graph *g, dg_buffers *b, void *ctx) {
    const xent_case *c = ctx;
    fill_ids(g, b, "targets", XENT_V);
    if (c->masked) fill_mask(g, b, "loss_mask");
}

static void test_xent_grad(void **s) {
    (void)s;
    /* logits of scale 3: a peaked softmax, as in training. atol 1e-4: the
     * gradients are O(1 / sum(mask)), so the default 1e-3 would be loose. */
    dg_gradcheck_opts o = {.scale = 3.0, .max_checks = 88, .atol = 1e-4};
    xent_case masked = {1, 0}, plain = {0, 0}, flat = {1, 1};
    gc("softmax_xent masked", build_xent, init_xent, &masked, &o);
    gc("softmax_xent unmasked", build_xent, init_xent, &plain, &o);
    gc("softmax_xent flat logits", build_xent, init_xent, &flat, &o);
}

/* ---- a tiny language model: every op above in one chain ----------------------------- */

static int build_lm(dg_graph *g, void *ctx) {
    (void)ctx;
    const int64_t B = 2, S = 3, H = 8, V = 9, NH = 2;
    int table = dg_param_new(g, "table", 2, DG_SHAPE(V, H));
    int norm_w = dg_param_new(g, "norm_w", 1, DG_SHAPE(H));
    int fc1 = dg_param_new(g, "fc1", 2, DG_SHAPE(2 * H, H));
    int fc2 = dg_param_new(g, "fc2", 2, DG_SHAPE(H, H));
    int ln_w = dg_param_new(g, "ln_w", 1, DG_SHAPE(H));
    int ln_b = dg_param_new(g, "ln_b", 1, DG_SHAPE(H));
    int head = dg_param_new(g, "head", 2, DG_SHAPE(V, H));
    int tok = dg_input_new(g, "tokens", DG_I32, 2, DG_SHAPE(B, S));
    int tg = dg_input_new(g, "targets", DG_I32, 2, DG_SHAPE(B, S));
    int mask = dg_input_new(g, "loss_mask", DG_F32, 2, DG_SHAPE(B, S));

    int h = dg_embedding(g, table, tok);
    int r = dg_reshape(g, dg_rope(g, dg_reshape(g, h, 4, DG_SHAPE(B, S, NH, H / NH)), 10000.0, 0),
                       3, DG_SHAPE(B, S, H));
    int n = dg_rmsnorm(g, r, norm_w, 1e-6);
    int a = dg_swiglu(g, dg_linear(g, n, fc1));
    h = dg_add(g, h, dg_linear(g, dg_gelu_tanh(g, a), fc2)); /* residual: table used twice */
    int logits = dg_linear(g, dg_layernorm(g, h, ln_w, ln_b, 1e-5), head);
    return dg_softmax_xent(g, logits, tg, mask, NULL);
}

static void init_lm(const dg_graph *g, dg_buffers *b, void *ctx) {
    (void)ctx;
    fill_ids(g, b, "tokens", 9);
    fill_ids(g, b, "targets", 9);
    fill_mask(g, b, "loss_mask");
}

static void test_lm_chain_grad(void **s) {
    (void)s;
    dg_gradcheck_opts o = {.max_checks = 16};
    gc("tiny lm", build_lm, init_lm, NULL, &o);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_embedding_grad), cmocka_unit_test(test_rmsnorm_grad),
        cmocka_unit_test(test_layernorm_grad), cmocka_unit_test(test_qk_norm_grad), cmocka_unit_test(test_rope_grad),
        cmocka_unit_test(test_reshape_grad),   cmocka_unit_test(test_swiglu_grad),
        cmocka_unit_test(test_gelu_grad),      cmocka_unit_test(test_glu_grad),
        cmocka_unit_test(test_glu_values),      cmocka_unit_test(test_xent_grad),
        cmocka_unit_test(test_lm_chain_grad),
        cmocka_unit_test(test_bias_grad),      cmocka_unit_test(test_pos_embed_grad),
        cmocka_unit_test(test_dropout_grad),   cmocka_unit_test(test_dropout_mask),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
