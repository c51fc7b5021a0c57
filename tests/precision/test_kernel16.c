/* test_kernel16.c — every 16-bit kernel against its f32 kernel (issue 27,
 * acceptance 1).
 *
 * A dense block (embedding, norms, linears, RoPE, fused and unfused
 * attention with dropout, SwiGLU, GeLU, biases, the loss) and an MoE block
 * (router, aux and z losses, permute, grouped GEMMs, unpermute, EP's
 * movers) go through the dtype pass in bf16 and in fp16, then autodiff. Each
 * node of the result runs in topological order as the runtime runs it
 * (dg_kernel_call on its 16-bit buffers), and its op's f32 kernel runs on
 * the same input values widened to f32, in a view of the graph whose
 * floating tensors are all f32. Every 16-bit output must be exactly the f32
 * output rounded, and every f32 or integer output the same bits: that is
 * the contract of a kernel the runtime converts around, and for an
 * any_dtype kernel (the movers, the cast) moving 16-bit elements must move
 * the same values. Inputs are random: parameters uniform in [-1, 1], token
 * ids and targets uniform over the vocabulary; activations are what the
 * 16-bit graph computes from them. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>

#include "dg_autodiff.h"
#include "dg_buffers.h"
#include "dg_cpu_half.h"
#include "dg_ep_sort.h"
#include "dg_grouped_gemm.h"
#include "dg_kernel_call.h"
#include "dg_moe_loss.h"
#include "dg_op_act.h"
#include "dg_op_attention.h"
#include "dg_op_attn_unfused.h"
#include "dg_op_basic.h"
#include "dg_op_bias.h"
#include "dg_op_cast.h"
#include "dg_op_dropout.h"
#include "dg_op_embedding.h"
#include "dg_op_matmul.h"
#include "dg_op_norm.h"
#include "dg_op_rope.h"
#include "dg_op_shape.h"
#include "dg_op_xent.h"
#include "dg_ops.h"
#include "dg_pass_precision.h"
#include "dg_permute.h"
#include "dg_router.h"
#include "dg_verify.h"

enum { B = 2, S = 24, HQ = 4, HKV = 2, DH = 16, HD = HQ * DH, V = 40, F = 24, T = B * S, E = 4, K = 2 };

static float uniform(uint64_t *s) { return (float)((dg_splitmix64(s) >> 11) * 0x1.0p-53 * 2.0 - 1.0); }

/* The dense and MoE blocks in f32, one loss; hi[t]: i32 inputs' ranges. */
static dg_graph *blocks(int *loss_out, int *hi) {
    dg_graph *g = dg_graph_new("kernel16");
    int tokens = dg_input_new(g, "tokens", DG_I32, 1, DG_SHAPE(T));
    int targets = dg_input_new(g, "targets", DG_I32, 1, DG_SHAPE(T));
    int key = dg_input_new(g, "rng_key", DG_I32, 1, DG_SHAPE(4));
    int mask = dg_input_new(g, "mask", DG_F32, 1, DG_SHAPE(T));
    int emb = dg_param_new(g, "emb", 2, DG_SHAPE(V, HD));
    int x = dg_embedding(g, emb, tokens);
    int h = dg_rmsnorm(g, x, dg_param_new(g, "w_norm", 1, DG_SHAPE(HD)), 1e-5);
    int q = dg_bias_add(g, dg_linear(g, h, dg_param_new(g, "wq", 2, DG_SHAPE(HD, HD))),
                        dg_param_new(g, "bq", 1, DG_SHAPE(HD)));
    q = dg_reshape(g, q, 4, DG_SHAPE(B, S, HQ, DH));
    int k = dg_reshape(g, dg_linear(g, h, dg_param_new(g, "wk", 2, DG_SHAPE(HKV * DH, HD))), 4,
                       DG_SHAPE(B, S, HKV, DH));
    int v = dg_reshape(g, dg_linear(g, h, dg_param_new(g, "wv", 2, DG_SHAPE(HKV * DH, HD))), 4,
                       DG_SHAPE(B, S, HKV, DH));
    q = dg_rope_partial(g, q, 10000.0, 0, DH / 2);
    k = dg_rope(g, k, 10000.0, 0);
    int a = dg_reshape(g, dg_attention_ex(g, q, k, v, 1, 0, NULL), 2, DG_SHAPE(T, HD));
    int au = dg_reshape(g, dg_attention_unfused(g, q, k, v, 1, 0.25, 0.1, key, 2), 2, DG_SHAPE(T, HD));
    int r = dg_add(g, x, dg_linear(g, dg_add(g, a, au), dg_param_new(g, "wo", 2, DG_SHAPE(HD, HD))));
    r = dg_dropout(g, r, key, 0.1, 1);
    int h2 = dg_layernorm(g, r, dg_param_new(g, "ln_w", 1, DG_SHAPE(HD)), dg_param_new(g, "ln_b", 1, DG_SHAPE(HD)),
                          1e-5);
    int u = dg_swiglu(g, dg_linear(g, h2, dg_param_new(g, "w1", 2, DG_SHAPE(2 * F, HD))));
    int m = dg_linear(g, dg_gelu_tanh(g, u), dg_param_new(g, "w2", 2, DG_SHAPE(HD, F)));
    int r2 = dg_add(g, r, dg_scale(g, m, 0.5));
    /* MoE: router, its losses, permute, the expert GEMMs, unpermute */
    int logits = dg_linear(g, r2, dg_param_new(g, "wr", 2, DG_SHAPE(E, HD)));
    dg_router_opts o = dg_router_opts_default(K);
    dg_router_out ro;
    dg_moe_router(g, logits, &o, &ro);
    int aux = dg_moe_aux_loss(g, logits, ro.tokens_per_expert, K, o.score, 1e-2);
    int zl = dg_moe_z_loss(g, logits, 1e-3);
    dg_permute_out po;
    dg_moe_permute(g, r2, ro.indices, E, &po);
    int eh = dg_grouped_linear(g, po.x_perm, po.tokens_per_expert, dg_param_new(g, "we1", 3, DG_SHAPE(E, F, HD)));
    int ey = dg_grouped_linear(g, dg_mul(g, eh, eh), po.tokens_per_expert,
                               dg_param_new(g, "we2", 3, DG_SHAPE(E, HD, F)));
    int y = dg_add(g, r2, dg_moe_unpermute(g, ey, ro.probs, po.row_map));
    /* EP's movers on 16-bit rows, a branch of their own (they have no
     * adjoint): a transpose, a split and a concatenation */
    int yt = dg_reshape(g, dg_moe_ep_transpose(g, dg_reshape(g, y, 1, DG_SHAPE(T * HD)), 2, 3), 2, DG_SHAPE(T, HD));
    int halves[2];
    dg_moe_ep_split_rows(g, yt, 2, halves);
    dg_moe_ep_concat_rows(g, (int[]){halves[1], halves[0]}, 2);
    int lo = dg_matmul(g, y, emb, 0, 1);
    int loss = dg_softmax_xent(g, lo, targets, mask, NULL);
    loss = dg_add(g, dg_add(g, loss, aux), dg_add(g, zl, dg_scale(g, dg_mean(g, y), 1e-2)));
    if (g->status != DG_OK) print_error("blocks: %s\n", g->err.msg);
    assert_int_equal(g->status, DG_OK);
    hi[tokens] = V;
    hi[targets] = V;
    hi[key] = 1 << 20;
    *loss_out = loss;
    return g;
}

/* The graph as the f32 kernels see it: every floating tensor f32. */
static dg_graph *f32_view(const dg_graph *g) {
    dg_graph *c = dg_graph_clone(g);
    for (int t = 0; t < c->n_tensors; t++)
        if (dg_dtype_is_float(c->tensors[t].dtype)) c->tensors[t].dtype = DG_F32;
    return c;
}

static int same_bits(const void *a, const void *b, size_t n) { return !memcmp(a, b, n); }

/* Output t of node n: the 16-bit kernel's buffer `got` against the f32
 * kernel's `want` (f32 for a floating tensor). Returns 0 when equal. */
static int compare(const dg_graph *g, const dg_node *n, int t, const void *got, const void *want) {
    const dg_tensor *x = &g->tensors[t];
    int64_t cnt = dg_tensor_numel(x);
    if (!dg_dtype_is_16(x->dtype)) {
        size_t es = dg_dtype_is_float(x->dtype) ? sizeof(float) : dg_dtype_size(x->dtype);
        if (same_bits(got, want, (size_t)cnt * es)) return 0;
        print_error("node %d '%s' (op %s) output '%s' (%s): differs from the f32 kernel's\n", n->id, n->name,
                    n->op->name, x->name, dg_dtype_name(x->dtype));
        return 1;
    }
    const uint16_t *h = got;
    const float *w = want;
    int fp16 = x->dtype == DG_F16;
    for (int64_t i = 0; i < cnt; i++) {
        uint16_t r = dg_half_bits(w[i], fp16);
        if (h[i] == r || (isnan(w[i]) && isnan(dg_half_value(h[i], fp16)))) continue;
        print_error("node %d '%s' (op %s) output '%s' [%lld]: %s %04x, the f32 kernel's %a rounds to %04x\n", n->id,
                    n->name, n->op->name, x->name, (long long)i, dg_dtype_name(x->dtype), h[i], (double)w[i], r);
        return 1;
    }
    return 0;
}

/* Run the 16-bit graph node by node, checking each against its f32 kernel;
 * returns the number of nodes checked, *converted those dg_kernel_call
 * converted around. */
static int check_all(dg_graph *g, const int *hi, uint64_t seed, int *converted) {
    dg_graph *v32 = f32_view(g);
    dg_buffers b;
    dg_buffers_alloc(g, &b);
    uint64_t s = seed;
    for (int t = 0; t < g->n_tensors; t++) {
        const dg_tensor *x = &g->tensors[t];
        if (x->producer >= 0) continue;
        int64_t n = dg_tensor_numel(x);
        if (x->dtype == DG_F32)
            for (int64_t i = 0; i < n; i++) dg_buf_f32(&b, t)[i] = x->role == DG_ROLE_INPUT ? 1.0f : uniform(&s);
        else if (x->dtype == DG_I32 && hi[t] > 0)
            for (int64_t i = 0; i < n; i++) dg_buf_i32(&b, t)[i] = (int32_t)(dg_splitmix64(&s) % (uint64_t)hi[t]);
    }
    dg_err err = {{0}};
    int *order = dg_malloc(sizeof(int) * (size_t)g->n_nodes);
    assert_int_equal(dg_graph_topo_order(g, order, &err), DG_OK);
    dg_kernel_scratch cv = {NULL, 0};
    int checked = 0, bad = 0;
    *converted = 0;
    for (int k = 0; k < g->n_nodes; k++) {
        const dg_node *n = &g->nodes[order[k]], *n32 = &v32->nodes[order[k]];
        size_t ws_bytes = n->op->workspace ? n->op->workspace(g, n, 1) : 0;
        void *ws = ws_bytes ? dg_aligned_alloc(ws_bytes) : NULL;
        dg_exec_env env = {NULL, ws, ws_bytes, DG_BACKEND_CPU, NULL};
        /* the f32 kernel first, on widened copies of the inputs */
        void *in32[DG_MAX_INPUTS], *out32[DG_MAX_OUTPUTS], *in[DG_MAX_INPUTS], *out[DG_MAX_OUTPUTS];
        for (int i = 0; i < n->n_in; i++) {
            const dg_tensor *x = &g->tensors[n->in[i]];
            in[i] = in32[i] = b.ptr[n->in[i]];
            if (!dg_dtype_is_16(x->dtype)) continue;
            in32[i] = dg_aligned_alloc(sizeof(float) * (size_t)dg_tensor_numel(x) + 1);
            dg_cpu_from_half(NULL, in[i], in32[i], dg_tensor_numel(x), x->dtype == DG_F16);
        }
        for (int j = 0; j < n->n_out; j++) {
            const dg_tensor *x = &g->tensors[n->out[j]];
            size_t es = dg_dtype_is_float(x->dtype) ? sizeof(float) : dg_dtype_size(x->dtype);
            out32[j] = dg_aligned_alloc(es * (size_t)dg_tensor_numel(x) + 1);
            out[j] = b.ptr[n->out[j]];
        }
        assert_int_equal(n32->op->kernel(&env, v32, n32, in32, out32), DG_OK);
        /* then as the runtime runs it */
        *converted += dg_kernel_converts(g, n);
        assert_int_equal(dg_kernel_call(&env, g, n, in, out, &cv), DG_OK);
        for (int j = 0; j < n->n_out; j++) bad += compare(g, n, n->out[j], out[j], out32[j]);
        for (int i = 0; i < n->n_in; i++)
            if (in32[i] != in[i]) dg_free(in32[i]);
        for (int j = 0; j < n->n_out; j++) dg_free(out32[j]);
        dg_free(ws);
        checked++;
    }
    dg_kernel_scratch_free(&cv);
    dg_free(order);
    dg_buffers_free(&b);
    dg_graph_free(v32);
    assert_int_equal(bad, 0);
    return checked;
}

static void check_dtype(dg_dtype dt, uint64_t seed) {
    int hi[1024] = {0}, loss;
    dg_graph *g = blocks(&loss, hi);
    assert_true(g->n_tensors <= 1024);
    dg_pass_precision_opts o = {dt, &dg_op_cast, NULL, -1};
    dg_graph *g16 = NULL;
    int *tmap = dg_malloc(sizeof(int) * (size_t)g->n_tensors);
    dg_err err = {{0}};
    assert_int_equal(dg_pass_precision(g, &o, &g16, tmap, &err), DG_OK);
    int hi16[2048] = {0};
    assert_true(g16->n_tensors <= 2048);
    for (int t = 0; t < g->n_tensors; t++)
        if (tmap[t] >= 0) hi16[tmap[t]] = hi[t];
    int st = dg_autodiff(g16, tmap[loss], dg_ops_autodiff(), NULL, &err);
    if (st != DG_OK) print_error("autodiff: %s\n", err.msg);
    assert_int_equal(st, DG_OK);
    assert_true(g16->n_tensors <= 2048);
    assert_int_equal(dg_verify(g16, &err), DG_OK);
    /* the graph is 16-bit where it should be */
    int n16 = 0;
    for (int t = 0; t < g16->n_tensors; t++) n16 += g16->tensors[t].dtype == dt;
    assert_true(n16 > g16->n_tensors / 2);
    int converted = 0, checked = check_all(g16, hi16, seed, &converted);
    assert_int_equal(checked, g16->n_nodes);
    assert_true(converted > 50);
    dg_free(tmap);
    dg_graph_free(g16);
    dg_graph_free(g);
}

static void test_bf16(void **state) {
    (void)state;
    check_dtype(DG_BF16, 1);
}

static void test_fp16(void **state) {
    (void)state;
    check_dtype(DG_F16, 2);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_bf16), cmocka_unit_test(test_fp16)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
