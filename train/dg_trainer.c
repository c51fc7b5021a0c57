/* dg_trainer.c — see dg_trainer.h. */
#include "dg_trainer.h"

#include <math.h>
#include <string.h>
#include <sys/resource.h>

#include "dg_autodiff.h"
#include "dg_cpu_adamw.h"
#include "dg_cpu_elementwise.h"
#include "dg_cpu_gemm.h"
#include "dg_feed.h"
#include "dg_flops.h"
#include "dg_lr.h"
#include "dg_op_basic.h"
#include "dg_sched.h"
#include "dg_verify.h"

/* Everything one run holds. */
typedef struct trainer {
    dg_train_config *c;
    dg_graph *g;
    dg_model_io io;
    dg_sched_plan *plan;
    dg_runtime *rt;
    const dg_team *team;
    dg_feed feed;
    int n_params;
    int *params;       /* tensor ids of the parameters, in graph order */
    float **acc;       /* fp32 gradient accumulators, one per parameter */
    float **m, **v;    /* AdamW moments */
    int32_t *batch;    /* [mbs][S + 1] */
    double peak_flops; /* measured sgemm peak x compute threads */
    const dg_train_hooks *hooks;
    int iteration, microbatch; /* where the loop is, for the hooks */
    int64_t *expert_tokens;    /* [layers][E]: routed tokens over the log window */
    int64_t eval_consumed;     /* validation samples read so far */
    dg_sched_stats *stats;     /* non-NULL: the step being traced records here */
} trainer;

/* ---- initialisation ---------------------------------------------------------- */

typedef struct init_rng {
    uint64_t s;
} init_rng;

static double init_normal(init_rng *r) {
    /* splitmix64 + Box-Muller: deterministic on every platform */
    uint64_t a, b;
    for (int k = 0; k < 2; k++) {
        uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        if (k == 0) a = z ^ (z >> 31);
        else b = z ^ (z >> 31);
    }
    double u1 = ((a >> 11) + 1.0) * 0x1.0p-53, u2 = (b >> 11) * 0x1.0p-53;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* Megatron's init: weights ~ N(0, std), output projections (linear_proj,
 * linear_fc2) ~ N(0, std / sqrt(2 L)), norm weights 1 and biases 0. Each
 * parameter draws from a stream seeded by (seed, its index), so adding a
 * parameter does not reshuffle the others. */
static void init_params(trainer *t) {
    const dg_train_config *c = t->c;
    double out_std = c->init_method_std / sqrt(2.0 * c->model.num_layers);
    for (int i = 0; i < t->n_params; i++) {
        const dg_tensor *p = &t->g->tensors[t->params[i]];
        float *w = dg_runtime_ptr(t->rt, p->id);
        int64_t n = dg_tensor_numel(p);
        if (strstr(p->name, "norm")) {
            float v = strstr(p->name, ".bias") ? 0.0f : 1.0f;
            for (int64_t k = 0; k < n; k++) w[k] = v;
            continue;
        }
        double std = (strstr(p->name, "linear_proj") || strstr(p->name, "linear_fc2")) ? out_std
                                                                                       : c->init_method_std;
        init_rng r = {(uint64_t)c->seed * 0x100000001B3ull + (uint64_t)i};
        for (int64_t k = 0; k < n; k++) w[k] = (float)(std * init_normal(&r));
    }
}

/* ---- setup ---------------------------------------------------------------------- */

static int setup(trainer *t, dg_err *err) {
    dg_train_config *c = t->c;
    t->g = dg_graph_new("train_step");
    DG_TRY(dg_model_build_forward(t->g, &c->model, &t->io, err));
    DG_TRY(dg_autodiff(t->g, t->io.loss, dg_ops_autodiff(), NULL, err));
    DG_TRY(dg_verify_after(t->g, "autodiff", err));

    /* What the loop reads after a step: the losses and the routers' counts. */
    int keep[4 + DG_MODEL_MAX_TRACKED], n_keep = 0;
    int wanted[4] = {t->io.lm_loss, t->io.loss, t->io.aux_loss, t->io.z_loss};
    for (int i = 0; i < 4; i++)
        if (wanted[i] >= 0) keep[n_keep++] = wanted[i];
    for (int l = 0; l < DG_MODEL_MAX_TRACKED && l < c->model.num_layers; l++)
        if (t->io.tokens_per_expert[l] >= 0) keep[n_keep++] = t->io.tokens_per_expert[l];
    dg_sched_opts so = {keep, n_keep, 0};
    t->plan = dg_sched_plan_new(t->g, &so, err);
    if (!t->plan) return DG_EINPUT;
    dg_runtime_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.compute_threads = c->compute_threads;
    t->rt = dg_runtime_new(&ro, err);
    if (!t->rt) return DG_EINTERNAL;
    DG_TRY(dg_runtime_bind(t->rt, t->plan, err));
    t->team = dg_runtime_team(t->rt);

    t->params = dg_malloc(sizeof(int) * (size_t)t->g->n_tensors);
    for (int i = 0; i < t->g->n_tensors; i++)
        if (t->g->tensors[i].role == DG_ROLE_PARAMETER) t->params[t->n_params++] = i;
    t->acc = dg_calloc((size_t)t->n_params, sizeof(float *));
    t->m = dg_calloc((size_t)t->n_params, sizeof(float *));
    t->v = dg_calloc((size_t)t->n_params, sizeof(float *));
    for (int i = 0; i < t->n_params; i++) {
        size_t bytes = dg_tensor_bytes(&t->g->tensors[t->params[i]]);
        t->acc[i] = dg_aligned_alloc(bytes);
        t->m[i] = dg_aligned_alloc(bytes);
        t->v[i] = dg_aligned_alloc(bytes);
        if (t->g->tensors[t->params[i]].grad < 0)
            return dg_err_set(err, DG_EINTERNAL, "parameter '%s' gets no gradient",
                              t->g->tensors[t->params[i]].name);
    }
    init_params(t);
    t->expert_tokens = dg_calloc((size_t)c->model.num_layers * (size_t)DG_MAX(c->model.num_experts, 1),
                                 sizeof(int64_t));
    t->batch = dg_malloc(sizeof(int32_t) * (size_t)c->model.micro_batch_size *
                         (size_t)(c->model.seq_length + 1));
    t->peak_flops = dg_measure_sgemm_peak() * dg_runtime_threads(t->rt);
    return DG_OK;
}

static void teardown(trainer *t) {
    for (int i = 0; i < t->n_params; i++) {
        dg_free(t->acc[i]);
        dg_free(t->m[i]);
        dg_free(t->v[i]);
    }
    dg_free(t->acc);
    dg_free(t->m);
    dg_free(t->v);
    dg_free(t->params);
    dg_free(t->batch);
    dg_free(t->expert_tokens);
    if (t->rt) dg_runtime_free(t->rt);
    if (t->plan) dg_sched_plan_free(t->plan);
    if (t->g) dg_graph_free(t->g);
    dg_feed_close(&t->feed);
}

/* ---- one micro-batch -------------------------------------------------------------- */

typedef struct losses {
    double lm, aux, z, total;
} losses;

/* Run forward + backward on the micro-batch after `consumed` samples of a
 * split; add the losses to *l. */
static int run_microbatch(trainer *t, int split, int64_t consumed, losses *l, dg_err *err) {
    const dg_model_config *m = &t->c->model;
    int64_t B = m->micro_batch_size, S = m->seq_length;
    DG_TRY(dg_feed_microbatch(&t->feed, split, consumed, 0, 1, (int)B, t->batch, err));
    if (t->hooks && t->hooks->on_batch && split == DG_SPLIT_TRAIN)
        t->hooks->on_batch(t->hooks->ctx, t->iteration, t->microbatch, t->batch, (int)B, (int)S);
    int32_t *tok = dg_runtime_ptr(t->rt, t->io.tokens), *tgt = dg_runtime_ptr(t->rt, t->io.targets);
    float *mask = dg_runtime_ptr(t->rt, t->io.loss_mask);
    for (int64_t b = 0; b < B; b++)
        for (int64_t s = 0; s < S; s++) {
            int32_t x = t->batch[b * (S + 1) + s], y = t->batch[b * (S + 1) + s + 1];
            if (x < 0 || x >= m->vocab_size || y < 0 || y >= m->vocab_size)
                return dg_err_set(err, DG_EINPUT,
                                  "data: token id %d is outside the vocabulary [0, %d) (check --vocab-size / --tokenizer-type)",
                                  x < 0 || x >= m->vocab_size ? x : y, m->vocab_size);
            tok[b * S + s] = x;
            tgt[b * S + s] = y;
            mask[b * S + s] = 1.0f;
        }
    DG_TRY(dg_sched_run(t->plan, t->rt, t->stats, err));
    l->lm += *(float *)dg_runtime_ptr(t->rt, t->io.lm_loss);
    l->total += *(float *)dg_runtime_ptr(t->rt, t->io.loss);
    if (t->io.aux_loss >= 0) l->aux += *(float *)dg_runtime_ptr(t->rt, t->io.aux_loss);
    if (t->io.z_loss >= 0) l->z += *(float *)dg_runtime_ptr(t->rt, t->io.z_loss);
    int E = m->num_experts;
    for (int layer = 0; split == DG_SPLIT_TRAIN && layer < m->num_layers && layer < DG_MODEL_MAX_TRACKED; layer++) {
        if (t->io.tokens_per_expert[layer] < 0) continue;
        const int32_t *cnt = dg_runtime_ptr(t->rt, t->io.tokens_per_expert[layer]);
        for (int e = 0; e < E; e++) t->expert_tokens[(int64_t)layer * E + e] += cnt[e];
    }
    return DG_OK;
}

/* Megatron's validation block: eval_iters micro-batches of the valid split,
 * continuing where the previous evaluation stopped. */
static int run_eval(trainer *t, int it, dg_err *err) {
    const dg_train_config *c = t->c;
    if (c->eval_iters <= 0 || (!t->feed.mock && !t->feed.data.split[DG_SPLIT_VALID].present))
        return DG_OK;
    losses l = {0};
    int n = c->eval_iters * c->num_microbatches;
    for (int k = 0; k < n; k++) {
        DG_TRY(run_microbatch(t, DG_SPLIT_VALID, t->eval_consumed, &l, err));
        t->eval_consumed += c->model.micro_batch_size;
    }
    double lm = l.lm / n;
    const char *bar = "------------------------------------------------------------------------------------------";
    printf("%s\n validation loss at iteration %d | lm loss value: %.6E | lm loss PPL: %.6E |\n%s\n", bar,
           it, lm, exp(lm < 700 ? lm : 700), bar);
    fflush(stdout);
    return DG_OK;
}

static void log_expert_tokens(trainer *t) {
    const dg_model_config *m = &t->c->model;
    int E = m->num_experts;
    for (int layer = 0; layer < m->num_layers && layer < DG_MODEL_MAX_TRACKED; layer++) {
        if (t->io.tokens_per_expert[layer] < 0) continue;
        printf("   layer %2d tokens per expert:", layer);
        for (int e = 0; e < E; e++) printf(" %lld", (long long)t->expert_tokens[(int64_t)layer * E + e]);
        printf("\n");
    }
    memset(t->expert_tokens, 0, sizeof(int64_t) * (size_t)m->num_layers * (size_t)DG_MAX(E, 1));
}

/* ---- the optimizer step ------------------------------------------------------------ */

/* Global L2 norm of the accumulated gradients, summed in parameter order. */
static double grad_norm(const trainer *t) {
    double ss = 0.0;
    for (int i = 0; i < t->n_params; i++) {
        int64_t n = dg_tensor_numel(&t->g->tensors[t->params[i]]);
        const float *a = t->acc[i];
        double s = 0.0;
        for (int64_t k = 0; k < n; k++) s += (double)a[k] * a[k];
        ss += s;
    }
    return sqrt(ss);
}

static void adamw_step(trainer *t, double lr, int64_t step, double clip_coef) {
    const dg_train_config *c = t->c;
    for (int i = 0; i < t->n_params; i++) {
        const dg_tensor *p = &t->g->tensors[t->params[i]];
        /* Megatron exempts biases and 1-D parameters (norm weights) from
         * weight decay (get_param_groups: no_wd for ndim == 1 or bias). */
        double wd = (p->ndim == 1 || strstr(p->name, ".bias")) ? 0.0 : c->weight_decay;
        dg_adamw_hparams h = {lr, c->adam_beta1, c->adam_beta2, c->adam_eps, wd, step};
        int64_t n = dg_tensor_numel(p);
        if (clip_coef < 1.0) dg_cpu_scale(t->team, t->acc[i], (float)clip_coef, t->acc[i], n);
        float *w = dg_runtime_ptr(t->rt, p->id);
        dg_cpu_adamw(t->team, &h, w, t->acc[i], t->m[i], t->v[i], w, t->m[i], t->v[i], n);
    }
}

/* ---- logging ------------------------------------------------------------------------- */

static double peak_rss_mb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

static void log_line(const trainer *t, int it, int64_t consumed, double ms, const losses *l,
                     double lr, double gnorm, int skipped, int nans) {
    const dg_train_config *c = t->c;
    double tokens = (double)c->global_batch_size * c->model.seq_length;
    double flops = dg_model_flops(&c->model, c->global_batch_size);
    double tflops = flops / (ms * 1e-3) / 1e12;
    double mfu = 100.0 * flops / (ms * 1e-3) / t->peak_flops;
    printf(" iteration %8d/%8d | consumed samples: %12lld | elapsed time per iteration (ms): %.1f |"
           " tokens per second: %.0f | throughput (TFLOP/s): %.3f | MFU: %.1f%% |"
           " learning rate: %.6E | lm loss: %.6E |",
           it, c->train_iters, (long long)consumed, ms, tokens / (ms * 1e-3), tflops, mfu, lr, l->lm);
    if (t->io.aux_loss >= 0) printf(" load balancing loss: %.6E |", l->aux);
    if (t->io.z_loss >= 0) printf(" z loss: %.6E |", l->z);
    printf(" grad norm: %.3f | number of skipped iterations: %3d | number of nan iterations: %3d |"
           " peak memory (MB): %.0f |\n",
           gnorm, skipped, nans, peak_rss_mb());
    fflush(stdout);
}

/* ---- the loop ---------------------------------------------------------------------------- */

int dg_train(dg_train_config *c, const dg_train_hooks *hooks, dg_train_result *res, dg_err *err) {
    dg_cpu_init();
    trainer t;
    memset(&t, 0, sizeof t);
    t.c = c;
    t.hooks = hooks;
    memset(res, 0, sizeof *res);

    /* Data first: its tokenizer decides the vocabulary. */
    int gbs = c->global_batch_size > 0 ? c->global_batch_size : c->model.micro_batch_size * c->dp_size;
    int evals = c->eval_iters > 0 ? c->train_iters / c->eval_interval + 1 : 0;
    int64_t want[3] = {(int64_t)c->train_iters * gbs, (int64_t)evals * c->eval_iters * gbs,
                       (int64_t)c->eval_iters * gbs};
    int st = dg_feed_open(&t.feed, c, want, err);
    if (st == DG_OK) st = dg_train_config_finish(c, t.feed.vocab, err);
    if (st == DG_OK) st = setup(&t, err);
    if (st != DG_OK) {
        teardown(&t);
        return st;
    }
    for (int i = 0; hooks && hooks->on_param && i < t.n_params; i++)
        hooks->on_param(hooks->ctx, &t.g->tensors[t.params[i]], dg_runtime_ptr(t.rt, t.params[i]));
    printf("dagatron train: %s; model: %d layers, hidden %d, %d heads (%d query groups), %d experts top-%d, "
           "vocabulary %d (padded), %d parameter tensors; graph: %d nodes, %d tensors; "
           "%d compute threads, sgemm peak %.1f GFLOP/s\n",
           t.feed.source, c->model.num_layers, c->model.hidden_size, c->model.num_attention_heads,
           c->model.num_query_groups, c->model.num_experts, c->model.moe_router_topk,
           c->model.vocab_size, t.n_params, t.g->n_nodes, t.g->n_tensors,
           dg_runtime_threads(t.rt), t.peak_flops / 1e9);
    fflush(stdout);

    dg_lr_schedule sched = {c->lr, c->min_lr, c->lr_warmup_iters, c->lr_decay_iters,
                            !strcmp(c->lr_decay_style, "constant") ? DG_LR_CONSTANT
                            : !strcmp(c->lr_decay_style, "linear") ? DG_LR_LINEAR
                                                                   : DG_LR_COSINE};
    int64_t consumed = 0;
    int skipped = 0, nans = 0, updates = 0;
    losses window = {0};
    double window_ms = 0.0, window_gnorm = 0.0;
    int window_n = 0;
    for (int it = 1; it <= c->train_iters && st == DG_OK; it++) {
        double t0 = dg_now();
        losses l = {0};
        for (int i = 0; i < t.n_params; i++)
            memset(t.acc[i], 0, dg_tensor_bytes(&t.g->tensors[t.params[i]]));
        t.iteration = it;
        /* --trace: record the second iteration (the first warms caches up),
         * or the only one. */
        int tracing = c->trace[0] && it == (c->train_iters > 1 ? 2 : 1);
        dg_trace *tr = NULL;
        dg_sched_stats stats;
        if (tracing) {
            tr = dg_trace_new(0);
            dg_runtime_set_trace(t.rt, tr);
            t.stats = &stats;
        }
        for (int mb = 0; mb < c->num_microbatches && st == DG_OK; mb++) {
            t.microbatch = mb;
            st = run_microbatch(&t, DG_SPLIT_TRAIN, consumed + (int64_t)mb * c->model.micro_batch_size, &l, err);
            for (int i = 0; i < t.n_params && st == DG_OK; i++) {
                const dg_tensor *p = &t.g->tensors[t.params[i]];
                dg_cpu_add(t.team, t.acc[i], dg_runtime_ptr(t.rt, p->grad), t.acc[i], dg_tensor_numel(p));
            }
        }
        if (tracing) {
            dg_runtime_set_trace(t.rt, NULL);
            t.stats = NULL;
            if (st == DG_OK) st = dg_trace_write(tr, c->trace, err);
            if (st == DG_OK) {
                printf(" trace of iteration %d (last micro-batch's step) written to %s\n", it, c->trace);
                dg_sched_stats_print(&stats, stdout, "   ");
            }
            dg_trace_free(tr);
        }
        if (st != DG_OK) break;
        consumed += c->global_batch_size;
        double inv = 1.0 / c->num_microbatches;
        l.lm *= inv;
        l.aux *= inv;
        l.z *= inv;
        l.total *= inv;
        for (int i = 0; i < t.n_params && c->num_microbatches > 1; i++)
            dg_cpu_scale(t.team, t.acc[i], (float)inv, t.acc[i], dg_tensor_numel(&t.g->tensors[t.params[i]]));
        double gnorm = grad_norm(&t);
        double lr = dg_lr_at(&sched, updates + 1);
        if (!isfinite(l.total) || !isfinite(gnorm)) {
            nans++;
            skipped++;
        } else {
            /* Megatron's clip_grad_norm_fp32: scale by max_norm / (norm + 1e-6) when below 1. */
            double clip = c->clip_grad > 0 ? c->clip_grad / (gnorm + 1e-6) : 1.0;
            adamw_step(&t, lr, ++updates, clip);
        }
        if (hooks && hooks->on_iteration)
            hooks->on_iteration(hooks->ctx, it, l.lm, l.aux, l.z, gnorm, lr);
        double ms = (dg_now() - t0) * 1e3;
        if (res->iterations == 0) res->first_lm_loss = l.lm;
        res->last_lm_loss = l.lm;
        res->iterations++;
        window.lm += l.lm;
        window.aux += l.aux;
        window.z += l.z;
        window_ms += ms;
        window_gnorm += gnorm;
        window_n++;
        if (it % c->log_interval == 0 || it == c->train_iters) {
            /* Megatron averages the losses over the logging window. */
            losses avg = {window.lm / window_n, window.aux / window_n, window.z / window_n, 0};
            log_line(&t, it, consumed, window_ms / window_n, &avg, lr, window_gnorm / window_n,
                     skipped, nans);
            log_expert_tokens(&t);
            memset(&window, 0, sizeof window);
            window_ms = window_gnorm = 0.0;
            window_n = 0;
        }
        if (it % c->eval_interval == 0 || it == c->train_iters) st = run_eval(&t, it, err);
    }
    res->skipped = skipped;
    res->nan_iters = nans;
    teardown(&t);
    return st;
}
