/* test_dense_values.c — the dense ops' values against naive double-precision
 * loops, their error paths (bad token ids and targets, shape rules), and
 * bitwise equality of forward + backward for 1, 2 and 3 threads.
 *
 * Tolerances (fp32 kernels vs double references): |got - ref| <= tol *
 * (1 + |ref|) with tol 1e-5 for forward values and 1e-4 for gradients,
 * whose reductions run over tens of terms. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "dg_autodiff.h"
#include "dg_cpu_embedding.h"
#include "dg_cpu_norm.h"
#include "dg_cpu_xent.h"
#include "dg_exec_serial.h"
#include "dg_gradcheck.h"
#include "dg_ops.h"
#include "dg_verify.h"

/* ---- helpers ------------------------------------------------------------------------ */

static void assert_close(const char *what, const float *got, const double *ref, int64_t n,
                         double tol) {
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ref[i]);
        if (!(d <= tol * (1.0 + fabs(ref[i]))))
            fail_msg("%s[%lld]: got %.9g, expected %.9g (tol %.1e)", what, (long long)i, got[i],
                     ref[i], tol);
    }
}

static float *rand_floats(dg_test_rng *r, int64_t n, double scale) {
    float *x = dg_malloc(sizeof(float) * (size_t)n);
    dg_test_fill_normal(r, x, n, scale);
    return x;
}

static double *doubles(int64_t n) { return dg_calloc((size_t)n, sizeof(double)); }

/* ---- rmsnorm / layernorm ------------------------------------------------------------- */

enum { NR = 5, NH = 37 };

static void test_rmsnorm_values(void **s) {
    (void)s;
    dg_test_rng r = {11};
    float *x = rand_floats(&r, NR * NH, 2.0), *w = rand_floats(&r, NH, 1.0);
    float *dy = rand_floats(&r, NR * NH, 1.0);
    float y[NR * NH], dx[NR * NH], dw[NH], rstd[NR];
    double ry[NR * NH], rdx[NR * NH], rdw[NH] = {0};
    const double eps = 1e-5;
    dg_cpu_rmsnorm_fwd(NULL, x, w, y, rstd, NR, NH, (float)eps);
    double *acc = doubles(NH);
    float ws[NR];
    dg_cpu_rmsnorm_bwd(NULL, dy, x, w, dx, dw, NR, NH, (float)eps, ws, acc);
    for (int i = 0; i < NR; i++) {
        double ss = 0, dot = 0;
        for (int j = 0; j < NH; j++) ss += (double)x[i * NH + j] * x[i * NH + j];
        double rs = 1.0 / sqrt(ss / NH + eps);
        for (int j = 0; j < NH; j++) dot += (double)w[j] * dy[i * NH + j] * x[i * NH + j];
        for (int j = 0; j < NH; j++) {
            ry[i * NH + j] = x[i * NH + j] * rs * w[j];
            rdx[i * NH + j] = rs * w[j] * dy[i * NH + j] - x[i * NH + j] * rs * rs * rs * dot / NH;
            rdw[j] += dy[i * NH + j] * x[i * NH + j] * rs;
        }
        assert_true(fabs(rstd[i] - rs) <= 1e-6 * rs);
    }
    assert_close("rmsnorm y", y, ry, NR * NH, 1e-5);
    assert_close("rmsnorm dx", dx, rdx, NR * NH, 1e-4);
    assert_close("rmsnorm dw", dw, rdw, NH, 1e-4);
    dg_free(acc);
    dg_free(x);
    dg_free(w);
    dg_free(dy);
}

static void test_layernorm_values(void **s) {
    (void)s;
    dg_test_rng r = {12};
    float *x = rand_floats(&r, NR * NH, 2.0), *w = rand_floats(&r, NH, 1.0);
    float *b = rand_floats(&r, NH, 1.0), *dy = rand_floats(&r, NR * NH, 1.0);
    for (int i = 0; i < NR * NH; i++) x[i] += 3.0f; /* a large mean: no cancellation */
    float y[NR * NH], dx[NR * NH], dw[NH], db[NH];
    double ry[NR * NH], rdx[NR * NH], rdw[NH] = {0}, rdb[NH] = {0};
    const double eps = 1e-5;
    dg_cpu_layernorm_fwd(NULL, x, w, b, y, NULL, NULL, NR, NH, (float)eps);
    double *acc = doubles(2 * NH);
    float ws[2 * NR];
    dg_cpu_layernorm_bwd(NULL, dy, x, w, dx, dw, db, NR, NH, (float)eps, ws, ws + NR, acc);
    for (int i = 0; i < NR; i++) {
        const float *xr = x + i * NH, *g = dy + i * NH;
        double mu = 0, var = 0, sg = 0, sgx = 0;
        for (int j = 0; j < NH; j++) mu += xr[j];
        mu /= NH;
        for (int j = 0; j < NH; j++) var += (xr[j] - mu) * (xr[j] - mu);
        double rs = 1.0 / sqrt(var / NH + eps);
        for (int j = 0; j < NH; j++) {
            double xh = (xr[j] - mu) * rs;
            sg += w[j] * g[j];
            sgx += w[j] * g[j] * xh;
        }
        for (int j = 0; j < NH; j++) {
            double xh = (xr[j] - mu) * rs;
            ry[i * NH + j] = xh * w[j] + b[j];
            rdx[i * NH + j] = rs * (w[j] * g[j] - sg / NH - xh * sgx / NH);
            rdw[j] += g[j] * xh;
            rdb[j] += g[j];
        }
    }
    assert_close("layernorm y", y, ry, NR * NH, 1e-5);
    assert_close("layernorm dx", dx, rdx, NR * NH, 1e-4);
    assert_close("layernorm dw", dw, rdw, NH, 1e-4);
    assert_close("layernorm db", db, rdb, NH, 1e-4);
    dg_free(acc);
    dg_free(x);
    dg_free(w);
    dg_free(b);
    dg_free(dy);
}

/* ---- rope -------------------------------------------------------------------------------- */

static void test_rope_values(void **s) {
    (void)s;
    const int64_t B = 2, S = 5, H = 3, D = 8, pos0 = 3;
    const double base = 10000.0;
    dg_graph *g = dg_graph_new("rope");
    int x = dg_param_new(g, "x", 4, DG_SHAPE(B, S, H, D));
    int y = dg_rope(g, x, base, pos0);
    int y0 = dg_rope(g, x, base, 0);
    assert_true(y >= 0 && y0 >= 0);
    dg_buffers buf;
    dg_buffers_alloc(g, &buf);
    dg_test_rng r = {13};
    int64_t n = B * S * H * D;
    dg_test_fill_normal(&r, buf.ptr[x], n, 1.0);
    dg_err err = {{0}};
    assert_int_equal(dg_run_serial(g, NULL, &buf, NULL, &err), DG_OK);
    const float *X = buf.ptr[x], *Y = buf.ptr[y], *Y0 = buf.ptr[y0];
    double *ref = doubles(n);
    for (int64_t b = 0; b < B; b++)
        for (int64_t si = 0; si < S; si++)
            for (int64_t h = 0; h < H; h++) {
                int64_t o = ((b * S + si) * H + h) * D;
                for (int64_t i = 0; i < D / 2; i++) {
                    double th = (double)(pos0 + si) * pow(base, -2.0 * (double)i / (double)D);
                    double x1 = X[o + i], x2 = X[o + i + D / 2];
                    ref[o + i] = x1 * cos(th) - x2 * sin(th);
                    ref[o + i + D / 2] = x2 * cos(th) + x1 * sin(th);
                }
                /* position 0 is the identity, exactly */
                if (si == 0) assert_memory_equal(Y0 + o, X + o, sizeof(float) * (size_t)D);
            }
    assert_close("rope", Y, ref, n, 1e-5);

    /* The adjoint is the same op with inverse = 1 and the same offset. */
    dg_graph *g2 = dg_graph_new("rope_inv");
    int xp = dg_param_new(g2, "x", 4, DG_SHAPE(B, S, H, D));
    int loss = dg_sum(g2, dg_rope(g2, xp, base, pos0));
    assert_int_equal(dg_autodiff(g2, loss, dg_ops_autodiff(), NULL, &err), DG_OK);
    const dg_node *bwd = &g2->nodes[g2->tensors[g2->tensors[xp].grad].producer];
    assert_string_equal(bwd->op->name, "rope");
    assert_int_equal(bwd->attrs.i[1], 1);
    assert_int_equal(bwd->attrs.i[0], pos0);
    dg_graph_free(g2);

    dg_free(ref);
    dg_buffers_free(&buf);
    dg_graph_free(g);
}

/* ---- activations --------------------------------------------------------------------------- */

static void test_act_values(void **s) {
    (void)s;
    const int64_t R = 4, F = 9;
    dg_graph *g = dg_graph_new("act");
    int x = dg_param_new(g, "x", 2, DG_SHAPE(R, 2 * F));
    int sw = dg_swiglu(g, x);
    int ge = dg_gelu_tanh(g, x);
    assert_true(sw >= 0 && ge >= 0);
    assert_int_equal(g->tensors[sw].shape[1], F);
    dg_buffers buf;
    dg_buffers_alloc(g, &buf);
    dg_test_rng r = {14};
    dg_test_fill_normal(&r, buf.ptr[x], R * 2 * F, 3.0);
    dg_err err = {{0}};
    assert_int_equal(dg_run_serial(g, NULL, &buf, NULL, &err), DG_OK);
    const float *X = buf.ptr[x];
    double rsw[R * F], rge[R * 2 * F];
    for (int64_t i = 0; i < R; i++)
        for (int64_t j = 0; j < F; j++) {
            double a = X[i * 2 * F + j], b = X[i * 2 * F + F + j];
            rsw[i * F + j] = a / (1.0 + exp(-a)) * b;
        }
    for (int64_t i = 0; i < R * 2 * F; i++) {
        double v = X[i];
        rge[i] = 0.5 * v * (1.0 + tanh(sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    }
    assert_close("swiglu", buf.ptr[sw], rsw, R * F, 1e-5);
    assert_close("gelu_tanh", buf.ptr[ge], rge, R * 2 * F, 1e-5);
    dg_buffers_free(&buf);
    dg_graph_free(g);
}

/* ---- cross-entropy ---------------------------------------------------------------------------- */

enum { XB = 3, XS = 4, XV = 13 };

static void test_xent_values(void **s) {
    (void)s;
    dg_graph *g = dg_graph_new("xent");
    int lg = dg_param_new(g, "logits", 3, DG_SHAPE(XB, XS, XV));
    int tg = dg_input_new(g, "targets", DG_I32, 2, DG_SHAPE(XB, XS));
    int mk = dg_input_new(g, "mask", DG_F32, 2, DG_SHAPE(XB, XS));
    int lse = -1;
    int loss = dg_softmax_xent(g, lg, tg, mk, &lse);
    assert_true(loss >= 0 && lse >= 0);
    assert_int_equal(g->tensors[loss].ndim, 0);
    dg_err err = {{0}};
    assert_int_equal(dg_autodiff(g, loss, dg_ops_autodiff(), NULL, &err), DG_OK);
    int dlg = g->tensors[lg].grad;
    assert_true(dlg >= 0);

    dg_buffers buf;
    dg_buffers_alloc(g, &buf);
    dg_test_rng r = {15};
    const int64_t N = XB * XS;
    dg_test_fill_normal(&r, buf.ptr[lg], N * XV, 4.0);
    int32_t *T = buf.ptr[tg];
    float *M = buf.ptr[mk];
    for (int64_t i = 0; i < N; i++) {
        T[i] = (int32_t)((i * 7 + 2) % XV);
        M[i] = i % 4 == 1 ? 0.0f : (i % 4 == 2 ? 0.5f : 1.0f);
    }
    T[1] = -100; /* masked rows never read their target */
    assert_int_equal(dg_run_serial(g, NULL, &buf, NULL, &err), DG_OK);

    const float *L = buf.ptr[lg];
    double num = 0, den = 0, rlse[N], rd[N * XV];
    for (int64_t i = 0; i < N; i++) {
        double mx = -INFINITY, se = 0;
        for (int j = 0; j < XV; j++) mx = fmax(mx, L[i * XV + j]);
        for (int j = 0; j < XV; j++) se += exp(L[i * XV + j] - mx);
        rlse[i] = mx + log(se);
        den += M[i];
        if (M[i] != 0) num += M[i] * (rlse[i] - L[i * XV + T[i]]);
    }
    for (int64_t i = 0; i < N; i++)
        for (int j = 0; j < XV; j++)
            rd[i * XV + j] = M[i] == 0 ? 0
                                       : (exp(L[i * XV + j] - rlse[i]) - (j == T[i])) * M[i] / den;
    double rloss = num / den;
    assert_close("xent loss", buf.ptr[loss], &rloss, 1, 1e-5);
    assert_close("xent lse", buf.ptr[lse], rlse, N, 1e-5);
    assert_close("xent dlogits", buf.ptr[dlg], rd, N * XV, 1e-5);
    for (int j = 0; j < XV; j++) assert_true(((float *)buf.ptr[dlg])[1 * XV + j] == 0.0f);

    /* dloss scales the gradient linearly (a loss scale changes it). */
    float *d2 = dg_malloc(sizeof(float) * N * XV);
    assert_int_equal(dg_cpu_xent_bwd(NULL, L, T, M, buf.ptr[lse], 2.0f, d2, N, XV, NULL), DG_OK);
    for (int64_t i = 0; i < N * XV; i++)
        assert_true(fabsf(d2[i] - 2.0f * ((float *)buf.ptr[dlg])[i]) <= 1e-6f);

    /* A bad target on a counted row is an input error, located. */
    T[2] = XV;
    int64_t bad = -1;
    float l1, lse1[N];
    assert_int_equal(dg_cpu_xent_fwd(NULL, L, T, M, &l1, lse1, N, XV, &bad), DG_EINPUT);
    assert_int_equal(bad, 2);
    assert_int_not_equal(dg_run_serial(g, NULL, &buf, NULL, &err), DG_OK);
    assert_non_null(strstr(err.msg, "softmax_xent"));
    T[2] = 0;

    /* An all-zero mask: loss 0 and zero gradients, not NaN. */
    for (int64_t i = 0; i < N; i++) M[i] = 0;
    assert_int_equal(dg_run_serial(g, NULL, &buf, NULL, &err), DG_OK);
    assert_true(*(float *)buf.ptr[loss] == 0.0f);
    for (int64_t i = 0; i < N * XV; i++) assert_true(((float *)buf.ptr[dlg])[i] == 0.0f);

    dg_free(d2);
    dg_buffers_free(&buf);
    dg_graph_free(g);
}

/* ---- embedding ------------------------------------------------------------------------------------ */

static void test_embedding_values(void **s) {
    (void)s;
    const int64_t V = 6, H = 5, B = 2, S = 7, N = B * S;
    dg_graph *g = dg_graph_new("emb");
    int tb = dg_param_new(g, "table", 2, DG_SHAPE(V, H));
    int tk = dg_input_new(g, "tokens", DG_I32, 2, DG_SHAPE(B, S));
    int e = dg_embedding(g, tb, tk);
    assert_true(e >= 0);
    assert_int_equal(g->tensors[e].ndim, 3);
    assert_int_equal(g->tensors[e].shape[2], H);
    int dout = dg_input_new(g, "dout", DG_F32, 3, DG_SHAPE(B, S, H));
    int loss = dg_sum(g, dg_mul(g, e, dout));
    dg_err err = {{0}};
    assert_int_equal(dg_autodiff(g, loss, dg_ops_autodiff(), NULL, &err), DG_OK);
    int dtb = g->tensors[tb].grad;

    dg_buffers buf;
    dg_buffers_alloc(g, &buf);
    dg_test_rng r = {16};
    dg_test_fill_normal(&r, buf.ptr[tb], V * H, 1.0);
    dg_test_fill_normal(&r, buf.ptr[dout], N * H, 1.0);
    int32_t *T = buf.ptr[tk];
    for (int64_t i = 0; i < N; i++) T[i] = (int32_t)((i * i + 1) % (V - 1)); /* id V-1 unused */
    assert_int_equal(dg_run_serial(g, NULL, &buf, NULL, &err), DG_OK);
    const float *TB = buf.ptr[tb], *E = buf.ptr[e], *DO = buf.ptr[dout], *DT = buf.ptr[dtb];
    for (int64_t i = 0; i < N; i++) assert_memory_equal(E + i * H, TB + T[i] * H, sizeof(float) * H);
    /* the reference scatter in token order, in float: bitwise equal */
    float *ref = dg_calloc((size_t)(V * H), sizeof(float));
    for (int64_t i = 0; i < N; i++)
        for (int64_t j = 0; j < H; j++) ref[T[i] * H + j] += DO[i * H + j];
    assert_memory_equal(ref, DT, sizeof(float) * (size_t)(V * H));
    for (int64_t j = 0; j < H; j++) assert_true(DT[(V - 1) * H + j] == 0.0f);

    /* Out-of-range ids: an error status from the kernel and the executor. */
    T[3] = (int32_t)V;
    int64_t bad = -1;
    assert_int_equal(dg_cpu_embedding_fwd(NULL, TB, T, ref, N, V, H, &bad), DG_EINPUT);
    assert_int_equal(bad, 3);
    T[3] = -1;
    bad = -1;
    assert_int_equal(dg_cpu_embedding_bwd(NULL, DO, T, ref, N, V, H, &bad), DG_EINPUT);
    assert_int_equal(bad, 3);
    assert_int_not_equal(dg_run_serial(g, NULL, &buf, NULL, &err), DG_OK);
    assert_non_null(strstr(err.msg, "embedding"));

    dg_free(ref);
    dg_buffers_free(&buf);
    dg_graph_free(g);
}

/* ---- reshape ------------------------------------------------------------------------------------------ */

static void test_reshape_values(void **s) {
    (void)s;
    dg_graph *g = dg_graph_new("reshape");
    int x = dg_param_new(g, "x", 3, DG_SHAPE(2, 3, 8));
    int y = dg_reshape(g, x, 4, DG_SHAPE(2, 3, -1, 4));
    assert_true(y >= 0);
    assert_int_equal(g->tensors[y].ndim, 4);
    assert_int_equal(g->tensors[y].shape[2], 2);
    dg_buffers buf;
    dg_buffers_alloc(g, &buf);
    dg_test_rng r = {17};
    dg_test_fill_normal(&r, buf.ptr[x], 48, 1.0);
    dg_err err = {{0}};
    assert_int_equal(dg_run_serial(g, NULL, &buf, NULL, &err), DG_OK);
    assert_memory_equal(buf.ptr[x], buf.ptr[y], 48 * sizeof(float));
    dg_buffers_free(&buf);
    dg_graph_free(g);
}

/* ---- shape rules: builder errors name the rule --------------------------------------------------------- */

static void expect_rule(dg_graph *g, int id, const char *rule) {
    assert_int_equal(id, -1);
    assert_int_equal(g->status, DG_EINPUT);
    if (!strstr(g->err.msg, rule)) fail_msg("error '%s' does not mention %s", g->err.msg, rule);
    dg_graph_free(g);
}

static void test_infer_errors(void **s) {
    (void)s;
    dg_graph *g = dg_graph_new("e");
    int x = dg_param_new(g, "x", 2, DG_SHAPE(4, 8));
    expect_rule(g, dg_rmsnorm(g, x, dg_param_new(g, "w", 1, DG_SHAPE(7)), 1e-5), "rule 'shape' broken");

    g = dg_graph_new("e");
    x = dg_param_new(g, "x", 2, DG_SHAPE(4, 8));
    int w = dg_param_new(g, "w", 1, DG_SHAPE(8));
    expect_rule(g, dg_layernorm(g, x, w, w, 0.0), "rule 'attrs' broken");

    g = dg_graph_new("e");
    expect_rule(g, dg_rope(g, dg_param_new(g, "x", 4, DG_SHAPE(1, 2, 3, 5)), 1e4, 0), "head_dim");

    g = dg_graph_new("e");
    expect_rule(g, dg_rope(g, dg_param_new(g, "x", 3, DG_SHAPE(2, 3, 4)), 1e4, 0), "rule 'shape' broken");

    g = dg_graph_new("e");
    expect_rule(g, dg_swiglu(g, dg_param_new(g, "x", 2, DG_SHAPE(2, 7))), "even");

    g = dg_graph_new("e");
    expect_rule(g, dg_reshape(g, dg_param_new(g, "x", 2, DG_SHAPE(2, 7)), 2, DG_SHAPE(3, 5)),
                "rule 'shape' broken");

    g = dg_graph_new("e");
    expect_rule(g, dg_reshape(g, dg_param_new(g, "x", 2, DG_SHAPE(2, 6)), 2, DG_SHAPE(-1, -1)),
                "rule 'attrs' broken");

    g = dg_graph_new("e");
    x = dg_param_new(g, "table", 2, DG_SHAPE(5, 3));
    expect_rule(g, dg_embedding(g, x, dg_input_new(g, "tok", DG_F32, 1, DG_SHAPE(4))), "rule 'dtype' broken");

    g = dg_graph_new("e");
    x = dg_param_new(g, "logits", 3, DG_SHAPE(2, 3, 5));
    int t = dg_input_new(g, "t", DG_I32, 2, DG_SHAPE(2, 4));
    expect_rule(g, dg_softmax_xent(g, x, t, -1, NULL), "one entry per row");

    g = dg_graph_new("e");
    x = dg_param_new(g, "logits", 3, DG_SHAPE(2, 3, 5));
    t = dg_input_new(g, "t", DG_I32, 2, DG_SHAPE(2, 3));
    int m = dg_input_new(g, "m", DG_F32, 2, DG_SHAPE(3, 2));
    expect_rule(g, dg_softmax_xent(g, x, t, m, NULL), "loss_mask");

    /* lse is saved for the backward, not differentiable: autodiff says so */
    g = dg_graph_new("e");
    x = dg_param_new(g, "logits", 2, DG_SHAPE(3, 5));
    t = dg_input_new(g, "t", DG_I32, 1, DG_SHAPE(3));
    int lse = -1;
    int loss = dg_softmax_xent(g, x, t, -1, &lse);
    loss = dg_add(g, loss, dg_sum(g, lse));
    dg_err err = {{0}};
    assert_int_not_equal(dg_autodiff(g, loss, dg_ops_autodiff(), NULL, &err), DG_OK);
    if (!strstr(err.msg, "rule 'differentiable' broken")) fail_msg("autodiff said: %s", err.msg);
    dg_graph_free(g);
}

/* ---- 1 vs 2 vs 3 threads: forward + backward bitwise -------------------------------------------------------- */

typedef int (*build_fn)(dg_graph *g);

static int bt_rmsnorm(dg_graph *g) {
    int x = dg_param_new(g, "x", 3, DG_SHAPE(3, 13, 19));
    return dg_rmsnorm(g, x, dg_param_new(g, "w", 1, DG_SHAPE(19)), 1e-5);
}
static int bt_layernorm(dg_graph *g) {
    int x = dg_param_new(g, "x", 3, DG_SHAPE(3, 13, 19));
    return dg_layernorm(g, x, dg_param_new(g, "w", 1, DG_SHAPE(19)),
                        dg_param_new(g, "b", 1, DG_SHAPE(19)), 1e-5);
}
static int bt_embedding(dg_graph *g) {
    int tb = dg_param_new(g, "table", 2, DG_SHAPE(11, 9));
    return dg_embedding(g, tb, dg_input_new(g, "tokens", DG_I32, 2, DG_SHAPE(4, 17)));
}
static int bt_xent(dg_graph *g) {
    int lg = dg_param_new(g, "logits", 3, DG_SHAPE(4, 9, 23));
    int t = dg_input_new(g, "tokens", DG_I32, 2, DG_SHAPE(4, 9));
    return dg_softmax_xent(g, lg, t, dg_input_new(g, "mask", DG_F32, 2, DG_SHAPE(4, 9)), NULL);
}
static int bt_rope_act(dg_graph *g) {
    int x = dg_param_new(g, "x", 4, DG_SHAPE(2, 7, 3, 8));
    int y = dg_reshape(g, dg_rope(g, x, 10000.0, 2), 3, DG_SHAPE(2, 7, 24));
    return dg_gelu_tanh(g, dg_swiglu(g, y));
}

static void run_threads(const char *what, build_fn build) {
    dg_graph *g = dg_graph_new(what);
    int out = build(g);
    assert_true(out >= 0);
    const dg_tensor *ot = &g->tensors[out];
    int r = dg_input_new(g, "r", DG_F32, ot->ndim, ot->shape);
    int loss = dg_sum(g, dg_mul(g, out, r));
    dg_err err = {{0}};
    assert_int_equal(dg_autodiff(g, loss, dg_ops_autodiff(), NULL, &err), DG_OK);
    dg_buffers ref, b;
    dg_buffers_alloc(g, &ref);
    dg_buffers_alloc(g, &b);
    dg_test_rng rng = {21};
    for (int t = 0; t < g->n_tensors; t++) {
        const dg_tensor *x = &g->tensors[t];
        if (x->producer >= 0) continue;
        int64_t n = dg_tensor_numel(x);
        if (x->dtype == DG_F32) dg_test_fill_normal(&rng, ref.ptr[t], n, 2.0);
        if (x->dtype == DG_I32)
            for (int64_t i = 0; i < n; i++) dg_buf_i32(&ref, t)[i] = (int32_t)((i * 7 + 3) % 9);
        if (strcmp(x->name, "mask") == 0)
            for (int64_t i = 0; i < n; i++) dg_buf_f32(&ref, t)[i] = (float)(i % 3 != 1);
        memcpy(b.ptr[t], ref.ptr[t], dg_tensor_bytes(x));
    }
    assert_int_equal(dg_run_serial(g, NULL, &ref, NULL, &err), DG_OK);
    for (int nth = 2; nth <= 3; nth++) {
        dg_test_team *team = dg_test_team_new(nth);
        assert_int_equal(dg_run_serial(g, NULL, &b, dg_test_team_get(team), &err), DG_OK);
        dg_test_team_free(team);
        for (int t = 0; t < g->n_tensors; t++)
            if (memcmp(ref.ptr[t], b.ptr[t], dg_tensor_bytes(&g->tensors[t])) != 0)
                fail_msg("%s: tensor '%s' differs between 1 and %d threads", what,
                         g->tensors[t].name, nth);
    }
    dg_buffers_free(&ref);
    dg_buffers_free(&b);
    dg_graph_free(g);
}

static void test_threads_bitwise(void **s) {
    (void)s;
    run_threads("rmsnorm", bt_rmsnorm);
    run_threads("layernorm", bt_layernorm);
    run_threads("embedding", bt_embedding);
    run_threads("softmax_xent", bt_xent);
    run_threads("rope_reshape_swiglu_gelu", bt_rope_act);
}

/* ---- a whole step's graph passes the verifier ------------------------------------------------ */

/* embedding -> rope -> rmsnorm -> swiglu MLP -> layernorm -> head -> xent,
 * autodiff, then one adamw node per parameter: dg_verify re-runs every
 * node's infer (forward, backward and optimizer ops) and checks the SSA and
 * producer rules. */
static void test_step_graph_verifies(void **s) {
    (void)s;
    const int64_t B = 2, S = 3, H = 8, V = 9, NH = 2;
    dg_graph *g = dg_graph_new("step");
    int table = dg_param_new(g, "table", 2, DG_SHAPE(V, H));
    int norm_w = dg_param_new(g, "norm_w", 1, DG_SHAPE(H));
    int fc1 = dg_param_new(g, "fc1", 2, DG_SHAPE(2 * H, H));
    int fc2 = dg_param_new(g, "fc2", 2, DG_SHAPE(H, H));
    int ln_w = dg_param_new(g, "ln_w", 1, DG_SHAPE(H));
    int ln_b = dg_param_new(g, "ln_b", 1, DG_SHAPE(H));
    int tok = dg_input_new(g, "tokens", DG_I32, 2, DG_SHAPE(B, S));
    int tg = dg_input_new(g, "targets", DG_I32, 2, DG_SHAPE(B, S));
    int mask = dg_input_new(g, "loss_mask", DG_F32, 2, DG_SHAPE(B, S));
    int h = dg_embedding(g, table, tok);
    int r = dg_reshape(g, dg_rope(g, dg_reshape(g, h, 4, DG_SHAPE(B, S, NH, H / NH)), 1e4, 0), 3,
                       DG_SHAPE(B, S, H));
    int a = dg_swiglu(g, dg_linear(g, dg_rmsnorm(g, r, norm_w, 1e-6), fc1));
    h = dg_add(g, h, dg_linear(g, dg_gelu_tanh(g, a), fc2));
    int logits = dg_linear(g, dg_layernorm(g, h, ln_w, ln_b, 1e-5), table); /* tied */
    int loss = dg_softmax_xent(g, logits, tg, mask, NULL);
    dg_err err = {{0}};
    assert_int_equal(dg_verify_after(g, "builder", &err), DG_OK);
    assert_int_equal(dg_autodiff(g, loss, dg_ops_autodiff(), NULL, &err), DG_OK);
    if (dg_verify_after(g, "autodiff", &err) != DG_OK) fail_msg("%s", err.msg);

    dg_graph_set_phase(g, DG_PHASE_OPTIMIZER);
    int params[] = {table, norm_w, fc1, fc2, ln_w, ln_b};
    dg_adamw_hparams hp = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8,
                           .weight_decay = 0.1, .step = 1};
    for (size_t i = 0; i < DG_ARRAY_LEN(params); i++) {
        const dg_tensor *p = &g->tensors[params[i]];
        assert_true(p->grad >= 0);
        int64_t shape[DG_MAX_DIMS];
        int nd = p->ndim;
        memcpy(shape, p->shape, sizeof shape);
        int m = dg_tensor_new(g, "m", DG_F32, nd, shape, DG_ROLE_OPTIMIZER);
        int v = dg_tensor_new(g, "v", DG_F32, nd, shape, DG_ROLE_OPTIMIZER);
        assert_true(dg_adamw(g, params[i], g->tensors[params[i]].grad, m, v, &hp, NULL) >= 0);
    }
    if (dg_verify_after(g, "optimizer", &err) != DG_OK) fail_msg("%s", err.msg);

    /* and it runs: a finite loss, every parameter updated */
    dg_buffers b;
    dg_buffers_alloc(g, &b);
    dg_test_rng rng = {41};
    for (int t = 0; t < g->n_tensors; t++) {
        const dg_tensor *x = &g->tensors[t];
        if (x->producer < 0 && x->role == DG_ROLE_PARAMETER)
            dg_test_fill_normal(&rng, b.ptr[t], dg_tensor_numel(x), 0.5);
    }
    for (int i = 0; i < B * S; i++) {
        dg_buf_i32(&b, tok)[i] = i % (int)V;
        dg_buf_i32(&b, tg)[i] = (i + 1) % (int)V;
        dg_buf_f32(&b, mask)[i] = 1.0f;
    }
    assert_int_equal(dg_run_serial(g, NULL, &b, NULL, &err), DG_OK);
    float l = *dg_buf_f32(&b, loss);
    assert_true(isfinite(l) && l > 0);
    dg_buffers_free(&b);
    dg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rmsnorm_values),  cmocka_unit_test(test_layernorm_values),
        cmocka_unit_test(test_rope_values),     cmocka_unit_test(test_act_values),
        cmocka_unit_test(test_xent_values),     cmocka_unit_test(test_embedding_values),
        cmocka_unit_test(test_reshape_values),  cmocka_unit_test(test_infer_errors),
        cmocka_unit_test(test_threads_bitwise), cmocka_unit_test(test_step_graph_verifies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
