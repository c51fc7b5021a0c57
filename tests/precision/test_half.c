/* test_half.c — 16-bit floats (kernels/cpu/dg_cpu_half.h): rounding and
 * bit patterns against PyTorch's conversions, and the dtype pass
 * (graph/passes/dg_pass_precision.h) on a small graph. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dg_cpu_half.h"
#include "dg_op_cast.h"
#include "dg_ops.h"
#include "dg_autodiff.h"
#include "dg_pass_precision.h"
#include "dg_verify.h"

static float bf(float x) { return dg_bf16_value(dg_bf16_bits(x)); }
static float hf(float x) { return dg_fp16_value(dg_fp16_bits(x)); }

static void test_bf16(void **s) {
    (void)s;
    assert_true(bf(1.0f) == 1.0f);
    assert_true(bf(1.0f + 0x1p-8f) == 1.0f);                  /* a tie: to even (down) */
    assert_true(bf(1.0f + 3 * 0x1p-8f) == 1.0f + 0x1p-6f);    /* a tie: to even (up) */
    assert_true(bf(1.0f + 0x1p-8f + 0x1p-12f) == 1.0f + 0x1p-7f); /* past the tie: up */
    assert_true(bf(-3.14159265f) == -3.140625f);
    assert_true(isfinite(bf(3e38f)) && fabsf(bf(3e38f) / 3e38f - 1) < 0x1p-8f); /* f32's range */
    assert_true(isinf(bf(INFINITY)) && isnan(bf(NAN)) && isnan(bf(-NAN)));
    assert_int_equal(dg_bf16_bits(1.0f), 0x3f80);
    assert_int_equal(dg_bf16_bits(-2.0f), 0xc000);
}

static void test_fp16(void **s) {
    (void)s;
    assert_true(hf(1.0f + 0x1p-11f) == 1.0f);               /* tie: to even */
    assert_true(hf(1.0f + 3 * 0x1p-11f) == 1.0f + 0x1p-9f);
    assert_true(hf(65504.0f) == 65504.0f);                   /* the largest */
    assert_true(hf(65519.0f) == 65504.0f);
    assert_true(isinf(hf(65520.0f)) && hf(-1e6f) < 0);       /* overflow */
    assert_true(hf(0x1p-24f) == 0x1p-24f);                   /* the smallest subnormal */
    assert_true(hf(0x1p-26f) == 0.0f && hf(0x1p-25f) == 0.0f && hf(0x1.8p-25f) == 0x1p-24f);
    assert_true(hf(3 * 0x1p-25f) == 0x1p-23f);               /* subnormal tie: to even */
    assert_true(hf(0x1.ffcp-15f) == 0x1p-14f);               /* rounds up into the normals */
    assert_true(isnan(hf(NAN)));
    assert_int_equal(dg_fp16_bits(1.0f), 0x3c00);
    assert_int_equal(dg_fp16_bits(-65504.0f), 0xfbff);
    assert_int_equal(dg_fp16_bits(0x1p-24f), 0x0001);
}

/* Every 16-bit pattern converts to f32 and back to itself (NaNs stay NaN). */
static void test_round_trip(void **s) {
    (void)s;
    for (uint32_t b = 0; b < 65536; b++) {
        for (int fp16 = 0; fp16 < 2; fp16++) {
            float v = dg_half_value((uint16_t)b, fp16);
            if (isnan(v)) {
                assert_true(isnan(dg_half_value(dg_half_bits(v, fp16), fp16)));
                continue;
            }
            assert_int_equal(dg_half_bits(v, fp16), b);
        }
    }
}

/* The array conversions (vector lanes and the scalar tail, odd lengths)
 * give the scalar functions' bits: random values over every exponent,
 * subnormals, infinities and NaN included, and every 16-bit pattern back. */
static void test_arrays(void **s) {
    (void)s;
    enum { N = 65536 + 7 };
    float *x = malloc(sizeof(float) * N), *back = malloc(sizeof(float) * N);
    uint16_t *h = malloc(sizeof(uint16_t) * N), *all = malloc(sizeof(uint16_t) * N);
    uint64_t r = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < N; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        uint32_t u = (uint32_t)r;
        if (i % 3 == 0) u = (u & 0x807fffffu) | (uint32_t)(i % 256) << 23; /* every exponent, 0 and 255 too */
        memcpy(&x[i], &u, sizeof u);
        all[i] = (uint16_t)i;
    }
    for (int fp16 = 0; fp16 < 2; fp16++) {
        for (int n = N; n >= N - 7; n -= 7) { /* a tail of 7, and none */
            dg_cpu_to_half(NULL, x, h, n, fp16);
            for (int i = 0; i < n; i++) {
                if (isnan(x[i])) assert_true(isnan(dg_half_value(h[i], fp16)));
                else if (h[i] != dg_half_bits(x[i], fp16)) fail_msg("x=%a fp16=%d: %04x vs %04x", (double)x[i], fp16, h[i], dg_half_bits(x[i], fp16));
            }
        }
        dg_cpu_from_half(NULL, all, back, N, fp16);
        for (int i = 0; i < N; i++) {
            float v = dg_half_value(all[i], fp16);
            assert_true(isnan(v) ? isnan(back[i]) : memcmp(&v, &back[i], sizeof v) == 0);
        }
    }
    free(x);
    free(back);
    free(h);
    free(all);
}

/* Random f32 values (every exponent) against PyTorch's own conversions:
 * the same bits. */
static void test_against_torch(void **s) {
    (void)s;
    enum { N = 20000 };
    char path[] = "/tmp/dg_half_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "wb");
    uint32_t *u = malloc(sizeof(uint32_t) * N);
    uint64_t r = 88172645463325252ull;
    for (int i = 0; i < N; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        u[i] = (uint32_t)r;
        if (i % 4 == 0) u[i] = (u[i] & 0x807fffffu) | (uint32_t)(100 + i % 60) << 23; /* near fp16's range */
    }
    fwrite(u, sizeof(uint32_t), N, f);
    fclose(f);
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import sys,torch,numpy as np;"
             "x=torch.from_numpy(np.fromfile('%s',dtype=np.float32));"
             "b=x.to(torch.bfloat16).view(torch.int16).numpy().astype(np.uint16);"
             "h=x.to(torch.float16).view(torch.int16).numpy().astype(np.uint16);"
             "np.concatenate([b,h]).tofile('%s.out')\"",
             path, path);
    assert_int_equal(system(cmd), 0);
    char out[64];
    snprintf(out, sizeof out, "%s.out", path);
    uint16_t *t = malloc(sizeof(uint16_t) * 2 * N);
    f = fopen(out, "rb");
    assert_non_null(f);
    assert_int_equal(fread(t, sizeof(uint16_t), 2 * N, f), 2 * N);
    fclose(f);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        float x;
        memcpy(&x, &u[i], sizeof x);
        if (isnan(x)) continue; /* NaN payloads differ; NaN stays NaN (test_bf16) */
        if (dg_bf16_bits(x) != t[i] || dg_fp16_bits(x) != t[N + i]) {
            if (bad++ < 5)
                print_error("x=%a: bf16 %04x torch %04x, fp16 %04x torch %04x\n", (double)x, dg_bf16_bits(x), t[i],
                            dg_fp16_bits(x), t[N + i]);
        }
    }
    assert_int_equal(bad, 0);
    remove(path);
    remove(out);
    free(u);
    free(t);
}

/* y = x W on a parameter: the pass casts W to its bf16 copy; y and the
 * loss's input are bf16 by the storage rule, the loss stays f32, and W's
 * gradient comes back f32. */
static void test_pass(void **s) {
    (void)s;
    dg_graph *g = dg_graph_new("t");
    int x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(4, 8));
    int w = dg_param_new(g, "w", 2, DG_SHAPE(3, 8));
    int y = dg_linear(g, x, w);
    int loss = dg_sum(g, y);
    assert_true(loss >= 0);
    dg_pass_precision_opts o = {DG_BF16, &dg_op_cast, NULL, -1};
    dg_graph *out = NULL;
    int tmap[16];
    dg_err err = {{0}};
    assert_int_equal(dg_pass_precision(g, &o, &out, tmap, &err), DG_OK);
    int n_cast = 0;
    for (int i = 0; i < out->n_nodes; i++)
        if (out->nodes[i].op == &dg_op_cast) {
            n_cast++;
            assert_int_equal(out->tensors[out->nodes[i].in[0]].role, DG_ROLE_PARAMETER);
        }
    assert_int_equal(n_cast, 1);
    assert_int_equal(out->tensors[tmap[x]].dtype, DG_F32);
    assert_int_equal(out->tensors[tmap[y]].dtype, DG_BF16);
    assert_int_equal(out->tensors[tmap[loss]].dtype, DG_F32);
    assert_int_equal(dg_autodiff(out, tmap[loss], dg_ops_autodiff(), NULL, &err), DG_OK);
    const dg_tensor *gw = &out->tensors[out->tensors[tmap[w]].grad];
    assert_int_equal(gw->role, DG_ROLE_GRADIENT);
    assert_int_equal(gw->dtype, DG_F32);
    assert_int_equal(dg_verify(out, &err), DG_OK);
    dg_graph_free(out);
    dg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_bf16), cmocka_unit_test(test_fp16),
                                       cmocka_unit_test(test_round_trip), cmocka_unit_test(test_arrays),
                                       cmocka_unit_test(test_against_torch),
                                       cmocka_unit_test(test_pass)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
