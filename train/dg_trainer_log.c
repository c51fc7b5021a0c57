/* dg_trainer_log.c — what a training run prints; see dg_trainer_internal.h. */
#include "dg_trainer_internal.h"

#include <stdio.h>
#include <string.h>

#include "dg_cp.h"
#include "dg_flops.h"
#include "dg_train_log.h"

/* Routed tokens per expert over the log window, summed over the data shards. */
int dg_trainer_log_expert_tokens(dg_trainer_state *t, dg_err *err) {
    const dg_model_config *m = &t->c->model;
    int E = DG_MAX(m->num_experts, 1), n = m->num_layers * E;
    double *v = dg_malloc(sizeof(double) * (size_t)n);
    for (int i = 0; i < n; i++) v[i] = (double)t->expert_tokens[i];
    int st = dg_dist_sum(t->data_comm, v, n, err);
    if (st == DG_OK && t->pp_comm) st = dg_dist_sum(t->pp_comm, v, n, err); /* each layer on its stage */
    /* printed with --moe-per-layer-logging; the window restarts either way */
    for (int layer = 0; st == DG_OK && t->log && t->c->compat.moe_per_layer_logging && layer < m->num_layers && layer < DG_MODEL_MAX_TRACKED; layer++) {
        if (t->lio.tokens_per_expert[layer] < 0) continue;
        printf("   layer %2d tokens per expert:", layer);
        for (int e = 0; e < m->num_experts; e++) printf(" %.0f", v[(int64_t)layer * E + e]);
        printf("\n");
    }
    dg_free(v);
    memset(t->expert_tokens, 0, sizeof(int64_t) * (size_t)n);
    return st;
}

/* A MoE loss as the log shows it (dg_train_log_moe_loss), or -1 when the
 * graph has none (a dense model). */
double dg_trainer_moe_loss_logged(const dg_trainer_state *t, int tensor, double raw, double coeff) {
    return tensor < 0 ? -1 : dg_train_log_moe_loss(&t->c->model, raw, coeff);
}

void dg_trainer_log_line(const dg_trainer_state *t, int it, int64_t consumed, double ms,
                         const dg_trainer_losses *l, double lr, double gnorm, int64_t skipped, int64_t nans) {
    const dg_train_config *c = t->c;
    const dg_model_config *m = &c->model;
    int world = t->grid ? t->grid->world : 1;
    double tokens = (double)c->global_batch_size * m->seq_length;
    /* Megatron's throughput and MFU are per rank: the batch's FLOPs over all ranks. */
    double flops = dg_model_flops(m, c->global_batch_size) / world;
    double aux = dg_trainer_moe_loss_logged(t, t->lio.aux_loss, l->aux, m->moe_aux_loss_coeff);
    double z = dg_trainer_moe_loss_logged(t, t->lio.z_loss, l->z, m->moe_z_loss_coeff);
    dg_train_log_fields f = {
        .iteration = it, .train_iters = c->train_iters, .consumed_samples = consumed, .ms_per_iteration = ms,
        .log_throughput = c->compat.log_throughput, .tflops_per_gpu = flops / (ms * 1e-3) / 1e12,
        .learning_rate = lr, .global_batch_size = c->global_batch_size, .lm_loss = l->lm,
        .has_load_balancing_loss = aux >= 0, .has_z_loss = z >= 0, .load_balancing_loss = aux, .z_loss = z,
        .loss_scale = t->scaler.scale, .grad_norm = gnorm, .skipped_iterations = skipped, .nan_iterations = nans,
        .tokens_per_second = tokens / (ms * 1e-3), .mfu_percent = 100.0 * flops / (ms * 1e-3) / t->peak_flops,
        .peak_memory_mb = dg_train_log_peak_rss_mb(), .has_recompute = t->rc.active,
        .activation_planned_mb = (double)t->rc.with.peak / 1048576.0,
        .activation_saved_mb = ((double)t->rc.none.peak - (double)t->rc.with.peak) / 1048576.0};
    char line[2048];
    dg_train_log_iteration(line, sizeof line, &f);
    printf("%s\n", line);
    fflush(stdout);
}

void dg_trainer_print_tokenizer_default(const dg_train_config *c) {
    if (!c->tokenizer_type_default) return;
    printf("dagatron train: tokenizer %s from --vocab-file and --merge-file (no --tokenizer-type: Megatron's "
           "pretrain_gpt.py default)\n",
           c->tokenizer_type);
    fflush(stdout);
}

void dg_trainer_print_startup(const dg_trainer_state *t) {
    const dg_train_config *c = t->c;
    printf("dagatron train: %s; model: %d layers, hidden %d, %d heads (%d query groups), %d experts top-%d, "
           "vocabulary %d (padded), %d parameter tensors; graph: %d nodes, %d tensors; "
           "%d compute threads, sgemm peak %.1f GFLOP/s\n",
           t->feed.source, c->model.num_layers, c->model.hidden_size, c->model.num_attention_heads,
           c->model.num_query_groups, c->model.num_experts, c->model.moe_router_topk,
           c->model.vocab_size, t->n_params, t->g->n_nodes, t->g->n_tensors,
           dg_runtime_threads(t->rt), t->peak_flops / 1e9);
    char grid[256];
    dg_grid_sizes one = {1, 1, 1, 1, 1, 1};
    dg_grid_describe(t->grid ? &t->grid->sizes : &one, t->grid ? t->grid->world : 1, grid, sizeof grid);
    int64_t elems = 0;
    for (int i = 0; i < t->buckets.n; i++) elems += t->buckets.b[i].numel;
    printf("dagatron train: %s; global batch %d = micro batch %d x data-parallel %d x %d micro-batches; "
           "%d gradient buckets (%lld elements, %s, overlap %s%s); "
           "optimizer state: %zu bytes per rank (%sexp_avg + exp_avg_sq%s)\n",
           grid, c->global_batch_size, c->model.micro_batch_size, t->data_size, c->num_microbatches,
           t->buckets.n, (long long)elems, c->use_distributed_optimizer ? "reduce-scatter" : "all-reduce",
           c->overlap_grad_reduce ? "on" : "off",
           c->overlap_param_gather ? ", parameters gathered under the next forward" : "",
           dg_dist_state_bytes(&t->dist), c->use_distributed_optimizer ? "fp32 master weights + " : "",
           c->use_distributed_optimizer ? ", distributed" : "");
    dg_sched_plan_print(t->plan, stdout); /* tasks, edges, the activation arena's planned peak */
    dg_recompute_report_print(&t->rc, stdout); /* what recompute covers, costs and saves */
    dg_cp_print_attention_memory(t->g, c, stdout);
    fflush(stdout);
}
