/* bench_train.c — training throughput of `dagatron train`'s loop.
 *
 * usage: bench_train [train flags...]   (defaults: the main job's MoE config on mock data)
 * Runs the loop and prints, over the iterations after the first (warm-up):
 * tokens/s, model TFLOP/s by Megatron's formula, and MFU: under --device
 * cuda against the GPU's dense peak for the dtype, on the cpu against the
 * sgemm peak measured in this process times --compute-threads
 * (train/dg_mfu_peak.h). bench/bench_vs_torch.sh runs it beside
 * PyTorch on the same model, batch and thread count. */
#include <stdio.h>
#include <string.h>

#include "dg_base.h"
#include "dg_flops.h"
#include "dg_mfu_peak.h"
#include "dg_trainer.h"

typedef struct timing {
    double last, total;
    int n;
} timing;

static void on_iteration(void *ctx, int it, double lm, double aux, double z, double gn, double lr) {
    (void)lm; (void)aux; (void)z; (void)gn; (void)lr;
    timing *t = ctx;
    double now = dg_now();
    if (it > 1) { /* iteration 1 is warm-up */
        t->total += now - t->last;
        t->n++;
    }
    t->last = now;
}

int main(int argc, char **argv) {
    dg_train_config c;
    dg_train_config_defaults(&c);
    /* the MoE shape this benchmark has always measured (train's own defaults
     * are Megatron's dense GPT); flags still override it */
    c.model.num_experts = 8;
    c.model.moe_aux_loss_coeff = 1e-2;
    c.model.moe_z_loss_coeff = 1e-3;
    c.model.hidden_dropout = 0.0;
    c.swiglu = 1;
    c.disable_bias_linear = 1;
    snprintf(c.normalization, sizeof c.normalization, "RMSNorm");
    snprintf(c.position_embedding_type, sizeof c.position_embedding_type, "rope");
    snprintf(c.lr_decay_style, sizeof c.lr_decay_style, "cosine");
    c.min_lr = 1e-4;
    c.mock_data = 1;
    c.null_vocab_size = 1000;
    c.train_iters = 6;
    c.log_interval = 1000000;
    c.eval_iters = 0;
    c.lr_warmup_iters = 0;
    dg_err err = {{0}};
    if (dg_train_config_parse(&c, argc, argv, 1, &err) != DG_OK) {
        dg_err_print(&err);
        return 2;
    }
    timing t = {dg_now(), 0, 0};
    dg_train_hooks hooks = {.ctx = &t, .on_iteration = on_iteration};
    dg_train_result res;
    if (dg_train(&c, &hooks, &res, &err) != DG_OK) {
        dg_err_print(&err);
        return 1;
    }
    if (t.n == 0) {
        fprintf(stderr, "bench_train: need --train-iters >= 2\n");
        return 2;
    }
    double per_iter = t.total / t.n;
    double tokens = (double)c.global_batch_size * c.model.seq_length;
    double flops = dg_model_flops(&c.model, c.global_batch_size);
    printf("bench_train: --device %s; %d layers, hidden %d, %d experts top-%d, seq %d, global batch %d\n", c.device,
           c.model.num_layers, c.model.hidden_size, c.model.num_experts, c.model.moe_router_topk,
           c.model.seq_length, c.global_batch_size);
    printf("bench_train: %.1f ms/iter, tokens/s %.1f, model TFLOP/s %.4f\n", per_iter * 1e3, tokens / per_iter,
           flops / per_iter / 1e12);
    /* on the cpu the peak is per thread: only with a known thread count */
    if (!strcmp(c.device, "cuda") || c.compute_threads > 0) {
        dg_mfu_peak peak; /* the GPU's dense peak for the dtype, or sgemm x threads */
        dg_mfu_peak_of(&c, c.compute_threads, &peak);
        if (peak.flops > 0) printf("bench_train: MFU %.2f%% against %s\n", 100.0 * flops / per_iter / peak.flops, peak.what);
        else printf("bench_train: MFU against %s\n", peak.what);
    }
    printf("RESULT tokens_per_s %.3f\n", tokens / per_iter);
    return 0;
}
