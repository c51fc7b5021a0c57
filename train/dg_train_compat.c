/* dg_train_compat.c — see dg_train_compat.h. */
#include "dg_train_compat.h"

#include <stddef.h>
#include <string.h>

#include "dg_lr.h"
#include "dg_train_config.h"

typedef enum compat_action {
    COMPAT_BUILT,  /* a field read by the trainer or by the checks below */
    COMPAT_NOOP,   /* accepted without effect: help says why */
    COMPAT_REFUSE, /* not supported: help says why */
} compat_action;

typedef struct compat_flag {
    dg_arg_spec spec;
    compat_action action;
} compat_flag;

#define X(f) offsetof(dg_train_config, compat.f)
#define NR 1, 0
#define BUILT(name, kind, field, help, ...) {{name, kind, X(field), help, __VA_ARGS__}, COMPAT_BUILT}
#define NOOP_FLAG(name, why) {{name, DG_ARG_FLAG, X(scratch_flag), why, NR, NULL}, COMPAT_NOOP}
#define NOOP_VALUE(name, why) {{name, DG_ARG_STRING, X(scratch_value), why, NR, NULL}, COMPAT_NOOP}
#define NOOP_LIST(name, why) {{name, DG_ARG_LIST, X(scratch_value), why, NR, NULL}, COMPAT_NOOP}
#define REFUSE_FLAG(name, why) {{name, DG_ARG_FLAG, X(scratch_flag), why, NR, NULL}, COMPAT_REFUSE}
#define REFUSE_VALUE(name, why) {{name, DG_ARG_STRING, X(scratch_value), why, NR, NULL}, COMPAT_REFUSE}
#define REFUSE_LIST(name, why) {{name, DG_ARG_LIST, X(scratch_value), why, NR, NULL}, COMPAT_REFUSE}

/* Reasons shared by several flags. */
#define FUSED "dagatron always runs its own fused kernels"
#define PERF "a performance option: the numbers are the same without it"
#define RECOMPUTE "not applied: recompute the MoE layers with --recompute-modules moe (the numbers are the same)"
#define NO_FP8 "only read with --fp8-format, which is not supported"
#define LOG_ONLY "a logging option: dagatron does not write this scalar"
#define CKPT_FMT "dagatron writes its own checkpoint format (docs/megatron_compat.md)"

static const compat_flag compat_flags[] = {
    /* built */
    BUILT("--bf16", DG_ARG_FLAG, bf16, "bf16 parameters' copies and activations, fp32 master weights and gradient accumulation", NR, NULL),
    BUILT("--grad-reduce-in-bf16", DG_ARG_FLAG, grad_reduce_in_bf16, "data-parallel gradient reduction in bf16 (default: fp32)", NR, NULL),
    BUILT("--fp16", DG_ARG_FLAG, fp16, "fp16 parameters' copies and activations with a loss scale, fp32 master weights", NR, NULL),
    BUILT("--loss-scale", DG_ARG_DOUBLE, loss_scale, "constant loss scale with --fp16 (default: dynamic)", 0, 1e30, NULL),
    BUILT("--initial-loss-scale", DG_ARG_DOUBLE, initial_loss_scale, "the dynamic loss scale's start (2^32)", 1e-30, 1e30, NULL),
    BUILT("--min-loss-scale", DG_ARG_DOUBLE, min_loss_scale, "the dynamic loss scale's floor (1)", 1e-30, 1e30, NULL),
    BUILT("--loss-scale-window", DG_ARG_INT, loss_scale_window, "iterations without overflow before the scale doubles (1000)", 1, 2147483647, NULL),
    BUILT("--hysteresis", DG_ARG_INT, hysteresis, "overflows tolerated before the scale halves (2)", 1, 2147483647, NULL),
    BUILT("--log-throughput", DG_ARG_FLAG, log_throughput, "print throughput per GPU (TFLOP/s/GPU) in the log line", NR, NULL),
    BUILT("--moe-per-layer-logging", DG_ARG_FLAG, moe_per_layer_logging, "print each MoE layer's routed tokens per expert at each log line", NR, NULL),
    BUILT("--train-samples", DG_ARG_INT, train_samples, "samples to train on: --train-iters = N / --global-batch-size", 1, 2147483647, NULL),
    BUILT("--lr-decay-samples", DG_ARG_INT, lr_decay_samples, "decay the learning rate over N samples", 1, 2147483647, NULL),
    BUILT("--lr-warmup-samples", DG_ARG_INT, lr_warmup_samples, "warm the learning rate up over N samples", 0, 2147483647, NULL),
    BUILT("--lr-warmup-fraction", DG_ARG_DOUBLE, lr_warmup_fraction, "warmup as a fraction of the decay", 0, 1, NULL),
    BUILT("--lr-warmup-init", DG_ARG_DOUBLE, lr_warmup_init, "learning rate at the start of warmup (0)", 0, 1e3, NULL),
    BUILT("--use-rotary-position-embeddings", DG_ARG_FLAG, use_rotary_position_embeddings, "older spelling of --position-embedding-type rope", NR, NULL),
    BUILT("--no-position-embedding", DG_ARG_FLAG, no_position_embedding, "no learned absolute position embedding", NR, NULL),
    BUILT("--exit-signal-handler", DG_ARG_FLAG, exit_signal_handler, "on SIGTERM, save a checkpoint (with --save) and exit", NR, NULL),
    BUILT("--exit-duration-in-mins", DG_ARG_INT, exit_duration_in_mins, "save a checkpoint (with --save) and exit after N minutes", 1, 1 << 30, NULL),
    BUILT("--optimizer", DG_ARG_CHOICE, optimizer, "optimizer (only adam, as AdamW, is built)", NR, "adam|sgd"),
    BUILT("--moe-router-dtype", DG_ARG_CHOICE, moe_router_dtype, "router precision: the router always computes in fp32 (fp64 is not built)", NR, "fp32|fp64"),
    BUILT("--rope-type", DG_ARG_CHOICE, rope_type, "MLA's RoPE variant: rope, or yarn (its default); ordinary attention takes rope (its YaRN: --position-embedding-type yarn); llama is not built", NR, "rope|yarn|llama"),
    BUILT("--enable-gpt-oss", DG_ARG_FLAG, enable_gpt_oss, "gpt-oss's YaRN, as Megatron's ModelOpt builder sets it: --position-embedding-type yarn, factor 32, 131072 original positions, betas 32/1, mscale 1/0, correction range unrounded (over those flags)", NR, NULL),
    BUILT("--yarn-correction-range-round-to-int", DG_ARG_FLAG, yarn_round, "--position-embedding-type yarn: round the correction range to integers (the default)", NR, NULL),
    BUILT("--no-yarn-correction-range-round-to-int", DG_ARG_FLAG, yarn_no_round, "--position-embedding-type yarn: keep the correction range fractional", NR, NULL),
    BUILT("--softmax-type", DG_ARG_CHOICE, softmax_type, "attention softmax: vanilla; off-by-one, a zero sink logit; learnable, a sink logit per head", NR, "vanilla|off-by-one|learnable"),
    /* accepted without effect */
    NOOP_FLAG("--use-mcore-models", "dagatron's model is Megatron-Core's GPT"),
    NOOP_VALUE("--transformer-impl", FUSED),
    NOOP_FLAG("--no-masked-softmax-fusion", FUSED),
    NOOP_FLAG("--no-rope-fusion", FUSED),
    NOOP_FLAG("--no-bias-gelu-fusion", FUSED " (its GeLU is the tanh form either way, docs/megatron_compat.md)"),
    NOOP_FLAG("--no-bias-swiglu-fusion", FUSED),
    NOOP_FLAG("--no-bias-dropout-fusion", FUSED),
    NOOP_FLAG("--no-gradient-accumulation-fusion", FUSED),
    NOOP_FLAG("--no-persist-layer-norm", FUSED),
    NOOP_FLAG("--moe-permute-fusion", FUSED),
    NOOP_FLAG("--moe-router-fusion", FUSED),
    NOOP_FLAG("--cross-entropy-loss-fusion", FUSED),
    NOOP_VALUE("--cross-entropy-fusion-impl", FUSED),
    NOOP_FLAG("--attention-softmax-in-fp32", "softmax always runs in fp32"),
    NOOP_FLAG("--accumulate-allreduce-grads-in-fp32", "the default: gradients accumulate and reduce in fp32 (--grad-reduce-in-bf16 reduces in bf16)"),
    NOOP_FLAG("--disable-bf16-reduced-precision-matmul", "GEMMs accumulate in fp32"),
    NOOP_FLAG("--moe-shared-expert-overlap", PERF),
    NOOP_FLAG("--delay-wgrad-compute", PERF),
    NOOP_FLAG("--moe-enable-deepep", PERF " (the dispatcher's backend)"),
    NOOP_VALUE("--moe-flex-dispatcher-backend", PERF " (--moe-token-dispatcher-type flex routes as alltoall)"),
    NOOP_FLAG("--moe-pad-expert-input-to-capacity", "padding to capacity adds zero rows that are dropped"),
    NOOP_FLAG("--moe-router-padding-for-fp8", NO_FP8),
    NOOP_FLAG("--moe-layer-recompute", RECOMPUTE),
    NOOP_VALUE("--distributed-timeout-minutes", "collectives have no timeout here"),
    NOOP_VALUE("--num-workers", "data is read by the training thread"),
    NOOP_FLAG("--no-mmap-bin-files", "the .bin files are always memory-mapped"),
    NOOP_FLAG("--no-create-attention-mask-in-dataloader", "attention is always causal in the kernel"),
    NOOP_FLAG("--manual-gc", "there is no garbage collector"),
    NOOP_VALUE("--manual-gc-interval", "there is no garbage collector"),
    NOOP_FLAG("--no-manual-gc-eval", "there is no garbage collector"),
    NOOP_FLAG("--no-check-for-nan-in-loss-and-grad", "a NaN iteration is skipped and counted, never fatal"),
    NOOP_FLAG("--te-rng-tracker", FUSED),
    NOOP_FLAG("--enable-experimental", "nothing experimental is gated"),
    NOOP_FLAG("--export-force-local-attention", "export option"),
    NOOP_VALUE("--tiktoken-pattern", "only read by TikTokenizer, which is not supported"),
    NOOP_VALUE("--logging-level", "dagatron's log has one level"),
    NOOP_FLAG("--log-timers-to-tensorboard", LOG_ONLY),
    NOOP_FLAG("--log-memory-to-tensorboard", LOG_ONLY),
    NOOP_FLAG("--log-validation-ppl-to-tensorboard", LOG_ONLY),
    NOOP_FLAG("--log-num-zeros-in-grad", LOG_ONLY),
    NOOP_FLAG("--log-params-norm", LOG_ONLY),
    NOOP_VALUE("--dist-ckpt-strictness", CKPT_FMT),
    NOOP_FLAG("--auto-detect-ckpt-format", CKPT_FMT),
    NOOP_FLAG("--use-dist-ckpt", CKPT_FMT),
    NOOP_VALUE("--fp8-amax-compute-algo", NO_FP8),
    NOOP_VALUE("--fp8-amax-history-len", NO_FP8),
    NOOP_FLAG("--fp8-param-gather", NO_FP8),
    /* refused: the meaning is not built and it would change the numbers */
    REFUSE_VALUE("--fp8-format", "fp8 training is not built"),
    REFUSE_FLAG("--use-rope-scaling", "RoPE frequency scaling is not built"),
    REFUSE_FLAG("--apply-layernorm-1p", "zero-centred LayerNorm weights are not built"),
    REFUSE_VALUE("--step-batch-size-schedule", "batch-size schedules are not built"),
    REFUSE_LIST("--rampup-batch-size", "batch-size ramp-up is not built"),
};

#define N_COMPAT ((int)DG_ARRAY_LEN(compat_flags))

void dg_train_compat_defaults(dg_train_compat *x) {
    memset(x, 0, sizeof *x);
    x->lr_warmup_fraction = -1.0;
    x->initial_loss_scale = 4294967296.0;
    x->min_loss_scale = 1.0;
    x->loss_scale_window = 1000;
    x->hysteresis = 2;
    snprintf(x->optimizer, sizeof x->optimizer, "adam");
    snprintf(x->moe_router_dtype, sizeof x->moe_router_dtype, "fp32");
    x->rope_type[0] = 0; /* Megatron's None: yarn under MLA, else rope */
    snprintf(x->softmax_type, sizeof x->softmax_type, "vanilla");
}

static int refuse(const char *flag, const char *why, dg_err *err) {
    return dg_err_set(err, DG_EINPUT, "%s: not supported: %s (docs/megatron_compat.md)", flag, why);
}

/* Refusals that depend on the value: Megatron's default is accepted. */
static int check_values(const dg_train_compat *x, dg_err *err) {
    if (strcmp(x->optimizer, "adam")) return refuse("--optimizer sgd", "only adam (AdamW) is built", err);
    if (strcmp(x->moe_router_dtype, "fp32")) return refuse("--moe-router-dtype fp64", "the router computes in fp32", err);
    if (!strcmp(x->rope_type, "llama")) return refuse("--rope-type llama", "only rope and yarn are built", err);
    if (x->bf16 && x->fp16) return dg_err_set(err, DG_EINPUT, "--bf16 and --fp16 exclude each other");
    return DG_OK;
}

/* --[no-]yarn-correction-range-round-to-int, and --enable-gpt-oss: gpt-oss's
 * YaRN as Megatron's ModelOpt builder sets it on the config after the flags
 * (so over --rotary-scaling-factor, --mscale, ...; its frequencies are the
 * YaRN of --position-embedding-type yarn, which it selects). */
static int apply_yarn(dg_train_config *c, dg_err *err) {
    dg_train_compat *x = &c->compat;
    dg_model_config *m = &c->model;
    if (x->yarn_round && x->yarn_no_round)
        return dg_err_set(err, DG_EINPUT, "--yarn-correction-range-round-to-int and "
                          "--no-yarn-correction-range-round-to-int exclude each other");
    m->yarn_unrounded = x->yarn_no_round;
    if (!x->enable_gpt_oss) return DG_OK;
    if (m->multi_latent_attention)
        return refuse("--enable-gpt-oss with --multi-latent-attention", "gpt-oss's YaRN is for ordinary attention", err);
    snprintf(c->position_embedding_type, sizeof c->position_embedding_type, "yarn");
    m->rotary_scaling_factor = 32.0;
    m->yarn_original_max_pos = 131072;
    m->yarn_beta_fast = 32.0;
    m->yarn_beta_slow = 1.0;
    m->mscale = 1.0;
    m->mscale_all_dim = 0.0;
    m->yarn_unrounded = 1;
    return DG_OK;
}

/* What the built flags mean for dagatron's own fields. */
static int apply(dg_train_config *c, dg_err *err) {
    dg_train_compat *x = &c->compat;
    /* Megatron: common attention only takes rope; MLA defaults to yarn */
    if (!strcmp(x->rope_type, "yarn") && !c->model.multi_latent_attention)
        return refuse("--rope-type yarn", "ordinary attention takes --rope-type rope, as in Megatron; its YaRN is "
                      "--position-embedding-type yarn", err);
    c->model.rope_yarn = c->model.multi_latent_attention && strcmp(x->rope_type, "rope") != 0;
    if (x->use_rotary_position_embeddings) snprintf(c->position_embedding_type, sizeof c->position_embedding_type, "rope");
    /* Megatron's --no-position-embedding turns the learned table off; RoPE is unaffected */
    if (x->no_position_embedding && !strcmp(c->position_embedding_type, "learned_absolute"))
        snprintf(c->position_embedding_type, sizeof c->position_embedding_type, "none");
    DG_TRY(apply_yarn(c, err));
    if (x->train_samples > 0) {
        if (x->train_iters_given)
            return dg_err_set(err, DG_EINPUT, "--train-samples and --train-iters exclude each other");
        if (c->global_batch_size <= 0)
            return dg_err_set(err, DG_EINPUT, "--train-samples needs --global-batch-size");
        c->train_iters = x->train_samples / c->global_batch_size; /* as Megatron: whole iterations */
        if (c->train_iters < 1)
            return dg_err_set(err, DG_EINPUT, "--train-samples %d is less than one --global-batch-size %d",
                              x->train_samples, c->global_batch_size);
    }
    x->lr_schedule_by_samples = x->train_samples > 0 || x->lr_decay_samples > 0 || x->lr_warmup_samples > 0 ||
                                x->lr_warmup_fraction >= 0;
    if ((x->lr_decay_samples > 0 || x->lr_warmup_samples > 0) && c->global_batch_size <= 0)
        return dg_err_set(err, DG_EINPUT, "--lr-decay-samples / --lr-warmup-samples need --global-batch-size");
    return DG_OK;
}

/* The accepted flags without effect that were given, for the start-up note. */
static void note(dg_train_compat *x, const char *name) {
    size_t o = strlen(x->notes);
    if (o + strlen(name) + 3 < sizeof x->notes) snprintf(x->notes + o, sizeof x->notes - o, "%s%s", o ? " " : "", name);
}

int dg_train_compat_parse(dg_train_config *c, const dg_arg_spec *specs, int n, int argc, char **argv, int first,
                          dg_err *err) {
    return dg_train_compat_parse_in(c, 0, specs, n, argc, argv, first, err);
}

int dg_train_compat_parse_in(void *obj, size_t at, const dg_arg_spec *specs, int n, int argc, char **argv,
                             int first, dg_err *err) {
    dg_train_config *c = (dg_train_config *)((char *)obj + at);
    int total = n + N_COMPAT;
    dg_arg_spec *all = dg_malloc(sizeof *all * (size_t)total);
    int *seen = dg_calloc((size_t)total, sizeof *seen);
    memcpy(all, specs, sizeof *all * (size_t)n);
    for (int i = 0; i < N_COMPAT; i++) {
        all[n + i] = compat_flags[i].spec;
        all[n + i].offset += at;
    }
    int st = dg_args_parse(argc, argv, first, all, total, obj, seen, err);
    for (int i = 0; st == DG_OK && i < n; i++) {
        if (seen[i] && !strcmp(specs[i].name, "--train-iters")) c->compat.train_iters_given = 1;
        if (seen[i] && !strcmp(specs[i].name, "--split")) c->compat.split_given = 1;
    }
    for (int i = 0; st == DG_OK && i < N_COMPAT; i++) {
        if (!seen[n + i]) continue;
        if (compat_flags[i].action == COMPAT_REFUSE) st = refuse(compat_flags[i].spec.name, compat_flags[i].spec.help, err);
        else if (compat_flags[i].action == COMPAT_NOOP) note(&c->compat, compat_flags[i].spec.name);
    }
    if (st == DG_OK) st = check_values(&c->compat, err);
    if (st == DG_OK) st = apply(c, err);
    dg_free(seen);
    dg_free(all);
    return st;
}

int dg_train_compat_finish(const dg_train_config *c, dg_err *err) {
    if (c->compat.lr_schedule_by_samples && c->lr_warmup_iters > 0)
        return dg_err_set(err, DG_EINPUT, "--lr-warmup-iters and a schedule by samples (--lr-*-samples, "
                                          "--lr-warmup-fraction) exclude each other");
    return DG_OK;
}

void dg_train_compat_schedule(const dg_train_config *c, dg_lr_schedule *s) {
    const dg_train_compat *x = &c->compat;
    s->init_lr = x->lr_warmup_init;
    if (!x->lr_schedule_by_samples) return;
    /* Megatron counts its schedule in samples: an iteration is
     * --global-batch-size steps; iteration counts become samples. */
    int gbs = c->global_batch_size;
    s->step_samples = gbs;
    s->decay_steps = x->lr_decay_samples > 0 ? (double)x->lr_decay_samples
                     : x->train_samples > 0  ? (double)x->train_samples /* Megatron's default decay */
                                             : (double)c->lr_decay_iters * gbs;
    s->warmup_steps = x->lr_warmup_fraction >= 0 ? x->lr_warmup_fraction * s->decay_steps
                                                 : (double)x->lr_warmup_samples;
}

void dg_train_compat_help(FILE *f) {
    static const char *what[] = {"", " (accepted, no effect: ", " (not supported: "};
    for (int i = 0; i < N_COMPAT; i++) {
        const compat_flag *k = &compat_flags[i];
        fprintf(f, "  %-44s %s%s%s\n", k->spec.name, k->action == COMPAT_BUILT ? "" : what[k->action], k->spec.help,
                k->action == COMPAT_BUILT ? "" : ")");
    }
}
