/* moe_ref_dump.c — runs one MoE block (router linear, router, aux loss,
 * z-loss, permute, grouped fc1, square, grouped fc2, unpermute) forward and
 * backward for several router settings and dumps inputs, outputs and
 * gradients for ref_moe_ops.py, which recomputes them with PyTorch from
 * Megatron-Core's formulas.
 *
 * Usage: moe_ref_dump <dir>   writes <dir>/case<i>.txt (one line per tensor:
 * "name dtype ndim dims...", in file order) and <dir>/case<i>.bin, plus
 * <dir>/cases.txt with one line per case: "topk score pre_softmax
 * capacity_factor drop_policy scaling aux_coeff z_coeff num_groups
 * group_topk has_bias num_seqs". Cases with groups or a bias feed the aux loss no
 * routing input (its own top-k, as Megatron); the others the router's
 * pre-drop counts, which are the same thing there. num_seqs > 1: the
 * sequence-level aux loss, tokens in [S, B] order. */
#include <stdio.h>
#include <string.h>

#include "dg_grouped_gemm.h"
#include "dg_moe_loss.h"
#include "dg_op_matmul.h"
#include "dg_permute.h"
#include "dg_router.h"
#include "moe_test_util.h"

enum { T = 24, H = 8, E = 6, F = 5 };

typedef struct dump_case {
    int topk, score, pre;
    double cap;
    int policy;
    double scaling, aux_coeff, z_coeff;
    int groups, group_topk, bias; /* bias: 1 = an expert bias input */
    int aux_self;                 /* 1: aux loss without routing input (Megatron's top-k) */
    int num_seqs;                 /* > 1: seq_aux_loss over that many sequences, [S, B] order */
} dump_case;

static const dump_case cases[] = {
    {2, DG_MOE_SCORE_SOFTMAX, 0, 0, 0, 0, 1e-2, 1e-3, 0, 0, 0, 0, 0},
    {2, DG_MOE_SCORE_SOFTMAX, 1, 0, 0, 0, 1e-2, 1e-3, 0, 0, 0, 0, 0},
    {2, DG_MOE_SCORE_SIGMOID, 0, 0, 0, 0, 1e-2, 1e-3, 0, 0, 0, 0, 0},
    {1, DG_MOE_SCORE_SIGMOID, 0, 0, 0, 0, 1e-2, 1e-3, 0, 0, 0, 0, 0},
    {3, DG_MOE_SCORE_SOFTMAX, 0, 0, 0, 2.5, 1e-1, 1e-2, 0, 0, 0, 0, 0},
    {2, DG_MOE_SCORE_SOFTMAX, 0, 1.0, DG_MOE_DROP_PROBS, 0, 1e-2, 1e-3, 0, 0, 0, 0, 0},
    {2, DG_MOE_SCORE_SIGMOID, 0, 0.75, DG_MOE_DROP_POSITION, 0, 1e-2, 1e-3, 0, 0, 0, 0, 0},
    {4, DG_MOE_SCORE_SOFTMAX, 1, 0, 0, 0, 1e-1, 1e-3, 3, 2, 0, 1, 0},
    {2, DG_MOE_SCORE_SOFTMAX, 0, 0, 0, 0, 1e-1, 1e-3, 3, 1, 0, 1, 0},
    {2, DG_MOE_SCORE_SIGMOID, 0, 0, 0, 0, 1e-1, 1e-3, 0, 0, 1, 1, 0},
    {3, DG_MOE_SCORE_SIGMOID, 0, 1.0, DG_MOE_DROP_PROBS, 0, 1e-1, 1e-3, 2, 1, 1, 1, 0},
    {2, DG_MOE_SCORE_SOFTMAX, 0, 0, 0, 0, 1e-1, 1e-3, 0, 0, 0, 1, 4},
    {2, DG_MOE_SCORE_SIGMOID, 0, 0, 0, 0, 1e-1, 1e-3, 0, 0, 0, 1, 3},
};

static void put(FILE *txt, FILE *bin, const dg_graph *g, const dg_buffers *b, const char *name,
                int t) {
    const dg_tensor *x = &g->tensors[t];
    fprintf(txt, "%s %s %d", name, dg_dtype_name(x->dtype), x->ndim);
    for (int i = 0; i < x->ndim; i++) fprintf(txt, " %lld", (long long)x->shape[i]);
    fprintf(txt, "\n");
    fwrite(b->ptr[t], 1, dg_tensor_bytes(x), bin);
}

static int run_case(const char *dir, int ci) {
    const dump_case *c = &cases[ci];
    dg_graph *g = dg_graph_new("moe_ref");
    int x = dg_param_new(g, "x", 2, DG_SHAPE(T, H));
    int wr = dg_param_new(g, "wr", 2, DG_SHAPE(E, H));
    int w1 = dg_param_new(g, "w1", 3, DG_SHAPE(E, F, H));
    int w2 = dg_param_new(g, "w2", 3, DG_SHAPE(E, H, F));
    int R = dg_input_new(g, "R", DG_F32, 2, DG_SHAPE(T, H));
    int bias = c->bias ? dg_input_new(g, "bias", DG_F32, 1, DG_SHAPE(E)) : -1;
    int logits = dg_linear(g, x, wr);
    dg_router_opts o = dg_router_opts_default(c->topk);
    o.score = (dg_moe_score_fn)c->score;
    o.pre_softmax = c->pre;
    o.capacity_factor = c->cap;
    o.drop_policy = (dg_moe_drop_policy)c->policy;
    o.scaling_factor = c->scaling;
    o.num_groups = c->groups;
    o.group_topk = c->group_topk;
    o.expert_bias = bias;
    dg_router_out r;
    dg_moe_router(g, logits, &o, &r);
    int aux = c->num_seqs > 1
                  ? dg_moe_seq_aux_loss(g, logits, -1, c->topk, o.score, c->aux_coeff, c->num_seqs, 1)
                  : dg_moe_aux_loss(g, logits, c->aux_self ? -1 : r.tokens_per_expert, c->topk,
                                    o.score, c->aux_coeff);
    int zl = dg_moe_z_loss(g, logits, c->z_coeff);
    dg_permute_out po;
    dg_moe_permute(g, x, r.indices, E, &po);
    int h = dg_grouped_linear(g, po.x_perm, po.tokens_per_expert, w1);
    h = dg_mul(g, h, h);
    int yp = dg_grouped_linear(g, h, po.tokens_per_expert, w2);
    int y = dg_moe_unpermute(g, yp, r.probs, po.row_map);
    int main_loss = dg_sum(g, dg_mul(g, y, R));
    int loss = dg_add(g, dg_add(g, main_loss, aux), zl);
    dg_err err = {{0}};
    if (loss < 0 || dg_autodiff(g, loss, dg_ops_autodiff(), NULL, &err) != DG_OK) {
        fprintf(stderr, "moe_ref_dump: build failed: %s %s\n", g->err.msg, err.msg);
        return 1;
    }
    dg_buffers b;
    dg_buffers_alloc(g, &b);
    moe_fill_leaves(g, &b, 1000 + (uint64_t)ci);
    if (dg_run_serial(g, NULL, &b, NULL, &err) != DG_OK) {
        fprintf(stderr, "moe_ref_dump: run failed: %s\n", err.msg);
        return 1;
    }
    char path[512];
    snprintf(path, sizeof path, "%s/case%d.txt", dir, ci);
    FILE *txt = fopen(path, "w");
    snprintf(path, sizeof path, "%s/case%d.bin", dir, ci);
    FILE *bin = fopen(path, "wb");
    if (!txt || !bin) {
        fprintf(stderr, "moe_ref_dump: cannot write %s\n", path);
        return 1;
    }
    put(txt, bin, g, &b, "x", x);
    put(txt, bin, g, &b, "wr", wr);
    put(txt, bin, g, &b, "w1", w1);
    put(txt, bin, g, &b, "w2", w2);
    put(txt, bin, g, &b, "R", R);
    if (bias >= 0) put(txt, bin, g, &b, "bias", bias);
    put(txt, bin, g, &b, "probs", r.probs);
    put(txt, bin, g, &b, "indices", r.indices);
    put(txt, bin, g, &b, "tokens_per_expert", po.tokens_per_expert);
    put(txt, bin, g, &b, "y", y);
    put(txt, bin, g, &b, "aux", aux);
    put(txt, bin, g, &b, "z", zl);
    put(txt, bin, g, &b, "loss", loss);
    put(txt, bin, g, &b, "grad_x", g->tensors[x].grad);
    put(txt, bin, g, &b, "grad_wr", g->tensors[wr].grad);
    put(txt, bin, g, &b, "grad_w1", g->tensors[w1].grad);
    put(txt, bin, g, &b, "grad_w2", g->tensors[w2].grad);
    fclose(txt);
    fclose(bin);
    dg_buffers_free(&b);
    dg_graph_free(g);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: moe_ref_dump <dir>\n");
        return 2;
    }
    char path[512];
    snprintf(path, sizeof path, "%s/cases.txt", argv[1]);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "moe_ref_dump: cannot write %s\n", path);
        return 1;
    }
    for (size_t i = 0; i < DG_ARRAY_LEN(cases); i++) {
        const dump_case *c = &cases[i];
        fprintf(f, "%d %d %d %.17g %d %.17g %.17g %.17g %d %d %d %d\n", c->topk, c->score, c->pre,
                c->cap, c->policy, c->scaling, c->aux_coeff, c->z_coeff, c->groups, c->group_topk,
                c->bias, c->num_seqs);
        if (run_case(argv[1], (int)i)) return 1;
    }
    fclose(f);
    return 0;
}
