/* test_cuda_ops.c — every CUDA kernel against its CPU kernel (needs a GPU).
 *
 * Five graphs use every op the CUDA table covers: a dense transformer
 * block (embedding, RMSNorm, RoPE at 50% and 100% and YaRN on interleaved
 * pairs, MLA's narrow / pad_last / expand_heads / heads_sum, causal GQA attention,
 * LayerNorm, SwiGLU, GeLU, element-wise ops, tied LM head, masked cross
 * entropy, AdamW), an MoE block (router, aux and z losses, permutation,
 * grouped GEMMs; softmax and sigmoid with bias and groups, with and
 * without capacity dropping), the device-side reductions on ragged shapes
 * (grouped GEMMs with a 0-row expert and padding rows, norms' weight
 * gradients over several row chunks, the embedding's gradient over several
 * token chunks), a non-causal
 * attention with a 96-wide head, the training path (learned positions,
 * dropout, biases, unfused attention, 16-bit rounding, loss scaling) and
 * an optimizer step (norm, clip, AdamW on a shard and on a whole
 * parameter, commit, store, dp pack/unpack; with a NaN gradient too);
 * autodiff adds the backward ops. The CPU runs each graph on fresh random
 * inputs node by node; before each node whose op has a CUDA kernel, that
 * kernel runs on device copies of the SAME inputs, its outputs poisoned
 * (NaN) first, and each output (and each input it updates in place) must
 * match the CPU's: fp32 within 1e-5 norm-wise and 1e-3 per element
 * (dg_close.h says why), f64 within 1e-12, integers and the embedding's
 * gradient (summed in the CPU's order) exactly. Then the whole dense graph runs on the device
 * executor and its loss and gradients must match the CPU run within 1e-4
 * norm-wise and 1e-2 per element; a graph
 * with an op that has no CUDA kernel (seq_last) is refused without
 * host fallback and runs with it; a
 * token outside the vocabulary is DG_EINPUT naming the node.
 * Registered only when a GPU is usable (tests/cuda/CMakeLists.txt): without
 * one every case fails, it never skips. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "dg_autodiff.h"
#include "dg_close.h"
#include "dg_cuda.h"
#include "dg_cuda_exec.h"
#include "dg_cuda_table.h"
#include "dg_exec_serial.h"
#include "dg_grouped_gemm.h"
#include "dg_moe_loss.h"
#include "dg_op_act.h"
#include "dg_op_adamw.h"
#include "dg_op_attention.h"
#include "dg_op_attn_unfused.h"
#include "dg_op_bias.h"
#include "dg_op_basic.h"
#include "dg_op_dp_pack.h"
#include "dg_op_attn_key.h"
#include "dg_op_dropout.h"
#include "dg_op_embedding.h"
#include "dg_op_kv.h"
#include "dg_op_matmul.h"
#include "dg_op_mla.h"
#include "dg_op_norm.h"
#include "dg_op_optim.h"
#include "dg_op_rope.h"
#include "dg_op_cast.h"
#include "dg_op_shape.h"
#include "dg_op_xent.h"
#include "dg_ops_util.h"
#include "dg_permute.h"
#include "dg_router.h"

static dg_cuda_ctx *ctx;
static int covered[256]; /* per table entry: nodes checked */

static float uniform(uint64_t *s) { return (float)((dg_splitmix64(s) >> 11) * 0x1.0p-53 * 2.0 - 1.0); }

/* Leaves: f32 uniform in [-1, 1]; i32 leaves in [0, hi[t]) (hi set by the
 * caller per tensor, default 0: left zero). */
static void fill_leaves(const dg_graph *g, dg_buffers *b, uint64_t seed, const int *hi) {
    uint64_t s = seed;
    for (int t = 0; t < g->n_tensors; t++) {
        const dg_tensor *x = &g->tensors[t];
        if (x->producer >= 0) continue;
        int64_t n = dg_tensor_numel(x);
        if (x->dtype == DG_F32)
            for (int64_t i = 0; i < n; i++) dg_buf_f32(b, t)[i] = uniform(&s);
        else if (x->dtype == DG_I32 && hi && hi[t] > 0)
            for (int64_t i = 0; i < n; i++) dg_buf_i32(b, t)[i] = (int32_t)(dg_splitmix64(&s) % (uint64_t)hi[t]);
    }
}

/* 0 when got matches want: integers exactly, fp32 by dg_close_f32
 * (dg_close.h says why norm-wise), f64 (the optimizer's norms and status:
 * sums in double whose order differs) within 1e-12 relative per element, NaN
 * matching NaN, the embedding's gradient bitwise; else prints the mismatch
 * and returns 1. */
static int compare(const dg_graph *g, const dg_node *n, int t, const void *got, const void *want,
                   double norm_tol, double elem_tol) {
    const dg_tensor *x = &g->tensors[t];
    int64_t cnt = dg_tensor_numel(x);
    if (x->dtype == DG_F64) {
        const double *u = got, *w = want;
        for (int64_t i = 0; i < cnt; i++)
            if (!(isnan(u[i]) && isnan(w[i])) && !(fabs(u[i] - w[i]) <= 1e-12 * fmax(1.0, fabs(w[i])))) {
                print_error("node %d (%s) output '%s' [%lld]: %.17g, cpu %.17g\n", n->id, n->op->name, x->name,
                            (long long)i, u[i], w[i]);
                return 1;
            }
        return 0;
    }
    /* the embedding's gradient adds in the CPU's order (token order, fp32) */
    if (x->dtype != DG_F32 || n->op == &dg_op_embedding_bwd) {
        size_t es = dg_dtype_size(x->dtype);
        for (int64_t i = 0; i < cnt; i++)
            if (memcmp((const char *)got + i * es, (const char *)want + i * es, es)) {
                print_error("node %d (%s) output '%s' [%lld]: differs bitwise\n", n->id, n->op->name,
                            x->name, (long long)i);
                return 1;
            }
        return 0;
    }
    char why[256];
    if (dg_close_f32(got, want, cnt, norm_tol, elem_tol, why, sizeof why)) return 0;
    print_error("node %d (%s) output '%s' (cuda against cpu) %s\n", n->id, n->op->name, x->name, why);
    return 1;
}

/* Node n's CPU kernel on b's buffers, on this thread. */
static int run_cpu_node(const dg_graph *g, const dg_node *n, dg_buffers *b, dg_err *err) {
    size_t ws_bytes = n->op->workspace ? n->op->workspace(g, n, 1) : 0;
    void *ws = ws_bytes ? dg_aligned_alloc(ws_bytes) : NULL;
    void *in[DG_MAX_INPUTS], *out[DG_MAX_OUTPUTS];
    for (int i = 0; i < n->n_in; i++) in[i] = b->ptr[n->in[i]];
    for (int j = 0; j < n->n_out; j++) out[j] = b->ptr[n->out[j]];
    dg_exec_env env = {NULL, ws, ws_bytes, DG_BACKEND_CPU, NULL};
    int st = n->op->kernel(&env, g, n, in, out);
    dg_free(ws);
    if (st != DG_OK) dg_err_set(err, st, "node %d (%s): CPU kernel failed with %d", n->id, n->op->name, st);
    return st;
}

/* A case's own input values, set after the random fill. */
typedef void (*prep_fn)(const dg_graph *g, dg_buffers *b);

/* Run g on the CPU node by node in topological order; before each node that
 * has a CUDA kernel, run that kernel on device copies of the SAME inputs
 * (those it updates in place, dg_cuda_inputs_written: on copies taken
 * before the CPU kernel writes them), its outputs poisoned (NaN) first;
 * compare its outputs and in-place updates with the CPU's. Returns the
 * number of nodes checked. */
static int check_graph_prep(dg_graph *g, const int *hi, uint64_t seed, prep_fn prep) {
    dg_err err = {{0}};
    dg_buffers b;
    dg_buffers_alloc(g, &b);
    fill_leaves(g, &b, seed, hi);
    /* AdamW's second moment must be >= 0 */
    for (int k = 0; k < g->n_nodes; k++)
        if (g->nodes[k].op == &dg_op_adamw || g->nodes[k].op == &dg_op_optim_adamw) {
            int v = g->nodes[k].in[3];
            for (int64_t i = 0; i < dg_tensor_numel(&g->tensors[v]); i++)
                dg_buf_f32(&b, v)[i] = fabsf(dg_buf_f32(&b, v)[i]);
        }
    if (prep) prep(g, &b);
    int *order = dg_malloc(sizeof(int) * (size_t)g->n_nodes);
    assert_int_equal(dg_graph_topo_order(g, order, &err), DG_OK);
    int n_entries = dg_cuda_entry_count();
    int checked = 0, bad = 0;
    for (int k = 0; k < g->n_nodes; k++) {
        const dg_node *n = &g->nodes[order[k]];
        int dev = dg_cuda_kernel_for(n->op) != NULL, st = DG_OK;
        unsigned written = dev ? dg_cuda_inputs_written(n->op) : 0;
        void *in[DG_MAX_INPUTS], *out[DG_MAX_OUTPUTS];
        if (dev) {
            for (int i = 0; i < n->n_in; i++) {
                size_t bytes = dg_tensor_bytes(&g->tensors[n->in[i]]);
                in[i] = b.ptr[n->in[i]];
                if (written >> i & 1u) {
                    in[i] = dg_aligned_alloc(bytes + 1);
                    memcpy(in[i], b.ptr[n->in[i]], bytes);
                }
            }
            for (int j = 0; j < n->n_out; j++) out[j] = dg_aligned_alloc(dg_tensor_bytes(&g->tensors[n->out[j]]) + 1);
            st = dg_cuda_run_node(ctx, g, n, in, out, 1, &err);
            if (st != DG_OK) print_error("node %d (%s): %s\n", n->id, n->op->name, err.msg);
            bad += st != DG_OK;
        }
        int cst = run_cpu_node(g, n, &b, &err);
        if (cst != DG_OK) print_error("cpu run: %s\n", err.msg);
        assert_int_equal(cst, DG_OK);
        if (!dev) continue;
        for (int j = 0; j < n->n_out && st == DG_OK; j++)
            bad += compare(g, n, n->out[j], out[j], b.ptr[n->out[j]], 1e-5, 1e-3);
        for (int i = 0; i < n->n_in && st == DG_OK; i++)
            if (written >> i & 1u) bad += compare(g, n, n->in[i], in[i], b.ptr[n->in[i]], 1e-5, 1e-3);
        for (int j = 0; j < n->n_out; j++) dg_free(out[j]);
        for (int i = 0; i < n->n_in; i++)
            if (written >> i & 1u) dg_free(in[i]);
        for (int e = 0; e < n_entries && e < 256; e++)
            if (dg_cuda_entry_at(e)->op == n->op) covered[e]++;
        checked++;
    }
    dg_free(order);
    dg_buffers_free(&b);
    assert_int_equal(bad, 0);
    return checked;
}

static int check_graph(dg_graph *g, const int *hi, uint64_t seed) { return check_graph_prep(g, hi, seed, NULL); }

enum { B = 2, S = 80, HQ = 4, HKV = 2, DH = 32, HD = HQ * DH, V = 96, F = 48 };

/* The dense block; *tokens, *loss and the embedding param come back. */
static dg_graph *dense_graph(int *tokens_out, int *loss_out, int *emb_out, int *hi) {
    dg_graph *g = dg_graph_new("cuda_dense");
    int T = B * S;
    int tokens = dg_input_new(g, "tokens", DG_I32, 1, DG_SHAPE(T));
    int targets = dg_input_new(g, "targets", DG_I32, 1, DG_SHAPE(T));
    int mask = dg_input_new(g, "mask", DG_F32, 1, DG_SHAPE(T));
    int emb = dg_param_new(g, "emb", 2, DG_SHAPE(V, HD));
    int x = dg_embedding(g, emb, tokens);
    int h = dg_rmsnorm(g, x, dg_param_new(g, "w_norm", 1, DG_SHAPE(HD)), 1e-5);
    int q = dg_reshape(g, dg_linear(g, h, dg_param_new(g, "wq", 2, DG_SHAPE(HQ * DH, HD))), 4,
                       DG_SHAPE(B, S, HQ, DH));
    int k = dg_reshape(g, dg_linear(g, h, dg_param_new(g, "wk", 2, DG_SHAPE(HKV * DH, HD))), 4,
                       DG_SHAPE(B, S, HKV, DH));
    int v = dg_reshape(g, dg_linear(g, h, dg_param_new(g, "wv", 2, DG_SHAPE(HKV * DH, HD))), 4,
                       DG_SHAPE(B, S, HKV, DH));
    q = dg_rope_partial(g, q, 10000.0, 0, DH / 2);
    k = dg_rope(g, k, 10000.0, 3);
    /* YaRN's frequencies and factor on interleaved pairs (MLA's rope), on v
     * only to give the kernel's path a node */
    dg_rope_yarn_opts yarn = {40.0, 32.0, 1.0, dg_rope_yarn_mscale(40.0, 1.0, 0.5), 64, 1, 0};
    v = dg_rope_yarn(g, v, 10000.0, DH, &yarn);
    /* MLA's shape ops (ops/dg_op_mla.h): k's first head's first half
     * expanded to every head and padded into the second half; autodiff adds
     * heads_sum and the narrow / pad adjoints */
    int kp = dg_narrow(g, dg_reshape(g, k, 3, DG_SHAPE(B, S, HKV * DH)), 0, DH / 2);
    kp = dg_expand_heads(g, dg_reshape(g, kp, 4, DG_SHAPE(B, S, 1, DH / 2)), k);
    k = dg_add(g, k, dg_pad_last(g, kp, DH / 2, DH));
    int a = dg_attention_ex(g, q, k, v, 1, 0, NULL);
    a = dg_reshape(g, a, 2, DG_SHAPE(T, HD));
    int r = dg_add(g, x, dg_linear(g, a, dg_param_new(g, "wo", 2, DG_SHAPE(HD, HD))));
    int h2 = dg_layernorm(g, r, dg_param_new(g, "ln_w", 1, DG_SHAPE(HD)),
                          dg_param_new(g, "ln_b", 1, DG_SHAPE(HD)), 1e-5);
    int u = dg_swiglu(g, dg_linear(g, h2, dg_param_new(g, "w1", 2, DG_SHAPE(2 * F, HD))));
    int m = dg_linear(g, dg_gelu_tanh(g, u), dg_param_new(g, "w2", 2, DG_SHAPE(HD, F)));
    int r2 = dg_mul(g, dg_add(g, r, dg_scale(g, m, 0.5)), dg_param_new(g, "gate", 2, DG_SHAPE(T, HD)));
    int logits = dg_matmul(g, r2, emb, 0, 1);
    int loss = dg_softmax_xent(g, logits, targets, mask, NULL);
    loss = dg_add(g, loss, dg_scale(g, dg_mean(g, r2), 1e-2));
    dg_err err = {{0}};
    int st = loss < 0 ? DG_EINPUT : dg_autodiff(g, loss, dg_ops_autodiff(), NULL, &err);
    if (st != DG_OK) print_error("dense graph: %s %s\n", g->err.msg, err.msg);
    assert_int_equal(st, DG_OK);
    /* one AdamW step on wq */
    int wq = -1;
    for (int t = 0; t < g->n_tensors; t++)
        if (!strcmp(g->tensors[t].name, "wq")) wq = t;
    dg_adamw_hparams hp = {1e-3, 0.9, 0.95, 1e-8, 0.1, 3};
    int mom = dg_input_new(g, "m_wq", DG_F32, 2, DG_SHAPE(HQ * DH, HD));
    int var = dg_input_new(g, "v_wq", DG_F32, 2, DG_SHAPE(HQ * DH, HD));
    int outs[3];
    dg_adamw(g, wq, g->tensors[wq].grad, mom, var, &hp, outs);
    assert_int_equal(g->status, DG_OK);
    hi[tokens] = V;
    hi[targets] = V;
    *tokens_out = tokens;
    *loss_out = loss;
    *emb_out = emb;
    return g;
}

static void test_dense_ops(void **state) {
    (void)state;
    int hi[512] = {0}, tokens, loss, emb;
    dg_graph *g = dense_graph(&tokens, &loss, &emb, hi);
    assert_true(g->n_tensors <= 512);
    assert_true(check_graph(g, hi, 1) > 20);
    dg_graph_free(g);
}

/* The MoE block; capacity_factor 0: dropless. */
static void moe_case(double capacity_factor, int sigmoid, uint64_t seed) {
    enum { T = 96, H = 64, E = 4, K = 2, FF = 32 };
    dg_graph *g = dg_graph_new("cuda_moe");
    int x = dg_param_new(g, "x", 2, DG_SHAPE(T, H));
    int logits = dg_linear(g, x, dg_param_new(g, "wr", 2, DG_SHAPE(E, H)));
    dg_router_opts o = dg_router_opts_default(K);
    o.capacity_factor = capacity_factor;
    if (sigmoid) { /* sigmoid scores, expert bias, group-limited routing */
        o.score = DG_MOE_SCORE_SIGMOID;
        o.expert_bias = dg_input_new(g, "bias", DG_F32, 1, DG_SHAPE(E));
        o.num_groups = 2;
        o.group_topk = 1;
        o.drop_policy = DG_MOE_DROP_POSITION;
    }
    dg_router_out r;
    dg_moe_router(g, logits, &o, &r);
    /* the aux loss's three count sources: tokens per expert, the routed
     * indices, and (sequence-level, 2 sequences) its own top-k */
    int aux = sigmoid ? dg_moe_seq_aux_loss(g, logits, -1, K, o.score, 1e-2, 2, 1)
              : capacity_factor > 0 ? dg_moe_aux_loss(g, logits, r.indices, K, o.score, 1e-2)
                                    : dg_moe_aux_loss(g, logits, r.tokens_per_expert, K, o.score, 1e-2);
    int zl = dg_moe_z_loss(g, logits, 1e-3);
    dg_permute_out po;
    dg_moe_permute(g, x, r.indices, E, &po);
    int h = dg_grouped_linear(g, po.x_perm, po.tokens_per_expert, dg_param_new(g, "w1", 3, DG_SHAPE(E, FF, H)));
    h = dg_mul(g, h, h);
    int yp = dg_grouped_linear(g, h, po.tokens_per_expert, dg_param_new(g, "w2", 3, DG_SHAPE(E, H, FF)));
    int y = dg_moe_unpermute(g, yp, r.probs, po.row_map);
    int R = dg_input_new(g, "R", DG_F32, 2, DG_SHAPE(T, H));
    int loss = dg_add(g, dg_add(g, dg_sum(g, dg_mul(g, y, R)), aux), zl);
    dg_err err = {{0}};
    int st = loss < 0 ? DG_EINPUT : dg_autodiff(g, loss, dg_ops_autodiff(), NULL, &err);
    if (st != DG_OK) print_error("moe graph: %s %s\n", g->err.msg, err.msg);
    assert_int_equal(st, DG_OK);
    assert_true(check_graph(g, NULL, seed) > 10);
    dg_graph_free(g);
}

static void test_moe_ops(void **state) {
    (void)state;
    moe_case(0, 0, 2);
    moe_case(1.0, 0, 3); /* capacity dropping (by probs): -1 slots in the permutation */
    moe_case(0.75, 1, 4); /* sigmoid, expert bias, groups, dropping by position */
}

/* Counts of the ragged case: expert 1 has no rows, the others are not
 * multiples of the GEMM's 64-row tiles, and they sum to 203 of the 230
 * rows (27 padding rows come out zero). */
static void prep_ragged(const dg_graph *g, dg_buffers *b) {
    static const int32_t counts[5] = {70, 0, 3, 129, 1};
    for (int t = 0; t < g->n_tensors; t++)
        if (!strcmp(g->tensors[t].name, "counts")) memcpy(b->ptr[t], counts, sizeof counts);
}

/* The device-side reductions on ragged shapes: grouped GEMMs (both weight
 * layouts, their data and weight gradients) with a 0-row expert, padding
 * rows and K, M not multiples of the tiles; RMSNorm and LayerNorm over 200
 * rows (the weight gradients' row chunks, 64 each, end ragged) of 300
 * columns (not a multiple of the 128-column blocks); the embedding's
 * gradient over 2500 tokens (three token chunks, the last partial), most
 * tokens repeated, vocabulary rows 250..299 never hit. */
static void test_ragged_reductions(void **state) {
    (void)state;
    enum { N = 230, E = 5, K = 37, M = 70, R = 200, H = 300, T = 2500, Vr = 300, Hr = 20 };
    dg_graph *g = dg_graph_new("cuda_ragged");
    int x = dg_param_new(g, "x", 2, DG_SHAPE(N, K));
    int counts = dg_input_new(g, "counts", DG_I32, 1, DG_SHAPE(E));
    int h = dg_grouped_linear(g, x, counts, dg_param_new(g, "w1", 3, DG_SHAPE(E, M, K)));
    int y = dg_grouped_gemm(g, h, counts, dg_param_new(g, "w2", 3, DG_SHAPE(E, M, K)), 0);
    int loss = dg_sum(g, dg_mul(g, y, dg_input_new(g, "Ry", DG_F32, 2, DG_SHAPE(N, K))));
    int xn = dg_param_new(g, "xn", 2, DG_SHAPE(R, H));
    int n1 = dg_rmsnorm(g, xn, dg_param_new(g, "rms_w", 1, DG_SHAPE(H)), 1e-5);
    int n2 = dg_layernorm(g, n1, dg_param_new(g, "ln_w", 1, DG_SHAPE(H)), dg_param_new(g, "ln_b", 1, DG_SHAPE(H)),
                          1e-5);
    loss = dg_add(g, loss, dg_sum(g, dg_mul(g, n2, dg_input_new(g, "Rn", DG_F32, 2, DG_SHAPE(R, H)))));
    int tokens = dg_input_new(g, "tokens", DG_I32, 1, DG_SHAPE(T));
    int emb = dg_embedding(g, dg_param_new(g, "emb", 2, DG_SHAPE(Vr, Hr)), tokens);
    loss = dg_add(g, loss, dg_sum(g, dg_mul(g, emb, dg_input_new(g, "Re", DG_F32, 2, DG_SHAPE(T, Hr)))));
    dg_err err = {{0}};
    int st = loss < 0 ? DG_EINPUT : dg_autodiff(g, loss, dg_ops_autodiff(), NULL, &err);
    if (st != DG_OK) print_error("ragged graph: %s %s\n", g->err.msg, err.msg);
    assert_int_equal(st, DG_OK);
    int hi[128] = {0};
    assert_true(g->n_tensors <= 128);
    hi[tokens] = 250;
    int seen[3] = {0};
    for (int k = 0; k < g->n_nodes; k++) {
        const dg_op_def *op = g->nodes[k].op;
        seen[0] += op == &dg_op_grouped_gemm || op == &dg_op_grouped_gemm_wgrad;
        seen[1] += op == &dg_op_rmsnorm_bwd || op == &dg_op_layernorm_bwd;
        seen[2] += op == &dg_op_embedding_bwd;
    }
    /* 2 forward, 2 data and 2 weight gradients; both norms; the embedding */
    assert_int_equal(seen[0], 6);
    assert_int_equal(seen[1], 2);
    assert_int_equal(seen[2], 1);
    assert_true(check_graph_prep(g, hi, 9, prep_ragged) >= 9); /* at least those nine */
    dg_graph_free(g);
}

/* Non-causal attention with a 96-wide head (the <= 128 instantiation). */
static void test_attention_wide(void **state) {
    (void)state;
    enum { S2 = 70, H2 = 3, D2 = 96 };
    dg_graph *g = dg_graph_new("cuda_attn");
    int q = dg_param_new(g, "q", 4, DG_SHAPE(1, S2, H2, D2));
    int k = dg_param_new(g, "k", 4, DG_SHAPE(1, S2, H2, D2));
    int v = dg_param_new(g, "v", 4, DG_SHAPE(1, S2, H2, D2));
    int a = dg_attention_ex(g, q, k, v, 0, 0, NULL);
    int R = dg_input_new(g, "R", DG_F32, 4, DG_SHAPE(1, S2, H2, D2));
    int loss = dg_sum(g, dg_mul(g, a, R));
    dg_err err = {{0}};
    assert_int_equal(dg_autodiff(g, loss, dg_ops_autodiff(), NULL, &err), DG_OK);
    assert_true(check_graph(g, NULL, 4) >= 3);
    dg_graph_free(g);
}

/* Fixed values the training-path cases need: dropout keys that train
 * (seed, iteration, first sample, 1), dropout coordinates, decoding
 * positions inside the table, a loss scale of 8. */
static void prep_train(const dg_graph *g, dg_buffers *b) {
    for (int t = 0; t < g->n_tensors; t++) {
        const char *nm = g->tensors[t].name;
        if (!strcmp(nm, "rng_key")) {
            int32_t *k = dg_buf_i32(b, t);
            k[0] = 1234, k[1] = 7, k[2] = 3, k[3] = 1;
        } else if (!strcmp(nm, "coord")) {
            dg_buf_i32(b, t)[0] = 1;
        } else if (!strcmp(nm, "inner")) {
            dg_buf_i32(b, t)[0] = 1;
        } else if (!strcmp(nm, "pos")) {
            dg_buf_i32(b, t)[0] = 0, dg_buf_i32(b, t)[1] = 5;
        } else if (!strcmp(nm, "loss_scale")) {
            dg_buf_f32(b, t)[0] = 8.0f;
        }
    }
}

/* The default dense model's training path: learned positions, dropout 0.1
 * (plain, on a sequence slice, and CP's two chunks), linears with biases,
 * the unfused attention chain with attention dropout (GQA: context_t sums
 * a group), the fused attention with its own (attn_key's head offset), bf16 and fp16 rounding and fp16's loss scaling; autodiff adds
 * bias_grad, pos_embed_grad, softmax_bwd, the transposed products. Then
 * forward-only nodes: positions at a decoding offset, a non-causal softmax,
 * dropout of a sequence slice and of CP's chunks. */
static void test_train_path_ops(void **state) {
    (void)state;
    enum { Bt = 2, St = 24, Hq = 4, Hkv = 2, Dt = 16, Ht = Hq * Dt, Tt = Bt * St, P = St + 6 };
    dg_graph *g = dg_graph_new("cuda_train_path");
    int key = dg_input_new(g, "rng_key", DG_I32, 1, DG_SHAPE(4));
    int scale = dg_input_new(g, "loss_scale", DG_F32, 1, DG_SHAPE(1));
    int x = dg_param_new(g, "x", 3, DG_SHAPE(Bt, St, Ht));
    int pos_table = dg_param_new(g, "pos_table", 2, DG_SHAPE(P, Ht));
    int h = dg_dropout(g, dg_pos_embed_add(g, x, pos_table), key, 0.1, 1);
    h = dg_cast(g, dg_cast(g, h, DG_BF16), DG_F32); /* both casts, and the rest in f32 */
    int h2 = dg_reshape(g, h, 2, DG_SHAPE(Tt, Ht));
    int q = dg_bias_add(g, dg_linear(g, h2, dg_param_new(g, "wq", 2, DG_SHAPE(Hq * Dt, Ht))),
                        dg_param_new(g, "bq", 1, DG_SHAPE(Hq * Dt)));
    int k = dg_bias_add(g, dg_linear(g, h2, dg_param_new(g, "wk", 2, DG_SHAPE(Hkv * Dt, Ht))),
                        dg_param_new(g, "bk", 1, DG_SHAPE(Hkv * Dt)));
    int v = dg_bias_add(g, dg_linear(g, h2, dg_param_new(g, "wv", 2, DG_SHAPE(Hkv * Dt, Ht))),
                        dg_param_new(g, "bv", 1, DG_SHAPE(Hkv * Dt)));
    q = dg_reshape(g, q, 4, DG_SHAPE(Bt, St, Hq, Dt));
    k = dg_reshape(g, k, 4, DG_SHAPE(Bt, St, Hkv, Dt));
    v = dg_reshape(g, v, 4, DG_SHAPE(Bt, St, Hkv, Dt));
    int a = dg_attention_unfused(g, q, k, v, 1, 0.25, 0.1, key, 2);
    /* the fused attention with its dropout drawn inside, the key naming a
     * later first head (a TP rank's: coordinate 1 of Hq heads) */
    int coord = dg_input_new(g, "coord", DG_I32, 1, DG_SHAPE(1));
    dg_attn_opts fo = {.causal = 1, .scale = 0.25, .key = dg_attn_key(g, key, coord, Hq), .dropout = 0.1, .site = 5};
    a = dg_add(g, a, dg_attention_opt(g, q, k, v, &fo, NULL));
    a = dg_cast(g, dg_cast(g, dg_reshape(g, a, 2, DG_SHAPE(Tt, Ht)), DG_F16), DG_F32);
    int R = dg_input_new(g, "R", DG_F32, 2, DG_SHAPE(Tt, Ht));
    int loss = dg_sum(g, dg_mul(g, dg_add(g, a, h2), R));
    loss = dg_loss_scaling(g, loss, scale, 1, 0);
    dg_err err = {{0}};
    int st = loss < 0 ? DG_EINPUT : dg_autodiff(g, loss, dg_ops_autodiff(), NULL, &err);
    if (st != DG_OK) print_error("train path graph: %s %s\n", g->err.msg, err.msg);
    assert_int_equal(st, DG_OK);
    /* forward only: a decoding step's positions, a non-causal softmax, and
     * dropout on a slice of each sample (coordinate 1) and on CP's two
     * chunks (cp 2, rank 1, inner part 1 of 2, then of 3) */
    int pos = dg_input_new(g, "pos", DG_I32, 1, DG_SHAPE(Bt));
    int xl = dg_input_new(g, "x_dec", DG_F32, 3, DG_SHAPE(Bt, 3, Ht));
    assert_true(dg_pos_embed_add_at(g, xl, pos_table, pos) >= 0);
    int sc = dg_input_new(g, "scores", DG_F32, 4, DG_SHAPE(Bt, 3, St, St));
    assert_true(dg_attn_softmax(g, sc, 0) >= 0);
    int inner = dg_input_new(g, "inner", DG_I32, 1, DG_SHAPE(1));
    int xs = dg_input_new(g, "x_slice", DG_F32, 3, DG_SHAPE(Bt, 6, Ht));
    assert_true(dg_dropout_slice(g, xs, key, coord, DG_AXIS_TP, 0.1, 3) >= 0);
    dg_attrs da = dg_attrs_zero();
    da.f[0] = 0.1, da.i[0] = 4, da.i[1] = DG_AXIS_CP, da.i[2] = 2, da.i[3] = DG_AXIS_TP, da.i[4] = 2;
    assert_true(dg_add1(g, &dg_op_dropout, &da, (int[]){xs, key, coord, inner}, 4, NULL) >= 0);
    da.i[4] = 3; /* part 1 of 3 straddles the two chunks */
    assert_true(dg_add1(g, &dg_op_dropout, &da, (int[]){xs, key, coord, inner}, 4, NULL) >= 0);
    assert_int_equal(g->status, DG_OK);
    assert_true(check_graph_prep(g, NULL, 6, prep_train) > 20);
    dg_graph_free(g);
}

/* The optimizer's step on one reduce-scattered bucket (this rank's shard
 * of two parameters: master weights, commit, the parameters' store and
 * unpack) and one unsharded parameter, with the norm, the all-gathered
 * partial norms' sum and clipping; `nan` puts a NaN in a gradient, so
 * clip's status skips the update and no state may change. */
static const int g_rank = 2, g_size = 4;

static void prep_optim(const dg_graph *g, dg_buffers *b) {
    for (int t = 0; t < g->n_tensors; t++) {
        const char *nm = g->tensors[t].name;
        if (!strcmp(nm, "hparams")) {
            double *hp = b->ptr[t];
            hp[DG_OPTIM_LR] = 1e-2, hp[DG_OPTIM_STEP] = 3, hp[DG_OPTIM_APPLY] = 1;
        } else if (!strcmp(nm, "group_rank")) {
            for (int a = 0; a < DG_AXIS_COUNT; a++) dg_buf_i32(b, t)[a] = a == DG_AXIS_DP ? g_rank : 0;
        } else if (!strcmp(nm, "partials")) {
            for (int i = 0; i < 5; i++) ((double *)b->ptr[t])[i] = 0.25 * (i + 1);
        }
    }
}

static void prep_optim_nan(const dg_graph *g, dg_buffers *b) {
    prep_optim(g, b);
    for (int t = 0; t < g->n_tensors; t++)
        if (!strcmp(g->tensors[t].name, "g_own")) dg_buf_f32(b, t)[7] = NAN;
}

static void optim_case(int nan) {
    enum { N1 = 300, N2 = 17 * 9, N3 = 50 };
    const int64_t padded = (N1 + N2 + g_size - 1) / g_size * g_size, shard = padded / g_size;
    dg_graph *g = dg_graph_new("cuda_optim");
    int g1 = dg_input_new(g, "g1", DG_F32, 1, DG_SHAPE(N1));
    int g2 = dg_input_new(g, "g2", DG_F32, 2, DG_SHAPE(17, 9));
    int g3 = dg_input_new(g, "g_own", DG_F32, 1, DG_SHAPE(N3));
    int gshard = dg_input_new(g, "g_shard", DG_F32, 1, DG_SHAPE(shard));
    int hp = dg_input_new(g, "hparams", DG_F64, 1, DG_SHAPE(DG_OPTIM_NHPARAMS));
    int gr = dg_input_new(g, "group_rank", DG_I32, 1, DG_SHAPE(DG_AXIS_COUNT));
    int parts = dg_input_new(g, "partials", DG_F64, 1, DG_SHAPE(5));
    int p1 = dg_param_new(g, "p1", 1, DG_SHAPE(N1)), p2 = dg_param_new(g, "p2", 2, DG_SHAPE(17, 9));
    int p3 = dg_param_new(g, "p3", 1, DG_SHAPE(N3));
    int master = dg_input_new(g, "master", DG_F32, 1, DG_SHAPE(shard));
    int m = dg_input_new(g, "m", DG_F32, 1, DG_SHAPE(shard)), v = dg_input_new(g, "v", DG_F32, 1, DG_SHAPE(shard));
    int m3 = dg_input_new(g, "m3", DG_F32, 1, DG_SHAPE(N3)), v3 = dg_input_new(g, "v3", DG_F32, 1, DG_SHAPE(N3));
    dg_attrs a = dg_attrs_zero();
    a.i[0] = padded;
    int packed = dg_add1(g, &dg_op_dp_pack, &a, (int[]){g1, g2}, 2, NULL);
    a = dg_attrs_zero();
    a.f[0] = 0.5;
    int sq = dg_add1(g, &dg_op_optim_sumsq, &a, (int[]){g3, gshard, g1}, 3, NULL);
    int tot = dg_add1(g, &dg_op_optim_sum, NULL, (int[]){sq, parts}, 2, NULL);
    a = dg_attrs_zero();
    a.f[0] = 1.0; /* max_norm */
    int status = dg_add1(g, &dg_op_optim_clip, &a, (int[]){tot, hp}, 2, NULL);
    /* AdamW: f = grad_scale, beta1, beta2, eps, weight decay */
    dg_attrs ad = dg_attrs_zero();
    ad.f[0] = 0.5, ad.f[1] = 0.9, ad.f[2] = 0.95, ad.f[3] = 1e-8, ad.f[4] = 0.1;
    ad.i[0] = 0, ad.i[1] = N1, ad.i[2] = shard, ad.i[3] = DG_AXIS_DP, ad.i[4] = 1, ad.i[5] = 1;
    int d1 = dg_add1(g, &dg_op_optim_adamw, &ad, (int[]){gshard, master, m, v, status, hp, gr}, 7, NULL);
    ad.i[0] = N1, ad.i[1] = N2;
    int d2 = dg_add1(g, &dg_op_optim_adamw, &ad, (int[]){gshard, master, m, v, status, hp, gr, d1}, 8, NULL);
    ad.i[0] = 0, ad.i[1] = N3, ad.i[2] = N3, ad.i[3] = DG_AXIS_NONE, ad.i[4] = 0, ad.i[5] = 0;
    assert_true(dg_add1(g, &dg_op_optim_adamw, &ad, (int[]){g3, p3, m3, v3, status, hp, gr}, 7, NULL) >= 0);
    int committed = dg_add1(g, &dg_op_optim_commit, NULL, (int[]){master, d1, d2}, 3, NULL);
    a = dg_attrs_zero();
    int s1 = dg_add1(g, &dg_op_optim_param_store, &a, (int[]){packed, p1, committed}, 3, NULL);
    a.i[0] = N1;
    assert_true(dg_add1(g, &dg_op_optim_param_store, &a, (int[]){packed, p2, s1}, 3, NULL) >= 0);
    a = dg_attrs_zero();
    a.i[0] = N1, a.i[1] = 2, a.i[2] = 17, a.i[3] = 9;
    assert_true(dg_add1(g, &dg_op_dp_unpack, &a, &packed, 1, NULL) >= 0);
    if (g->status != DG_OK) print_error("optimizer graph: %s\n", g->err.msg);
    assert_int_equal(g->status, DG_OK);
    assert_true(check_graph_prep(g, NULL, nan ? 8 : 7, nan ? prep_optim_nan : prep_optim) == 11);
    dg_graph_free(g);
}

static void test_optim_ops(void **state) {
    (void)state;
    optim_case(0);
    optim_case(1);
}

/* The par table's entries are test_cuda_ops_par's to check. */
static int in_par_table(const dg_cuda_entry *en) {
    return en >= dg_cuda_table_par && en < dg_cuda_table_par + dg_cuda_table_par_n;
}

/* Runs last: every table entry met at least one node above. */
static void test_every_kernel_checked(void **state) {
    (void)state;
    int n = dg_cuda_entry_count();
    assert_true(n <= 256);
    int missing = 0;
    for (int i = 0; i < n; i++)
        if (!covered[i] && !in_par_table(dg_cuda_entry_at(i))) {
            print_error("CUDA kernel of op '%s' was not checked by any case\n", dg_cuda_entry_at(i)->op->name);
            missing++;
        }
    assert_int_equal(missing, 0);
}

/* The dense graph on the device executor against the CPU, end to end. */
static void test_device_executor(void **state) {
    (void)state;
    int hi[512] = {0}, tokens, loss, emb;
    dg_graph *g = dense_graph(&tokens, &loss, &emb, hi);
    dg_buffers cpu, dev;
    dg_buffers_alloc(g, &cpu);
    dg_buffers_alloc(g, &dev);
    fill_leaves(g, &cpu, 5, hi);
    fill_leaves(g, &dev, 5, hi);
    dg_err err = {{0}};
    assert_int_equal(dg_run_serial(g, NULL, &cpu, NULL, &err), DG_OK);
    dg_cuda_run_opts o = {0, NULL, 1};
    dg_cuda_run_stats stats;
    int st = dg_run_cuda(g, NULL, &dev, ctx, &o, &stats, &err);
    if (st != DG_OK) print_error("device run: %s\n", err.msg);
    assert_int_equal(st, DG_OK);
    assert_int_equal(stats.n_host, 0);
    assert_true(stats.n_device > 20);
    int bad = 0;
    bad += compare(g, &g->nodes[g->tensors[loss].producer], loss, dev.ptr[loss], cpu.ptr[loss], 1e-4, 1e-2);
    for (int t = 0; t < g->n_tensors; t++)
        if (g->tensors[t].role == DG_ROLE_PARAMETER && g->tensors[t].grad >= 0) {
            int gt = g->tensors[t].grad;
            bad += compare(g, &g->nodes[g->tensors[gt].producer], gt, dev.ptr[gt], cpu.ptr[gt], 1e-4, 1e-2);
        }
    assert_int_equal(bad, 0);
    /* a token outside the vocabulary: DG_EINPUT naming the embedding node */
    dg_buf_i32(&dev, tokens)[7] = V + 5;
    st = dg_run_cuda(g, NULL, &dev, ctx, &o, &stats, &err);
    assert_int_equal(st, DG_EINPUT);
    assert_non_null(strstr(err.msg, "embedding"));
    dg_buffers_free(&cpu);
    dg_buffers_free(&dev);
    dg_graph_free(g);
}

/* Without host fallback, an op with no CUDA kernel (seq_last, a decode op)
 * is refused. */
static void test_no_fallback_refuses(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("cuda_seq_last");
    int x = dg_param_new(g, "x", 3, DG_SHAPE(2, 5, 8));
    assert_true(dg_seq_last(g, x) >= 0);
    assert_null(dg_cuda_kernel_for(g->nodes[g->n_nodes - 1].op));
    dg_buffers b;
    dg_buffers_alloc(g, &b);
    dg_err err = {{0}};
    dg_cuda_run_opts ro = {0, NULL, 1};
    assert_int_equal(dg_run_cuda(g, NULL, &b, ctx, &ro, NULL, &err), DG_EINPUT);
    assert_non_null(strstr(err.msg, "no CUDA kernel"));
    ro.host_fallback = 1;
    dg_cuda_run_stats stats;
    assert_int_equal(dg_run_cuda(g, NULL, &b, ctx, &ro, &stats, &err), DG_OK);
    assert_int_equal(stats.n_host, 1);
    dg_buffers_free(&b);
    dg_graph_free(g);
}

static int setup(void **state) {
    (void)state;
    dg_err err = {{0}};
    if (dg_cuda_ctx_new(0, &ctx, &err) != DG_OK) {
        fprintf(stderr, "test_cuda_ops: %s\n", err.msg);
        return -1; /* cmocka fails every test: a GPU test never skips */
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    dg_cuda_ctx_free(ctx);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dense_ops),
        cmocka_unit_test(test_moe_ops),
        cmocka_unit_test(test_ragged_reductions),
        cmocka_unit_test(test_attention_wide),
        cmocka_unit_test(test_train_path_ops),
        cmocka_unit_test(test_optim_ops),
        cmocka_unit_test(test_every_kernel_checked),
        cmocka_unit_test(test_device_executor),
        cmocka_unit_test(test_no_fallback_refuses),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
