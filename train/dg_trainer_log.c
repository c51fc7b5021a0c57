/* dg_trainer_log.c — what a training run prints; see dg_trainer_internal.h. */
#include "dg_trainer_internal.h"

#include <stdio.h>
#include <string.h>

#include "dg_cp.h"
#include "dg_flops.h"
#include "dg_train_log.h"

/* Routed tokens per expert over the log window, summed over the data shards. */
int dg_trainer_log_expert_tokens(dg_trainer_state *t, int reset, dg_err *err) {
    const dg_model_config *m = &t->c->model;
    int E = DG_MAX(m->num_experts, 1), n = m->num_layers * E;
    double *v = dg_malloc(sizeof(double) * (size_t)n);
    for (int i = 0; i < n; i++) v[i] = (double)t->expert_tokens[i];
    int st = dg_dist_sum(t->data_comm, v, n, err);
    if (st == DG_OK && t->pp_comm) st = dg_dist_sum(t->pp_comm, v, n, err); /* each layer on its stage */
    /* printed with --moe-per-layer-logging */
    for (int layer = 0; st == DG_OK && t->log && t->c->compat.moe_per_layer_logging && layer < m->num_layers && layer < DG_MODEL_MAX_TRACKED; layer++) {
        if (t->lio.tokens_per_expert[layer] < 0) continue;
        printf("   layer %2d tokens per expert:", layer);
        for (int e = 0; e < m->num_experts; e++) printf(" %.0f", v[(int64_t)layer * E + e]);
        printf("\n");
    }
    dg_free(v);
    if (reset) memset(t->expert_tokens, 0, sizeof(int64_t) * (size_t)n);
    return st;
}

/* A MoE loss as the log shows it (dg_train_log_moe_loss), or -1 when the
 * graph has none (a dense model). */
double dg_trainer_moe_loss_logged(const dg_trainer_state *t, int tensor, double raw, double coeff) {
    return tensor < 0 ? -1 : dg_train_log_moe_loss(&t->c->model, raw, coeff);
}

/* ---- Megatron's training_log: which losses, and their window ---------------------------- */

static const char *const key_name[DG_LOG_N_KEYS] = {
    "lm loss", "load_balancing_loss", "seq_load_balancing_loss", "z_loss", "mtp_1 loss", "mtp_2 loss",
    "mtp_3 loss", "mtp_4 loss", "mtp_5 loss", "mtp_6 loss", "mtp_7 loss", "mtp_8 loss"};
_Static_assert(DG_LOG_N_KEYS == 12, "a name per log key");

/* Whether Megatron's training_log tracks a MoE loss (its track_names; the
 * MoE tracker reports each every iteration, force-initialized to 0):
 * with experts, "load_balancing_loss" when "aux_loss" is in the balancing
 * type, a substring test that seq_aux_loss passes too;
 * "seq_load_balancing_loss" with seq_aux_loss; "z_loss" when a z-loss
 * coefficient is given (at 0 the router records 0 / 0, a NaN, never
 * printed: the same as not tracking it). */
static int moe_tracked(const dg_trainer_state *t, dg_trainer_log_key k) {
    const dg_model_config *m = &t->c->model;
    const char *type = t->c->load_balancing;
    if (m->num_experts <= 0) return 0;
    if (k == DG_LOG_LOAD_BALANCING_LOSS) return strstr(type, "aux_loss") != NULL;
    if (k == DG_LOG_SEQ_LOAD_BALANCING_LOSS) return !strcmp(type, "seq_aux_loss");
    return k == DG_LOG_Z_LOSS && m->moe_z_loss_coeff > 0;
}

/* A tracked MoE loss's value for one iteration: what the router recorded,
 * or 0 where it recorded nothing (the loss of the other balancing type, or
 * a coefficient of 0: no loss in the graph). */
static double moe_value(const dg_trainer_state *t, dg_trainer_log_key k, const dg_trainer_losses *l) {
    const dg_model_config *m = &t->c->model;
    int z = k == DG_LOG_Z_LOSS, seq = !strcmp(t->c->load_balancing, "seq_aux_loss");
    double coeff = z ? m->moe_z_loss_coeff : m->moe_aux_loss_coeff;
    if ((z ? t->lio.z_loss : t->lio.aux_loss) < 0 || !(coeff > 0)) return 0;
    if (!z && seq != (k == DG_LOG_SEQ_LOAD_BALANCING_LOSS)) return 0;
    return dg_train_log_moe_loss(m, z ? l->z : l->aux, coeff);
}

static void window_put(dg_trainer_window *w, dg_trainer_log_key k, double v) {
    int seen = 0;
    for (int i = 0; i < w->n_keys; i++) seen |= w->order[i] == (int)k;
    if (!seen) w->order[w->n_keys++] = (int)k;
    w->sum[k] += v;
}

/* As training_log: an iteration that updated adds its losses; a skipped one
 * (the fp16 scaler found inf/NaN) adds none, and counts as a NaN iteration
 * when its loss is not finite. The MoE tracker's report adds its losses
 * every iteration, skipped or not, after the lm loss. */
void dg_trainer_window_add(const dg_trainer_state *t, dg_trainer_window *w, const dg_trainer_losses *l, int skipped,
                           int nan_loss, double ms) {
    if (!skipped) {
        window_put(w, DG_LOG_LM_LOSS, l->lm);
        w->advanced++;
    } else {
        w->skipped++;
    }
    w->nans += nan_loss;
    for (int k = DG_LOG_LOAD_BALANCING_LOSS; k < DG_LOG_MTP_LOSS; k++)
        if (moe_tracked(t, (dg_trainer_log_key)k))
            window_put(w, (dg_trainer_log_key)k, moe_value(t, (dg_trainer_log_key)k, l));
    /* then Megatron's MTP tracker: each module's loss, every iteration */
    for (int d = 0; d < t->c->model.mtp_num_layers; d++) window_put(w, (dg_trainer_log_key)(DG_LOG_MTP_LOSS + d), l->mtp[d]);
    w->ms += ms;
}

void dg_trainer_window_reset(dg_trainer_window *w) {
    memset(w->sum, 0, sizeof w->sum);
    w->advanced = w->skipped = w->nans = 0;
    w->ms = 0;
}

/* Each loss is its window's sum over the iterations that updated (at least
 * 1): a window of skipped iterations logs no lm loss until one has updated,
 * then 0; its MoE losses are the skipped iterations' own, summed. */
void dg_trainer_log_line(const dg_trainer_state *t, int it, int64_t consumed, const dg_trainer_window *w, double lr,
                         double gnorm) {
    const dg_train_config *c = t->c;
    const dg_model_config *m = &c->model;
    int world = t->grid ? t->grid->world : 1;
    double ms = w->ms / DG_MAX(w->advanced + w->skipped, 1);
    double tokens = (double)c->global_batch_size * m->seq_length;
    /* Megatron's throughput and MFU are per rank: the batch's FLOPs over all ranks. */
    double flops = dg_model_flops(m, c->global_batch_size) / world;
    dg_train_log_fields f = {
        .iteration = it, .train_iters = c->train_iters, .consumed_samples = consumed, .ms_per_iteration = ms,
        .log_throughput = c->compat.log_throughput, .tflops_per_gpu = flops / (ms * 1e-3) / 1e12,
        .learning_rate = lr, .global_batch_size = c->global_batch_size, .n_losses = w->n_keys,
        .loss_scale = t->scaler.scale, .grad_norm = gnorm, .skipped_iterations = w->skipped,
        .nan_iterations = w->nans, .tokens_per_second = tokens / (ms * 1e-3),
        .mfu_percent = t->peak.flops > 0 ? 100.0 * flops / (ms * 1e-3) / t->peak.flops : -1.0, .peak_memory_mb = dg_train_log_peak_rss_mb(),
        .has_recompute = t->rc.active, .activation_planned_mb = (double)t->rc.with.peak / 1048576.0,
        .activation_saved_mb = ((double)t->rc.none.peak - (double)t->rc.with.peak) / 1048576.0};
    for (int i = 0; i < w->n_keys; i++) {
        f.loss_name[i] = key_name[w->order[i]];
        f.loss[i] = w->sum[w->order[i]] / DG_MAX(w->advanced, 1);
    }
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

/* On the CPU the figures Megatron reads from the CUDA caching allocator
 * are: allocated, what the run holds between steps (parameters, gradients,
 * optimizer state, inputs: the plan's persistent buffers and the
 * optimizer's per-bucket state); max allocated, that plus the activation
 * arena (the plan's peak of the activations live at once within a step);
 * reserved and max reserved, the process's resident memory now and at its
 * peak (VmRSS, VmHWM). */
void dg_trainer_report_memory(const dg_trainer_state *t, int it) {
    if (t->data_rank != 0) return;
    const dg_mem_need *m = &t->mem;
    const double MB = 1048576.0;
    double held = (m->params + m->grads + m->optimizer + m->inputs) / MB, rss, hwm;
    dg_train_log_rss_mb(&rss, &hwm);
    char line[256];
    dg_train_log_memory(line, sizeof line, t->grid ? t->grid->rank : 0, it, held, held + m->activations / MB, rss,
                        hwm);
    printf("%s\n", line);
    fflush(stdout);
}

void dg_trainer_print_startup(const dg_trainer_state *t) {
    const dg_train_config *c = t->c;
    printf("dagatron train: %s; model: %d layers, hidden %d, %d heads (%d query groups), %d experts top-%d, "
           "vocabulary %d (padded), %d parameter tensors; graph: %d nodes, %d tensors; "
           "%d compute threads, --device %s; MFU against %s\n",
           t->feed.source, c->model.num_layers, c->model.hidden_size, c->model.num_attention_heads,
           c->model.num_query_groups, c->model.num_experts, c->model.moe_router_topk,
           c->model.vocab_size, t->n_params, t->g->n_nodes, t->g->n_tensors,
           dg_runtime_threads(t->rt), c->device, t->peak.what);
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
