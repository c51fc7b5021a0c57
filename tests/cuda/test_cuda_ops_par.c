/* test_cuda_ops_par.c — the parallel layouts' CUDA kernels (the par part of
 * the table, kernels/cuda/dg_cuda_table_par.cu) against their CPU kernels
 * (needs a GPU).
 *
 * Each graph emulates several ranks of a parallel layout in one graph, as
 * the CPU tests of these ops do (tests/cp/test_cp_ring.c): each rank's
 * nodes read its own "rank" input, and what a collective would carry is
 * wired directly (a gather is a concat_dim, the ring's K/V of rank r - s
 * are that rank's leaves):
 *  - vocab: TP = 2 vocab-parallel embedding (tables summed), the LM head
 *    per slice, stats gathered and combined, vocab_xent and
 *    cp_vocab_xent_sum with a mask whose zero rows hold target -100, a
 *    slice_dim / unslice_dim pair; autodiff adds the backward ops;
 *  - ep: sort_chunks and its inverse by counts with an empty chunk and rows
 *    past the total, the count sums and transposes, split into 2, 3 and 4
 *    chunks and concat back, local indices, the expert-TP masks;
 *  - ring: cp = 2 and 3 rings of cp_attn_block (every mode: diagonal, lower,
 *    upper) and lse_merge with GQA, chunks not a multiple of the tiles,
 *    head dims 16 and 96, forward and backward (with and without dlse),
 *    and with attention dropout (the rank input {cp_rank, key});
 *    cp_ring_attn_out;
 *  - cp: cp_positions, rope_pos (partial rotary dim; YaRN, interleaved), pos_embed_pos and its
 *    gradient (also with repeated positions), cp_xent_sum / cp_div,
 *    cp_relabel, cp_seq_permute along dims 1 and 2.
 * The CPU serial executor runs each graph; then every node whose op has a
 * CUDA kernel runs that kernel on device copies of the SAME inputs, outputs
 * poisoned (NaN, -1) first, and each output must match:
 *  - integers, and fp32 outputs of ops that only move data or add in the
 *    CPU's order (the embeddings and their gradients, the chunk, EP and
 *    relabel copies, positions, the masks, cp_div's one division): bitwise;
 *  - other fp32 outputs: dg_close_f32 with 1e-5 norm-wise and 1e-3 per
 *    element, test_cuda_ops' bounds (dg_close.h says why): the device sums
 *    in other orders (block trees, one online-softmax pass where the CPU
 *    merges two c x c blocks), contracts a*b+c into FMAs and has its own
 *    exp/log/cos/sin, each a few ulps per element (u = 6e-8), nearly
 *    independent over a tensor, far below 1e-5 of its norm, while a wrong
 *    mask, mode or index moves it by orders of magnitude more.
 * Then bad input found on the device (a token outside the vocabulary, a cp
 * rank outside the ring, counts past the rows) is DG_EINPUT naming the
 * node, and the last case checks every par table entry met a node.
 * Registered only when a GPU is usable (tests/cuda/CMakeLists.txt). */
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
#include "dg_ep_sort.h"
#include "dg_etp.h"
#include "dg_exec_serial.h"
#include "dg_op_basic.h"
#include "dg_op_chunk.h"
#include "dg_op_cp.h"
#include "dg_op_cp_a2a.h"
#include "dg_op_rope.h"
#include "dg_op_matmul.h"
#include "dg_op_ring_attn.h"
#include "dg_op_shape.h"
#include "dg_op_vocab.h"
#include "dg_ops_util.h"

static dg_cuda_ctx *ctx;
static int covered[256]; /* per par table entry: nodes checked */

/* ---- running and comparing --------------------------------------------------------------------- */

/* i32 leaves the case sets (else uniform in [0, hi), hi 0: zeros). */
typedef struct i32_leaf {
    int t, hi;
    int n;            /* values given: the leaf's first n elements */
    int32_t val[32];
} i32_leaf;

typedef struct leaves {
    i32_leaf i32[24];
    int n;
    int mask;       /* f32 leaf in {0, 0.5, 1} (mask 0 rows have target -100 when `targets` set), -1 */
    int targets;    /* i32 leaf of targets for the mask, -1 */
} leaves;

static float uniform(uint64_t *s) { return (float)((dg_splitmix64(s) >> 11) * 0x1.0p-53 * 2.0 - 1.0); }

static void add_i32(leaves *L, int t, int hi, int n, const int32_t *val) {
    i32_leaf *x = &L->i32[L->n++];
    x->t = t;
    x->hi = hi;
    x->n = n;
    for (int i = 0; i < n && i < 32; i++) x->val[i] = val[i];
}

static void fill(const dg_graph *g, dg_buffers *b, const leaves *L, uint64_t seed) {
    uint64_t s = seed;
    for (int t = 0; t < g->n_tensors; t++) {
        const dg_tensor *x = &g->tensors[t];
        if (x->producer >= 0 || x->dtype != DG_F32) continue;
        for (int64_t i = 0; i < dg_tensor_numel(x); i++) dg_buf_f32(b, t)[i] = uniform(&s);
    }
    for (int k = 0; k < L->n; k++) {
        const i32_leaf *x = &L->i32[k];
        int64_t n = dg_tensor_numel(&g->tensors[x->t]);
        for (int64_t i = 0; i < n; i++)
            dg_buf_i32(b, x->t)[i] = i < x->n ? x->val[i] : x->hi > 0 ? (int32_t)(dg_splitmix64(&s) % (uint64_t)x->hi) : 0;
    }
    if (L->mask >= 0) {
        int64_t n = dg_tensor_numel(&g->tensors[L->mask]);
        for (int64_t i = 0; i < n; i++) {
            float m = i % 5 == 2 ? 0.0f : i % 7 == 3 ? 0.5f : 1.0f;
            dg_buf_f32(b, L->mask)[i] = m;
            if (m == 0.0f && L->targets >= 0) dg_buf_i32(b, L->targets)[i] = -100; /* never read */
        }
    }
}

/* The par table's index of op, or -1. */
static int par_index(const dg_op_def *op) {
    for (int i = 0; i < dg_cuda_table_par_n; i++)
        if (dg_cuda_table_par[i].op == op) return i;
    return -1;
}

/* Outputs the device must give bitwise: copies, integers, sums in the
 * CPU's order, one division. */
static int exact_op(const dg_op_def *op) {
    static const dg_op_def *const ops[] = {
        &dg_op_vocab_embedding, &dg_op_vocab_embedding_bwd, &dg_op_slice_dim, &dg_op_unslice_dim,
        &dg_op_concat_dim, &dg_op_moe_ep_sort_chunks, &dg_op_moe_ep_count_sum, &dg_op_moe_ep_transpose,
        &dg_op_moe_ep_split_rows[2], &dg_op_moe_ep_split_rows[3], &dg_op_moe_ep_split_rows[4],
        &dg_op_moe_ep_concat_rows, &dg_op_moe_ep_local_indices, &dg_op_moe_tp_mask_indices,
        &dg_op_moe_tp_mask_rows, &dg_op_cp_ring_attn_out, &dg_op_cp_positions, &dg_op_pos_embed_pos,
        &dg_op_pos_embed_pos_grad, &dg_op_cp_div, &dg_op_cp_relabel, &dg_op_cp_seq_permute,
    };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (ops[i] == op) return 1;
    return 0;
}

/* 0 when got matches want (see the top), else prints the mismatch, 1. */
static int compare(const dg_graph *g, const dg_node *n, int t, const void *got, const void *want) {
    const dg_tensor *x = &g->tensors[t];
    int64_t cnt = dg_tensor_numel(x);
    if (x->dtype != DG_F32) {
        size_t es = dg_dtype_size(x->dtype);
        for (int64_t i = 0; i < cnt; i++)
            if (memcmp((const char *)got + i * es, (const char *)want + i * es, es)) {
                print_error("node %d (%s) output '%s' [%lld]: integers differ\n", n->id, n->op->name, x->name,
                            (long long)i);
                return 1;
            }
        return 0;
    }
    /* infinities (the lse of a row that sees no key) must sit at the same
     * places; the rest is compared as dg_close_f32 says */
    const float *gf = got, *wf = want;
    float *g2 = dg_aligned_alloc(sizeof(float) * (size_t)cnt + 1), *w2 = dg_aligned_alloc(sizeof(float) * (size_t)cnt + 1);
    int64_t inf_at = -1;
    for (int64_t i = 0; i < cnt; i++) {
        int wi = isinf(wf[i]) != 0, gi = isinf(gf[i]) != 0;
        if ((wi || gi) && !(gf[i] == wf[i]) && inf_at < 0) inf_at = i;
        g2[i] = wi || gi ? 0.0f : gf[i];
        w2[i] = wi || gi ? 0.0f : wf[i];
    }
    int exact = exact_op(n->op);
    char why[256];
    if (inf_at >= 0)
        snprintf(why, sizeof why, "[%lld]: got %.9g, want %.9g", (long long)inf_at, gf[inf_at], wf[inf_at]);
    int ok = inf_at < 0 && dg_close_f32(g2, w2, cnt, exact ? 0.0 : 1e-5, exact ? 0.0 : 1e-3, why, sizeof why);
    dg_free(g2);
    dg_free(w2);
    if (ok) return 0;
    print_error("node %d (%s) output '%s' (cuda against cpu%s) %s\n", n->id, n->op->name, x->name,
                exact ? ", bitwise" : "", why);
    return 1;
}

/* Run g on the CPU, then each node whose op has a CUDA kernel on the
 * device on the same inputs; compare. Returns the par-table nodes checked. */
static int check_graph(dg_graph *g, const leaves *L, uint64_t seed) {
    dg_err err = {{0}};
    dg_buffers b;
    dg_buffers_alloc(g, &b);
    fill(g, &b, L, seed);
    int st = dg_run_serial(g, NULL, &b, NULL, &err);
    if (st != DG_OK) print_error("cpu run of %s: %s\n", g->name, err.msg);
    assert_int_equal(st, DG_OK);
    int checked = 0, bad = 0;
    for (int k = 0; k < g->n_nodes; k++) {
        const dg_node *n = &g->nodes[k];
        if (!dg_cuda_kernel_for(n->op)) continue;
        void *in[DG_MAX_INPUTS], *out[DG_MAX_OUTPUTS];
        for (int i = 0; i < n->n_in; i++) in[i] = b.ptr[n->in[i]];
        for (int j = 0; j < n->n_out; j++) out[j] = dg_aligned_alloc(dg_tensor_bytes(&g->tensors[n->out[j]]) + 1);
        st = dg_cuda_run_node(ctx, g, n, in, out, 1, &err);
        if (st != DG_OK) print_error("node %d (%s): %s\n", n->id, n->op->name, err.msg);
        bad += st != DG_OK;
        for (int j = 0; j < n->n_out && st == DG_OK; j++) bad += compare(g, n, n->out[j], out[j], b.ptr[n->out[j]]);
        for (int j = 0; j < n->n_out; j++) dg_free(out[j]);
        int p = par_index(n->op);
        if (p >= 0 && p < 256) {
            covered[p]++;
            checked++;
        }
    }
    dg_buffers_free(&b);
    assert_int_equal(bad, 0);
    return checked;
}

static void differentiate(dg_graph *g, int loss) {
    dg_err err = {{0}};
    int st = loss < 0 ? DG_EINPUT : dg_autodiff(g, loss, dg_ops_autodiff(), NULL, &err);
    if (st != DG_OK) print_error("%s: %s %s\n", g->name, g->err.msg, err.msg);
    assert_int_equal(st, DG_OK);
}

static int rank_input(dg_graph *g, leaves *L, const char *name, int r) {
    int t = dg_input_new(g, name, DG_I32, 1, DG_SHAPE(1));
    add_i32(L, t, 0, 1, (int32_t[]){r});
    return t;
}

/* sum(x * R) for a fresh input R shaped like x */
static int dot_r(dg_graph *g, int x) {
    const dg_tensor *t = &g->tensors[x];
    return dg_sum(g, dg_mul(g, x, dg_input_new(g, "R", DG_F32, t->ndim, t->shape)));
}

/* ---- vocab-parallel embedding and cross entropy (TP = 2 in one graph) ------------------------ */

enum { VN = 40, VV = 64, VH = 48, TP = 2, VL = VV / TP };

/* pad: targets -100 on the rows whose mask is 0 (never read), every loss
 * node masked; else valid targets everywhere and rank 1's nodes unmasked. */
static void vocab_case(int pad, uint64_t seed) {
    dg_graph *g = dg_graph_new("cuda_vocab");
    leaves L = {.mask = -1, .targets = -1};
    int tokens = dg_input_new(g, "tokens", DG_I32, 1, DG_SHAPE(VN));
    int targets = dg_input_new(g, "targets", DG_I32, 1, DG_SHAPE(VN));
    int mask = dg_input_new(g, "mask", DG_F32, 1, DG_SHAPE(VN));
    add_i32(&L, tokens, VV, 4, (int32_t[]){0, VL - 1, VL, VV - 1}); /* both sides of the slice boundary */
    add_i32(&L, targets, VV, 4, (int32_t[]){VL - 1, VL, 0, VV - 1});
    L.mask = mask;
    L.targets = pad ? targets : -1;
    int rank[TP], table[TP], x = -1;
    dg_attrs av = dg_attrs_zero();
    av.i[0] = VV;
    for (int r = 0; r < TP; r++) {
        char name[16];
        snprintf(name, sizeof name, "tp_rank%d", r);
        rank[r] = rank_input(g, &L, name, r);
        snprintf(name, sizeof name, "table%d", r);
        table[r] = dg_param_new(g, name, 2, DG_SHAPE(VL, VH));
        int e = dg_add1(g, &dg_op_vocab_embedding, &av, (int[]){table[r], tokens, rank[r]}, 3, NULL);
        x = x < 0 ? e : dg_add(g, x, e); /* the tp all-reduce */
    }
    int logits[TP], stats[TP];
    for (int r = 0; r < TP; r++) {
        logits[r] = dg_matmul(g, x, table[r], 0, 1); /* the tied LM head's slice [N, VL] */
        stats[r] = dg_add1(g, &dg_op_vocab_xent_stats, NULL, (int[]){logits[r], targets, rank[r]}, 3, NULL);
    }
    int all = dg_concat_dim(g, stats, TP, 0), st[2] = {-1, -1}; /* the all-gather */
    dg_graph_add(g, &dg_op_vocab_xent_combine, NULL, (int[]){all, targets}, 2, st, NULL);
    int loss = -1;
    for (int r = 0; r < TP; r++) {
        int in[6] = {logits[r], targets, rank[r], st[0], st[1], mask};
        int l = dg_add1(g, &dg_op_vocab_xent, &av, in, pad || r == 0 ? 6 : 5, NULL);
        int ls[2] = {-1, -1};
        dg_graph_add(g, &dg_op_cp_vocab_xent_sum, &av, in, pad || r == 1 ? 6 : 5, ls, NULL);
        l = dg_add(g, l, dg_scale(g, dg_add(g, ls[0], ls[1]), 1e-2));
        loss = loss < 0 ? l : dg_add(g, loss, l);
    }
    /* TP-overlap chunks: a slice and its unslice on the hidden dim */
    int s = dg_slice_dim(g, x, 1, 1, 3), u = dg_unslice_dim(g, s, 1, 2, 3);
    loss = dg_add(g, loss, dg_add(g, dot_r(g, s), dot_r(g, u)));
    differentiate(g, loss);
    assert_true(check_graph(g, &L, seed) >= 12);
    dg_graph_free(g);
}

static void test_vocab_ops(void **state) {
    (void)state;
    vocab_case(1, 11);
    vocab_case(0, 12);
}

/* ---- EP row movers and expert-TP masks -------------------------------------------------------- */

enum { EP = 2, EG = 3, EROWS = 24, EH = 20, ET = 10, EK = 2 };

static void test_ep_ops(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("cuda_ep");
    leaves L = {.mask = -1, .targets = -1};
    int x = dg_param_new(g, "x", 2, DG_SHAPE(EROWS, EH));
    int counts = dg_input_new(g, "counts", DG_I32, 1, DG_SHAPE(EP * EG));
    add_i32(&L, counts, 0, EP * EG, (int32_t[]){3, 0, 5, 4, 2, 6}); /* 20 of 24 rows, chunk (0, 1) empty */
    int sorted = dg_moe_ep_sort_chunks(g, x, counts, EP, 0);
    int back = dg_moe_ep_sort_chunks(g, sorted, counts, EP, 1);
    int loss = dg_add(g, dot_r(g, sorted), dot_r(g, back));
    /* i32 rows, the counts a device op's output (2 x 1 chunks, 5 of 6 rows) */
    int ci = dg_input_new(g, "rows_i", DG_I32, 2, DG_SHAPE(6, 2));
    add_i32(&L, ci, 9, 0, NULL);
    int c2 = dg_input_new(g, "counts2", DG_I32, 1, DG_SHAPE(2));
    add_i32(&L, c2, 0, 2, (int32_t[]){2, 3});
    dg_moe_ep_sort_chunks(g, ci, dg_moe_ep_count_sum(g, c2, 1, 1), 2, 1);
    dg_moe_ep_count_sum(g, counts, EP, 0);
    dg_moe_ep_count_sum(g, counts, EP, 1);
    dg_moe_ep_transpose(g, counts, EP, EG / 3);
    dg_moe_ep_transpose(g, dg_input_new(g, "xf", DG_F32, 1, DG_SHAPE(2 * 3 * 5)), 2, 3); /* f32, blocks of 5 */
    for (int C = 2; C <= 4; C++) {
        int parts[4];
        assert_int_equal(dg_moe_ep_split_rows(g, x, C, parts), DG_OK);
        int y = dg_moe_ep_concat_rows(g, parts, C);
        loss = dg_add(g, loss, dg_add(g, dot_r(g, parts[C - 1]), dot_r(g, y)));
    }
    int idx = dg_input_new(g, "indices", DG_I32, 2, DG_SHAPE(ET, EK));
    add_i32(&L, idx, EP * EG, 0, NULL);
    dg_moe_ep_local_indices(g, idx, rank_input(g, &L, "ep_rank", 1), EG, EP);
    int tpr = rank_input(g, &L, "tp_rank", 1);
    dg_moe_tp_mask_indices(g, idx, tpr, 3); /* rows [3, 6) of 10 */
    int y = dg_param_new(g, "y", 2, DG_SHAPE(ET, EH));
    loss = dg_add(g, loss, dot_r(g, dg_moe_tp_mask_rows(g, y, tpr, 3)));
    differentiate(g, loss);
    assert_true(check_graph(g, &L, 12) >= 15);
    dg_graph_free(g);
}

/* ---- ring attention (cp ranks in one graph, as tests/cp/test_cp_ring.c) ---------------------------- */

typedef struct ring_case {
    int cp;
    int64_t B, c, Hq, Hkv, D;
    double drop; /* attention dropout (the rank input then {cp_rank, attention key}) */
} ring_case;

enum { RING_SITE = 9 };

static int add_block(dg_graph *g, const ring_case *c, int q, int k, int v, int rank, int step, int *lse) {
    dg_attrs a = dg_attrs_zero();
    a.i[0] = c->cp;
    a.i[1] = step;
    a.i[3] = c->drop > 0 ? RING_SITE : 0;
    a.f[0] = 1.0 / sqrt((double)c->D);
    a.f[1] = c->drop;
    int outs[2] = {-1, -1};
    int o = dg_graph_add(g, &dg_op_cp_attn_block, &a, (int[]){q, k, v, rank}, 4, outs, NULL);
    *lse = outs[1];
    return o;
}

static void ring_case_run(const ring_case *c, uint64_t seed) {
    enum { MAXCP = 4 };
    int64_t Lq = 2 * c->c;
    dg_graph *g = dg_graph_new("cuda_ring");
    leaves L = {.mask = -1, .targets = -1};
    int q[MAXCP], k[MAXCP], v[MAXCP], rank[MAXCP], loss = -1;
    for (int r = 0; r < c->cp; r++) {
        char n[32];
        snprintf(n, sizeof n, "q%d", r);
        q[r] = dg_param_new(g, n, 4, DG_SHAPE(c->B, Lq, c->Hq, c->D));
        snprintf(n, sizeof n, "k%d", r);
        k[r] = dg_param_new(g, n, 4, DG_SHAPE(c->B, Lq, c->Hkv, c->D));
        snprintf(n, sizeof n, "v%d", r);
        v[r] = dg_param_new(g, n, 4, DG_SHAPE(c->B, Lq, c->Hkv, c->D));
        snprintf(n, sizeof n, "cp_rank%d", r);
        if (c->drop > 0) { /* {cp rank, seed, iteration, first sample, training, first head} */
            rank[r] = dg_input_new(g, n, DG_I32, 1, DG_SHAPE(6));
            add_i32(&L, rank[r], 0, 6, (int32_t[]){r, 1234, 7, 3, 1, 2});
        } else {
            rank[r] = rank_input(g, &L, n, r);
        }
    }
    for (int r = 0; r < c->cp; r++) {
        int l = -1, o = add_block(g, c, q[r], k[r], v[r], rank[r], 0, &l);
        for (int s = 1; s < c->cp; s++) {
            int j = (r - s + c->cp) % c->cp, ls = -1;
            int os = add_block(g, c, q[r], k[j], v[j], rank[r], s, &ls);
            int outs[2] = {-1, -1};
            dg_graph_add(g, &dg_op_lse_merge, NULL, (int[]){o, l, os, ls}, 4, outs, NULL);
            o = outs[0];
            l = outs[1];
        }
        int t = dg_add(g, dot_r(g, o), dot_r(g, l));
        loss = loss < 0 ? t : dg_add(g, loss, t);
        /* the ring's output node (forward only: its adjoint sends and receives) */
        dg_attrs a = dg_attrs_zero();
        a.i[0] = c->cp;
        a.i[2] = c->drop > 0 ? RING_SITE : 0;
        a.f[0] = 1.0 / sqrt((double)c->D);
        a.f[1] = c->drop;
        int oo[2];
        dg_graph_add(g, &dg_op_cp_ring_attn_out, &a, (int[]){o, l, q[r], k[r], v[r], rank[r]}, 6, oo, NULL);
        /* a block's backward without dlse, from the final (o, lse), each step */
        for (int s = 0; s < c->cp; s++) {
            int j = (r - s + c->cp) % c->cp, o3[3];
            dg_attrs b = a;
            b.i[1] = s;
            b.i[2] = 0; /* the block's attrs: window 0, then the site */
            b.i[3] = a.i[2];
            int R = dg_input_new(g, "dO", DG_F32, 4, DG_SHAPE(c->B, Lq, c->Hq, c->D));
            dg_graph_add(g, &dg_op_cp_attn_block_bwd, &b, (int[]){q[r], k[j], v[j], rank[r], o, R, l}, 7, o3, NULL);
        }
    }
    differentiate(g, loss);
    assert_true(check_graph(g, &L, seed) >= 6 * c->cp);
    dg_graph_free(g);
}

static void test_ring_ops(void **state) {
    (void)state;
    const ring_case cases[] = {
        {2, 2, 40, 4, 2, 16, 0}, /* 80 local tokens: two query tiles, the second partial; GQA */
        {3, 1, 20, 2, 1, 96, 0}, /* lower and upper on one rank; the <= 128 head-dim kernels */
        {2, 2, 40, 4, 2, 16, 0.2}, /* attention dropout at the chunks' global places */
    };
    ring_case_run(&cases[0], 21);
    ring_case_run(&cases[1], 22);
    ring_case_run(&cases[2], 23);
}

/* ---- CP positions, losses, relabelling, Ulysses' permutation ----------------------------------- */

enum { CB = 2, CS = 12, CNH = 2, CD = 8, CHID = 16, CV = 20, CCP = 3 };

static void test_cp_ops(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("cuda_cp");
    leaves L = {.mask = -1, .targets = -1};
    int rank = rank_input(g, &L, "cp_rank", 2);
    dg_attrs ap = dg_attrs_zero();
    ap.i[0] = CCP;
    ap.i[1] = CS;
    ap.i[2] = 1; /* offset */
    int pos = dg_add1(g, &dg_op_cp_positions, &ap, &rank, 1, NULL);
    int x = dg_param_new(g, "x", 4, DG_SHAPE(CB, CS, CNH, CD));
    dg_attrs ar = dg_attrs_zero();
    ar.i[2] = CD / 2; /* half the head rotates */
    ar.f[0] = 10000.0;
    int xr = dg_add1(g, &dg_op_rope_pos, &ar, (int[]){x, pos}, 2, NULL);
    /* YaRN on interleaved pairs (MLA's rope under CP): rope's attrs f[1..4], i[3], i[4] */
    ar.f[1] = 40.0;
    ar.f[2] = 32.0;
    ar.f[3] = 1.0;
    ar.f[4] = dg_rope_yarn_mscale(40.0, 1.0, 0.5);
    ar.i[3] = 64;
    ar.i[4] = 1;
    xr = dg_add(g, xr, dg_add1(g, &dg_op_rope_pos, &ar, (int[]){x, pos}, 2, NULL));
    int loss = dot_r(g, xr);
    int h = dg_param_new(g, "h", 3, DG_SHAPE(CB, CS, CHID));
    int tab = dg_param_new(g, "pos_table", 2, DG_SHAPE(CS * CCP + 1, CHID));
    int hp = dg_add1(g, &dg_op_pos_embed_pos, NULL, (int[]){h, tab, pos}, 3, NULL);
    /* repeated positions: the gradient's rows sum several tokens, in order */
    int pdup = dg_input_new(g, "pos_dup", DG_I32, 1, DG_SHAPE(CS));
    add_i32(&L, pdup, 0, CS, (int32_t[]){4, 0, 4, 7, 7, 7, 1, 0, 9, 4, 2, 2});
    dg_attrs ag = dg_attrs_zero();
    ag.i[0] = 10;
    dg_add1(g, &dg_op_pos_embed_pos_grad, &ag, (int[]){h, pdup}, 2, NULL);
    /* the loss as a sum and a count, with and without a mask */
    int logits = dg_matmul(g, dg_reshape(g, hp, 2, DG_SHAPE(CB * CS, CHID)), dg_param_new(g, "w", 2, DG_SHAPE(CV, CHID)),
                           0, 1);
    int targets = dg_input_new(g, "targets", DG_I32, 1, DG_SHAPE(CB * CS));
    int mask = dg_input_new(g, "mask", DG_F32, 1, DG_SHAPE(CB * CS));
    add_i32(&L, targets, CV, 0, NULL);
    L.mask = mask; /* valid targets on every row: one cp_xent_sum is unmasked */
    for (int m = 0; m < 2; m++) {
        int xs[3] = {-1, -1, -1};
        dg_graph_add(g, &dg_op_cp_xent_sum, NULL, (int[]){logits, targets, mask}, m ? 3 : 2, xs, NULL);
        loss = dg_add(g, loss, dg_add1(g, &dg_op_cp_div, NULL, (int[]){xs[0], xs[2]}, 2, NULL));
    }
    /* relabelling both ways and as a summand, f32 and i32 */
    int flat = dg_reshape(g, h, 2, DG_SHAPE(CB * CS, CHID));
    int data = dg_cp_relabel(g, flat, DG_CP_TOKENS_TO_DATA);
    loss = dg_add(g, loss, dot_r(g, dg_cp_relabel(g, data, DG_CP_DATA_TO_TOKENS)));
    loss = dg_add(g, loss, dg_cp_relabel(g, dg_sum(g, hp), DG_CP_SUMMAND));
    dg_cp_relabel(g, targets, DG_CP_SUMMAND);
    /* Ulysses' chunk order along the sequence (dim 1) and lse's (dim 2) */
    dg_attrs aq = dg_attrs_zero();
    aq.i[0] = CCP;
    aq.i[2] = 1;
    int perm = dg_add1(g, &dg_op_cp_seq_permute, &aq, &x, 1, NULL);
    loss = dg_add(g, loss, dot_r(g, perm));
    aq.i[1] = 1;
    aq.i[2] = 2;
    int l3 = dg_param_new(g, "l3", 3, DG_SHAPE(CB, CNH, CS));
    loss = dg_add(g, loss, dot_r(g, dg_add1(g, &dg_op_cp_seq_permute, &aq, &l3, 1, NULL)));
    differentiate(g, loss);
    assert_true(check_graph(g, &L, 31) >= 12);
    dg_graph_free(g);
}

/* ---- bad input found on the device ---------------------------------------------------------- */

/* Run node (the last of op in g) on the device with input `which` of the CPU
 * run replaced by `val` at element 0: DG_EINPUT naming the op. */
static void expect_flagged(dg_graph *g, const leaves *L, const dg_op_def *op, int which, int32_t val) {
    dg_err err = {{0}};
    dg_buffers b;
    dg_buffers_alloc(g, &b);
    fill(g, &b, L, 5);
    assert_int_equal(dg_run_serial(g, NULL, &b, NULL, &err), DG_OK);
    const dg_node *n = NULL;
    for (int k = 0; k < g->n_nodes; k++)
        if (g->nodes[k].op == op) n = &g->nodes[k];
    assert_non_null(n);
    void *in[DG_MAX_INPUTS], *out[DG_MAX_OUTPUTS];
    for (int i = 0; i < n->n_in; i++) in[i] = b.ptr[n->in[i]];
    dg_buf_i32(&b, n->in[which])[0] = val;
    for (int j = 0; j < n->n_out; j++) out[j] = dg_aligned_alloc(dg_tensor_bytes(&g->tensors[n->out[j]]) + 1);
    int st = dg_cuda_run_node(ctx, g, n, in, out, 1, &err);
    for (int j = 0; j < n->n_out; j++) dg_free(out[j]);
    dg_buffers_free(&b);
    if (st != DG_EINPUT) print_error("%s: status %d (%s), expected DG_EINPUT\n", op->name, st, err.msg);
    assert_int_equal(st, DG_EINPUT);
    assert_non_null(strstr(err.msg, op->name));
}

static void test_bad_input_flagged(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("cuda_par_bad");
    leaves L = {.mask = -1, .targets = -1};
    int tokens = dg_input_new(g, "tokens", DG_I32, 1, DG_SHAPE(8));
    add_i32(&L, tokens, 16, 0, NULL);
    int r = rank_input(g, &L, "tp_rank", 1);
    dg_attrs av = dg_attrs_zero();
    av.i[0] = 16;
    dg_add1(g, &dg_op_vocab_embedding, &av, (int[]){dg_param_new(g, "table", 2, DG_SHAPE(8, 4)), tokens, r}, 3, NULL);
    int counts = dg_input_new(g, "counts", DG_I32, 1, DG_SHAPE(4));
    add_i32(&L, counts, 0, 4, (int32_t[]){1, 2, 0, 3});
    dg_moe_ep_sort_chunks(g, dg_param_new(g, "x", 2, DG_SHAPE(8, 4)), counts, 2, 0);
    int cr = rank_input(g, &L, "cp_rank", 0);
    dg_attrs ab = dg_attrs_zero();
    ab.i[0] = 2;
    ab.i[1] = 1;
    ab.f[0] = 0.5;
    int qkv = dg_param_new(g, "qkv", 4, DG_SHAPE(1, 4, 1, 4)), outs[2];
    dg_graph_add(g, &dg_op_cp_attn_block, &ab, (int[]){qkv, qkv, qkv, cr}, 4, outs, NULL);
    assert_int_equal(g->status, DG_OK);
    expect_flagged(g, &L, &dg_op_vocab_embedding, 1, 16);   /* a token past the vocabulary */
    expect_flagged(g, &L, &dg_op_moe_ep_sort_chunks, 1, 9); /* counts past the 8 rows */
    expect_flagged(g, &L, &dg_op_cp_attn_block, 3, 2);      /* cp rank 2 of a ring of 2 */
    dg_graph_free(g);
}

/* Runs last: every entry of the par table met a node above. */
static void test_every_par_kernel_checked(void **state) {
    (void)state;
    assert_true(dg_cuda_table_par_n <= 256);
    int missing = 0;
    for (int i = 0; i < dg_cuda_table_par_n; i++)
        if (!covered[i]) {
            print_error("CUDA kernel of op '%s' (par table entry %d) was not checked by any case\n",
                        dg_cuda_table_par[i].op->name, i);
            missing++;
        }
    assert_int_equal(missing, 0);
}

static int setup(void **state) {
    (void)state;
    dg_err err = {{0}};
    if (dg_cuda_ctx_new(0, &ctx, &err) != DG_OK) {
        fprintf(stderr, "test_cuda_ops_par: %s\n", err.msg);
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
        cmocka_unit_test(test_vocab_ops),        cmocka_unit_test(test_ep_ops),
        cmocka_unit_test(test_ring_ops),         cmocka_unit_test(test_cp_ops),
        cmocka_unit_test(test_bad_input_flagged), cmocka_unit_test(test_every_par_kernel_checked),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
