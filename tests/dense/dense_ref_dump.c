/* dense_ref_dump.c — runs the dense ops on seeded inputs and writes inputs,
 * outputs and gradients for ref_dense_ops.py, which recomputes them with
 * PyTorch (the `reference` test ref_dense_ops).
 *
 * One graph holds every op on its own inputs:
 *   loss = xent(logits, targets, mask)
 *        + sum_k sum(op_k(...) * r_k)      k over rmsnorm, layernorm, rope,
 *                                          swiglu, gelu_tanh, embedding
 * and autodiff gives every parameter's gradient. Then three AdamW steps
 * run on one parameter with seeded gradients.
 *
 * Usage: dense_ref_dump OUT.bin
 * Format, repeated to the end of the file, little-endian:
 *   char name[32] | int32 dtype (0 f32, 1 i32) | int32 ndim | int64 shape[4] | data
 */
#include <stdio.h>
#include <string.h>

#include "dg_autodiff.h"
#include "dg_exec_serial.h"
#include "dg_gradcheck.h"
#include "dg_ops.h"

static void put(FILE *f, const char *name, int dtype, int ndim, const int64_t *shape,
                const void *data) {
    char nm[32] = {0};
    snprintf(nm, sizeof nm, "%s", name);
    int32_t hdr[2] = {dtype, ndim};
    int64_t sh[4] = {0};
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        sh[i] = shape[i];
        n *= shape[i];
    }
    fwrite(nm, 1, sizeof nm, f);
    fwrite(hdr, sizeof hdr, 1, f);
    fwrite(sh, sizeof sh, 1, f);
    fwrite(data, 4, (size_t)n, f);
}

static void put_tensor(FILE *f, const dg_graph *g, const dg_buffers *b, int t, const char *name) {
    const dg_tensor *x = &g->tensors[t];
    put(f, name, x->dtype == DG_I32, x->ndim, x->shape, b->ptr[t]);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUT.bin\n", argv[0]);
        return 2;
    }
    enum { B = 2, S = 5, H = 16, NH = 2, HD = 8, F = 12, V = 29 };
    dg_graph *g = dg_graph_new("dense_ref");
    int x = dg_param_new(g, "x", 3, DG_SHAPE(B, S, H));
    int rms_w = dg_param_new(g, "rms_w", 1, DG_SHAPE(H));
    int ln_w = dg_param_new(g, "ln_w", 1, DG_SHAPE(H));
    int ln_b = dg_param_new(g, "ln_b", 1, DG_SHAPE(H));
    int q = dg_param_new(g, "q", 4, DG_SHAPE(B, S, NH, HD));
    int fc1 = dg_param_new(g, "fc1_out", 3, DG_SHAPE(B, S, 2 * F));
    int table = dg_param_new(g, "table", 2, DG_SHAPE(V, H));
    int logits = dg_param_new(g, "logits", 3, DG_SHAPE(B, S, V));
    int tokens = dg_input_new(g, "tokens", DG_I32, 2, DG_SHAPE(B, S));
    int targets = dg_input_new(g, "targets", DG_I32, 2, DG_SHAPE(B, S));
    int mask = dg_input_new(g, "loss_mask", DG_F32, 2, DG_SHAPE(B, S));

    int outs[6] = {
        dg_rmsnorm(g, x, rms_w, 1e-5),
        dg_layernorm(g, x, ln_w, ln_b, 1e-5),
        dg_rope(g, q, 10000.0, 3),
        dg_swiglu(g, fc1),
        dg_gelu_tanh(g, fc1),
        dg_embedding(g, table, tokens),
    };
    static const char *const out_names[6] = {"rmsnorm", "layernorm", "rope", "swiglu", "gelu", "embedding"};
    int rs[6];
    int xl = dg_softmax_xent(g, logits, targets, mask, NULL);
    int loss = xl;
    for (int k = 0; k < 6; k++) {
        const dg_tensor *o = &g->tensors[outs[k]];
        char nm[32];
        snprintf(nm, sizeof nm, "r_%s", out_names[k]);
        rs[k] = dg_input_new(g, nm, DG_F32, o->ndim, o->shape);
        loss = dg_add(g, loss, dg_sum(g, dg_mul(g, outs[k], rs[k])));
    }
    dg_err err = {{0}};
    if (loss < 0 || dg_autodiff(g, loss, dg_ops_autodiff(), NULL, &err) != DG_OK) {
        fprintf(stderr, "dense_ref_dump: %s%s\n", g->err.msg, err.msg);
        return 1;
    }
    dg_buffers b;
    dg_buffers_alloc(g, &b);
    dg_test_rng rng = {2024};
    for (int t = 0; t < g->n_tensors; t++) {
        const dg_tensor *tt = &g->tensors[t];
        if (tt->producer < 0 && tt->dtype == DG_F32)
            dg_test_fill_normal(&rng, b.ptr[t], dg_tensor_numel(tt), t == logits ? 3.0 : 1.0);
    }
    for (int i = 0; i < B * S; i++) {
        dg_buf_i32(&b, tokens)[i] = (int32_t)((i * 11 + 4) % V);
        dg_buf_i32(&b, targets)[i] = (int32_t)((i * 7 + 1) % V);
        dg_buf_f32(&b, mask)[i] = i % 4 == 3 ? 0.0f : 1.0f;
    }
    dg_test_team *team = dg_test_team_new(2);
    if (dg_run_serial(g, NULL, &b, dg_test_team_get(team), &err) != DG_OK) {
        fprintf(stderr, "dense_ref_dump: %s\n", err.msg);
        return 1;
    }
    FILE *f = fopen(argv[1], "wb");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    for (int t = 0; t < g->n_tensors; t++)
        if (g->tensors[t].producer < 0 && g->tensors[t].role != DG_ROLE_ACTIVATION)
            put_tensor(f, g, &b, t, g->tensors[t].name);
    for (int k = 0; k < 6; k++) put_tensor(f, g, &b, outs[k], out_names[k]);
    put_tensor(f, g, &b, xl, "xent_loss");
    for (int t = 0; t < g->n_tensors; t++) {
        const dg_tensor *p = &g->tensors[t];
        if (p->role == DG_ROLE_PARAMETER && p->grad >= 0) put_tensor(f, g, &b, p->grad, g->tensors[p->grad].name);
    }

    /* AdamW: three steps on `x` with seeded gradients; dump the final state. */
    const int64_t n = B * S * H;
    float *p = dg_malloc(sizeof(float) * n), *m = dg_calloc(n, sizeof(float));
    float *v = dg_calloc(n, sizeof(float)), *gr = dg_malloc(sizeof(float) * n);
    memcpy(p, b.ptr[x], sizeof(float) * n);
    put(f, "adamw_p0", 0, 1, &n, p);
    for (int t = 1; t <= 3; t++) {
        dg_test_fill_normal(&rng, gr, n, 1.0);
        char nm[32];
        snprintf(nm, sizeof nm, "adamw_g%d", t);
        put(f, nm, 0, 1, &n, gr);
        dg_adamw_hparams h = {.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8,
                              .weight_decay = 0.1, .step = t};
        dg_cpu_adamw(dg_test_team_get(team), &h, p, gr, m, v, p, m, v, n);
    }
    put(f, "adamw_p3", 0, 1, &n, p);
    put(f, "adamw_m3", 0, 1, &n, m);
    put(f, "adamw_v3", 0, 1, &n, v);
    fclose(f);
    dg_free(p);
    dg_free(m);
    dg_free(v);
    dg_free(gr);
    dg_test_team_free(team);
    dg_buffers_free(&b);
    dg_graph_free(g);
    return 0;
}
