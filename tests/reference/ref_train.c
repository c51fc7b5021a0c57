/* ref_train.c — run `dagatron train`'s loop on a tiny MoE model and write
 * what the PyTorch oracle (ref_train.py) needs to replay it: the initial
 * weights, every micro-batch, and each iteration's losses, gradient norm and
 * learning rate.
 *
 * usage: ref_train PREFIX   -> PREFIX.json + PREFIX.bin */
#include <stdio.h>
#include <string.h>

#include "dg_trainer.h"
#include "../common/dg_test_arch.h"

typedef struct dump {
    FILE *bin, *json;
    long offset;
    int first;
} dump;

static void put(dump *d, const char *name, const char *dtype, int ndim, const int64_t *shape,
                const void *data, size_t bytes) {
    fwrite(data, 1, bytes, d->bin);
    fprintf(d->json, "%s\n  {\"name\": \"%s\", \"dtype\": \"%s\", \"offset\": %ld, \"shape\": [",
            d->first ? "" : ",", name, dtype, d->offset);
    for (int i = 0; i < ndim; i++) fprintf(d->json, "%s%lld", i ? ", " : "", (long long)shape[i]);
    fprintf(d->json, "]}");
    d->offset += (long)bytes;
    d->first = 0;
}

static void on_param(void *ctx, const dg_tensor *t, const float *v) {
    char name[128];
    snprintf(name, sizeof name, "param/%s", t->name);
    put(ctx, name, "f32", t->ndim, t->shape, v, dg_tensor_bytes(t));
}

static void on_batch(void *ctx, int it, int mb, const int32_t *tokens, int mbs, int S) {
    char name[64];
    snprintf(name, sizeof name, "batch/%d/%d", it, mb);
    put(ctx, name, "i32", 2, (int64_t[]){mbs, S + 1}, tokens, sizeof(int32_t) * (size_t)mbs * (S + 1));
}

static void on_iteration(void *ctx, int it, double lm, double aux, double z, double gnorm, double lr) {
    char name[64];
    snprintf(name, sizeof name, "iter/%d", it);
    double v[5] = {lm, aux, z, gnorm, lr};
    put(ctx, name, "f64", 1, (int64_t[]){5}, v, sizeof v);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: ref_train PREFIX\n");
        return 2;
    }
    dg_train_config c;
    dg_train_config_defaults(&c);
    char *flags[] = {"train", DG_TEST_MOE_ARCH_FLAGS, "--mock-data", "--vocab-size", "90", "--num-layers", "2",
                     "--hidden-size", "64", "--num-attention-heads", "4", "--group-query-attention",
                     "--num-query-groups", "2", "--seq-length", "32", "--num-experts", "4",
                     "--moe-router-topk", "2", "--moe-ffn-hidden-size", "96", "--micro-batch-size",
                     "2", "--global-batch-size", "4", "--lr", "3e-3", "--min-lr", "3e-4",
                     "--lr-warmup-iters", "3", "--lr-decay-style", "cosine", "--train-iters", "10",
                     "--clip-grad", "0.5", "--weight-decay", "0.1", "--init-method-std", "0.05",
                     "--untie-embeddings-and-output-weights", "--log-interval", "5", "--seed", "7",
                     "--compute-threads", "1"};
    dg_err err = {{0}};
    int n = (int)(sizeof flags / sizeof flags[0]);
    if (dg_train_config_parse(&c, n, flags, 1, &err) != DG_OK) {
        dg_err_print(&err);
        return 1;
    }
    dump d = {0};
    char path[4096];
    snprintf(path, sizeof path, "%s.bin", argv[1]);
    d.bin = fopen(path, "wb");
    snprintf(path, sizeof path, "%s.json", argv[1]);
    d.json = fopen(path, "w");
    if (!d.bin || !d.json) return 1;
    d.first = 1;
    fprintf(d.json, "{\"tensors\": [");
    dg_train_hooks hooks = {.ctx = &d, .on_param = on_param, .on_batch = on_batch, .on_iteration = on_iteration};
    dg_train_result res;
    int st = dg_train(&c, &hooks, &res, &err);
    const dg_model_config *m = &c.model;
    fprintf(d.json,
            "\n],\n\"config\": {\"num_layers\": %d, \"hidden_size\": %d, \"num_attention_heads\": %d, "
            "\"num_query_groups\": %d, \"num_experts\": %d, \"moe_router_topk\": %d, "
            "\"moe_aux_loss_coeff\": %.17g, \"moe_z_loss_coeff\": %.17g, \"rope_base\": %.17g, "
            "\"norm_epsilon\": %.17g, \"untie_embeddings\": %d, \"moe_layer_freq\": %d, "
            "\"score_function\": \"softmax\", \"pre_softmax\": 0},\n"
            "\"train\": {\"lr\": %.17g, \"min_lr\": %.17g, \"warmup\": %d, \"decay_iters\": %d, "
            "\"style\": \"%s\", \"weight_decay\": %.17g, \"beta1\": %.17g, \"beta2\": %.17g, "
            "\"eps\": %.17g, \"clip_grad\": %.17g, \"train_iters\": %d, \"num_microbatches\": %d}}\n",
            m->num_layers, m->hidden_size, m->num_attention_heads, m->num_query_groups,
            m->num_experts, m->moe_router_topk, m->moe_aux_loss_coeff, m->moe_z_loss_coeff,
            m->rope_base, m->norm_epsilon, m->untie_embeddings, m->moe_layer_freq, c.lr, c.min_lr,
            c.lr_warmup_iters, c.lr_decay_iters, c.lr_decay_style, c.weight_decay, c.adam_beta1,
            c.adam_beta2, c.adam_eps, c.clip_grad, c.train_iters, c.num_microbatches);
    fclose(d.bin);
    fclose(d.json);
    if (st != DG_OK) {
        dg_err_print(&err);
        return 1;
    }
    return 0;
}
