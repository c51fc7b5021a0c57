/* dg_model_record.c — see dg_model_record.h. */
#include "dg_model_record.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define FI(f, flag, a) {#f, flag, offsetof(dg_model_config, f), sizeof(int), 'i', a}
#define FD(f, flag, a) {#f, flag, offsetof(dg_model_config, f), sizeof(double), 'd', a}
static const dg_model_field k_fields[] = {
    FI(num_layers, "--num-layers", true),
    FI(hidden_size, "--hidden-size", true),
    FI(ffn_hidden_size, "--ffn-hidden-size", true),
    FI(num_attention_heads, "--num-attention-heads", true),
    FI(num_query_groups, "--num-query-groups", true),
    FI(seq_length, "--seq-length", false),
    FI(micro_batch_size, "--micro-batch-size", false),
    FI(vocab_size, "--vocab-size (padded to a multiple of --make-vocab-size-divisible-by x tp)", true),
    FI(num_experts, "--num-experts", true),
    FI(moe_router_topk, "--moe-router-topk", true),
    FI(moe_ffn_hidden_size, "--moe-ffn-hidden-size", true),
    FD(moe_aux_loss_coeff, "--moe-aux-loss-coeff", false),
    FD(moe_z_loss_coeff, "--moe-z-loss-coeff", false),
    FD(rope_base, "--rotary-base", true),
    FD(norm_epsilon, "--norm-epsilon", true),
    FI(untie_embeddings, "--untie-embeddings-and-output-weights", true),
    FI(normalization_layernorm, "--normalization LayerNorm", true),
    FI(score_function_sigmoid, "--moe-router-score-function sigmoid", true),
    FI(router_pre_softmax, "--moe-router-pre-softmax", true),
    FD(moe_capacity_factor, "--moe-expert-capacity-factor", false),
    FI(moe_layer_freq, "--moe-layer-freq", true),
    FI(moe_layer_mask[0], "--moe-layer-freq (list, layers 0-31)", true),
    FI(moe_layer_mask[1], "--moe-layer-freq (list, layers 32-63)", true),
    FI(moe_layer_mask[2], "--moe-layer-freq (list, layers 64-95)", true),
    FI(moe_layer_mask[3], "--moe-layer-freq (list, layers 96-127)", true),
    FI(moe_shared_expert_size, "--moe-shared-expert-intermediate-size", true),
    FI(expert_model_parallel_size, "--expert-model-parallel-size", false),
    FI(moe_token_dispatcher_type, "--moe-token-dispatcher-type", false),
    FI(moe_a2a_overlap_chunks, "--moe-a2a-overlap-chunks", false),
    FI(moe_token_drop_policy, "--moe-token-drop-policy", false),
    FI(moe_router_num_groups, "--moe-router-num-groups", true),
    FI(moe_router_group_topk, "--moe-router-group-topk", true),
    FD(moe_router_topk_scaling_factor, "--moe-router-topk-scaling-factor", true),
    FD(rotary_percent, "--rotary-percent", true),
    FI(mlp_gelu, "--swiglu (absent: GeLU)", true),
    FI(add_bias_linear, "--disable-bias-linear (absent: biases)", true),
    FI(position_embedding, "--position-embedding-type", true),
    FI(max_position_embeddings, "--max-position-embeddings", false),
    FD(hidden_dropout, "--hidden-dropout", false),
    FI(moe_seq_aux_loss, "--moe-router-load-balancing-type seq_aux_loss", false),
    FI(attention_unfused, "--attention-backend unfused", false),
    FD(attention_dropout, "--attention-dropout", false),
    FI(kv_channels, "--kv-channels", true),
    FI(qk_layernorm, "--qk-layernorm", true),
    FI(moe_expert_bias, "--moe-router-enable-expert-bias", true),
    FI(moe_force_load_balancing, "--moe-router-force-load-balancing", false),
    FD(moe_input_jitter_eps, "--moe-input-jitter-eps", false),
    FI(per_token_loss, "--calculate-per-token-loss", false),
    /* attention variants (issue 29) */
    FI(attn_window, "--window-size", true),
    FI(window_attn_skip_freq, "--window-attn-skip-freq", true),
    FI(window_attn_mask[0], "--window-attn-skip-freq (list, layers 0-31)", true),
    FI(window_attn_mask[1], "--window-attn-skip-freq (list, layers 32-63)", true),
    FI(window_attn_mask[2], "--window-attn-skip-freq (list, layers 64-95)", true),
    FI(window_attn_mask[3], "--window-attn-skip-freq (list, layers 96-127)", true),
    FI(softmax_type, "--softmax-type", true),
    /* multi-latent attention (issue 29) */
    FI(multi_latent_attention, "--multi-latent-attention", true),
    FI(q_lora_rank, "--q-lora-rank", true),
    FI(kv_lora_rank, "--kv-lora-rank", true),
    FI(qk_head_dim, "--qk-head-dim", true),
    FI(qk_pos_emb_head_dim, "--qk-pos-emb-head-dim", true),
    FI(v_head_dim, "--v-head-dim", true),
    FI(rope_yarn, "--rope-type yarn (MLA) or --position-embedding-type yarn", true),
    FD(rotary_scaling_factor, "--rotary-scaling-factor", true),
    FD(mscale, "--mscale", true),
    FD(mscale_all_dim, "--mscale-all-dim", true),
    /* expert MLP variants (issue 29) */
    FI(quick_geglu, "--quick-geglu", true),
    FD(glu_linear_offset, "--glu-linear-offset", true),
    FD(activation_clamp, "--activation-func-clamp-value", true),
    FI(mtp_num_layers, "--mtp-num-layers", true),
    FD(mtp_loss_scaling_factor, "--mtp-loss-scaling-factor", false),
    /* YaRN on ordinary attention (issue 29) */
    FI(yarn_original_max_pos, "--yarn-original-max-position-embeddings", true),
    FD(yarn_beta_fast, "--yarn-beta-fast", true),
    FD(yarn_beta_slow, "--yarn-beta-slow", true),
    FI(yarn_unrounded, "--no-yarn-correction-range-round-to-int", true),
};
#undef FI
#undef FD

const dg_model_field *dg_model_fields(int *n) {
    *n = (int)DG_ARRAY_LEN(k_fields);
    return k_fields;
}

static double field_get(const dg_model_config *c, const dg_model_field *f) {
    const char *p = (const char *)c + f->offset;
    if (f->kind == 'i') {
        int v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    double v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The fields after rotary_percent came after the record itself: a
 * checkpoint written before them lacks them, and zero is what they meant
 * there (SwiGLU, no biases, RoPE, no dropout, no window, the vanilla
 * softmax: dg_model.h), so an absent
 * one reads as zero. Every earlier field must be present. */
static int zero_if_absent(const dg_model_field *f) {
    return f->offset >= offsetof(dg_model_config, mlp_gelu);
}
static const double k_zero = 0.0;

int dg_model_to_record(const dg_model_config *c, dg_ckpt_config *rec, dg_err *err) {
    for (size_t i = 0; i < DG_ARRAY_LEN(k_fields); i++)
        DG_TRY(dg_ckpt_config_set(rec, k_fields[i].name, field_get(c, &k_fields[i]), err));
    return DG_OK;
}

int dg_model_from_record(const dg_ckpt_config *rec, dg_model_config *c, const char *where, dg_err *err) {
    for (size_t i = 0; i < DG_ARRAY_LEN(k_fields); i++) {
        const dg_model_field *f = &k_fields[i];
        const double *v = dg_ckpt_config_get(rec, f->name);
        if (!v && zero_if_absent(f)) v = &k_zero;
        if (!v) return dg_err_set(err, DG_EINPUT, "%s: model field '%s' is missing", where, f->name);
        char *p = (char *)c + f->offset;
        if (f->kind == 'd') {
            memcpy(p, v, sizeof(double));
            continue;
        }
        if (!(*v == floor(*v)) || *v < INT32_MIN || *v > INT32_MAX)
            return dg_err_set(err, DG_EINPUT, "%s: model field '%s' = %.17g is not an integer in [%d, %d]", where,
                              f->name, *v, INT32_MIN, INT32_MAX);
        int iv = (int)*v;
        memcpy(p, &iv, sizeof iv);
    }
    return DG_OK;
}

int dg_model_check_record(const dg_ckpt_config *ckpt, const void *run_, const char *where, dg_err *err) {
    const dg_model_config *run = run_;
    for (size_t i = 0; i < DG_ARRAY_LEN(k_fields); i++) {
        const dg_model_field *f = &k_fields[i];
        if (!f->arch) continue;
        const double *pa = dg_ckpt_config_get(ckpt, f->name);
        if (!pa && zero_if_absent(f)) pa = &k_zero;
        if (!pa) return dg_err_set(err, DG_EINPUT, "%s: model field '%s' is missing", where, f->name);
        double a = *pa, b = field_get(run, f);
        if (memcmp(&a, &b, sizeof a) == 0) continue;
        char sa[32], sb[32];
        snprintf(sa, sizeof sa, "%g", a);
        snprintf(sb, sizeof sb, "%g", b);
        if (!strcmp(sa, sb)) { /* differ beyond %g's 6 digits: show them all */
            snprintf(sa, sizeof sa, "%.17g", a);
            snprintf(sb, sizeof sb, "%.17g", b);
        }
        return dg_err_set(err, DG_EINPUT, "%s: the checkpoint's model has %s = %s, this run has %s (%s)", where,
                          f->name, sa, sb, f->flag);
    }
    return DG_OK;
}
