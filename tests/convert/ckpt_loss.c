/* ckpt_loss.c — dagatron's loss on a fixed batch with a checkpoint's
 * parameters, for the Hugging Face reference (hf_reference.py).
 *
 * usage: ckpt_loss CKPT OUT.json
 * Builds the checkpoint's model (its config record; dropout off: the loss of
 * an evaluation), loads its parameters through dg_ckpt_load (any saved
 * layout; the expert biases too), runs the forward pass on a seeded batch of micro-batch-size x
 * seq-length tokens with some positions masked, and writes OUT.json:
 * {"tokens": [[...]], "targets": [[...]], "loss_mask": [[...]], "lm_loss": x}. */
#include <stdio.h>
#include <string.h>

#include "dg_checkpoint.h"
#include "dg_cpu_gemm.h"
#include "dg_ep_model.h"
#include "dg_exec_serial.h"
#include "dg_gradcheck.h"
#include "dg_model_record.h"

static void put_ids(FILE *f, const char *key, const void *v, int is_float, int64_t B, int64_t S) {
    fprintf(f, "\"%s\": [", key);
    for (int64_t b = 0; b < B; b++) {
        fprintf(f, "%s[", b ? ", " : "");
        for (int64_t s = 0; s < S; s++) {
            if (is_float) fprintf(f, "%s%g", s ? ", " : "", ((const float *)v)[b * S + s]);
            else fprintf(f, "%s%d", s ? ", " : "", ((const int32_t *)v)[b * S + s]);
        }
        fprintf(f, "]");
    }
    fprintf(f, "], ");
}

static int run(const char *ckpt, const char *out, dg_err *err) {
    dg_ckpt_manifest man;
    DG_TRY(dg_ckpt_read_manifest(ckpt, DG_CKPT_LATEST, &man, err));
    dg_model_config c;
    int st = dg_model_from_record(&man.meta.config, &c, man.path, err);
    dg_ckpt_manifest_free(&man);
    DG_TRY(st);
    c.hidden_dropout = 0;
    dg_graph *g = NULL;
    dg_model_io io;
    DG_TRY(dg_model_forward_local(&g, "loss", &c, NULL, &io, err));
    dg_buffers b;
    dg_buffers_alloc(g, &b);
    dg_ckpt_tensor *t = dg_calloc((size_t)g->n_tensors, sizeof *t);
    int n = 0;
    for (int i = 0; i < g->n_tensors && st == DG_OK; i++) {
        int bias = 0; /* the expert biases (an input the checkpoint holds) */
        for (int l = 0; l < dg_model_total_layers(&c) && l < (int)DG_ARRAY_LEN(io.expert_bias); l++) bias |= io.expert_bias[l] == i;
        if (g->tensors[i].role == DG_ROLE_PARAMETER || bias)
            st = dg_ckpt_tensor_from(&t[n++], "", &g->tensors[i], b.ptr[i], err);
    }
    dg_ckpt_expect same = dg_model_expect(&c);
    if (st == DG_OK) st = dg_ckpt_load(ckpt, DG_CKPT_LATEST, &same, NULL, t, n, err);
    const int64_t B = c.micro_batch_size, S = c.seq_length;
    int32_t *tok = b.ptr[io.tokens], *tgt = b.ptr[io.targets];
    float *mask = b.ptr[io.loss_mask];
    dg_test_rng rng = {20261124};
    for (int64_t i = 0; i < B * S; i++) {
        tok[i] = (int32_t)(dg_test_rng_next(&rng) % (uint64_t)c.vocab_size);
        tgt[i] = (int32_t)(dg_test_rng_next(&rng) % (uint64_t)c.vocab_size);
        mask[i] = (i % 5 == 2) ? 0.0f : 1.0f;
    }
    if (st == DG_OK) st = dg_run_serial(g, NULL, &b, NULL, err);
    FILE *f = st == DG_OK ? fopen(out, "w") : NULL;
    if (st == DG_OK && !f) st = dg_err_set(err, DG_EINPUT, "%s: cannot write", out);
    if (f) {
        fprintf(f, "{");
        put_ids(f, "tokens", tok, 0, B, S);
        put_ids(f, "targets", tgt, 0, B, S);
        put_ids(f, "loss_mask", mask, 1, B, S);
        fprintf(f, "\"lm_loss\": %.9g}\n", *(float *)b.ptr[io.lm_loss]);
        fclose(f);
        printf("ckpt_loss: lm loss %.9g\n", *(float *)b.ptr[io.lm_loss]);
    }
    dg_free(t);
    dg_buffers_free(&b);
    dg_graph_free(g);
    return st;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: ckpt_loss CKPT OUT.json\n");
        return 2;
    }
    dg_cpu_init();
    dg_err err = {{0}};
    int st = run(argv[1], argv[2], &err);
    if (st != DG_OK) dg_err_print(&err);
    return st;
}
