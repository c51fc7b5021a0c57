/* dg_model_mla.c — multi-latent attention (see dg_model_mla.h). */
#include "dg_model_mla.h"

#include <math.h>
#include <stdio.h>

#include "dg_module.h"
#include "dg_op_attention.h"
#include "dg_op_attn_key.h"
#include "dg_op_attn_unfused.h"
#include "dg_op_mla.h"
#include "dg_ops.h"

double dg_model_mla_softmax_scale(const dg_model_config *c) {
    double m = dg_rope_yarn_get_mscale(c->rotary_scaling_factor, c->mscale_all_dim);
    return m * m / sqrt((double)(c->qk_head_dim + c->qk_pos_emb_head_dim));
}

int dg_model_mla_check(const dg_model_config *c, dg_err *err) {
#define NEED(cond, ...) \
    if (!(cond)) return dg_err_set(err, DG_EINPUT, __VA_ARGS__)
    NEED(c->q_lora_rank >= 0, "--q-lora-rank: expected > 0 (or absent), got %d", c->q_lora_rank);
    NEED(c->kv_lora_rank > 0, "--kv-lora-rank: expected > 0, got %d", c->kv_lora_rank);
    NEED(c->qk_head_dim > 0, "--qk-head-dim: expected > 0, got %d", c->qk_head_dim);
    NEED(c->qk_pos_emb_head_dim > 0 && c->qk_pos_emb_head_dim % 2 == 0,
         "--qk-pos-emb-head-dim: expected an even number > 0, got %d", c->qk_pos_emb_head_dim);
    NEED(c->v_head_dim > 0, "--v-head-dim: expected > 0, got %d", c->v_head_dim);
    /* v is padded to q/k's head size for the fused attention (below) */
    NEED(c->v_head_dim <= c->qk_head_dim + c->qk_pos_emb_head_dim,
         "--v-head-dim %d: not supported above --qk-head-dim + --qk-pos-emb-head-dim (%d)", c->v_head_dim,
         c->qk_head_dim + c->qk_pos_emb_head_dim);
    NEED(c->num_query_groups == c->num_attention_heads,
         "--multi-latent-attention excludes --group-query-attention (as in Megatron)");
    NEED(!c->rope_yarn || c->rotary_scaling_factor > 0, "--rotary-scaling-factor: expected > 0, got %g",
         c->rotary_scaling_factor);
    int64_t R = c->rope_yarn ? c->qk_pos_emb_head_dim
                             : (c->rotary_percent > 0 && c->rotary_percent < 1
                                    ? (int64_t)((double)c->qk_pos_emb_head_dim * c->rotary_percent)
                                    : c->qk_pos_emb_head_dim);
    NEED(R >= 2 && R % 2 == 0, "--rotary-percent %g of --qk-pos-emb-head-dim %d gives rotary dim %lld; it must be "
         "even and >= 2", c->rotary_percent, c->qk_pos_emb_head_dim, (long long)R);
#undef NEED
    return DG_OK;
}

/* A bias-free linear "<pre>self_attention.<base>.weight" [out, in] of x. */
static int mla_linear(dg_graph *g, const char *pre, const char *base, dg_model_param_kind kind, int64_t out,
                      int64_t in, int x) {
    char n[2 * DG_NAME_LEN];
    snprintf(n, sizeof n, "self_attention.%s.weight", base);
    return dg_linear(g, x, dg_model_param(g, pre, n, kind, 2, DG_SHAPE(out, in)));
}

/* RoPE (or YaRN) of x [B, S, heads, P] as Megatron's MLA applies it. */
static int mla_rope(dg_graph *g, const dg_model_config *c, int x) {
    int64_t P = c->qk_pos_emb_head_dim, R = P;
    dg_rope_yarn_opts y = {.mscale = 1.0, .interleaved = 1};
    if (c->rope_yarn) {
        y.factor = c->rotary_scaling_factor;
        y.beta_fast = DG_MODEL_YARN_BETA_FAST;
        y.beta_slow = DG_MODEL_YARN_BETA_SLOW;
        y.mscale = dg_rope_yarn_mscale(c->rotary_scaling_factor, c->mscale, c->mscale_all_dim);
        y.original_max_position_embeddings = DG_MODEL_YARN_ORIGINAL_MAX_POS;
    } else if (c->rotary_percent > 0 && c->rotary_percent < 1) {
        R = (int64_t)((double)P * c->rotary_percent);
    }
    return dg_rope_yarn(g, x, c->rope_base, R, &y);
}

/* [a | b] along the last dim (a: [.., na], b: [.., nb]). */
static int cat_last(dg_graph *g, int a, int64_t na, int b, int64_t nb) {
    return dg_add(g, dg_pad_last(g, a, 0, na + nb), dg_pad_last(g, b, na, na + nb));
}

int dg_model_mla_attention(dg_graph *g, const dg_model_config *c, const char *pre, int x, int key, int site) {
    int64_t B = dg_Tc(g, x)->shape[0], S = dg_Tc(g, x)->shape[1], H = c->hidden_size;
    int64_t N = c->num_attention_heads, Dn = c->qk_head_dim, P = c->qk_pos_emb_head_dim, Dv = c->v_head_dim;
    int64_t Q = Dn + P, R = c->kv_lora_rank, QL = c->q_lora_rank;

    /* the down projections and latent norms */
    int cq = x;
    if (QL > 0) {
        cq = mla_linear(g, pre, "linear_q_down_proj", DG_MODEL_PARAM_REPLICATED, QL, H, x);
        if (c->qk_layernorm) cq = dg_model_norm_of(g, c, pre, "self_attention.q_layernorm", cq, QL);
    }
    int kvc = mla_linear(g, pre, "linear_kv_down_proj", DG_MODEL_PARAM_REPLICATED, R + P, H, x);
    int ckv = dg_narrow(g, kvc, 0, R);
    int k_pe = dg_reshape(g, dg_narrow(g, kvc, R, P), 4, DG_SHAPE(B, S, 1, P));
    if (c->qk_layernorm) ckv = dg_model_norm_of(g, c, pre, "self_attention.kv_layernorm", ckv, R);

    /* the up projections and RoPE, from the latents to q, k and v: Megatron's
     * qkv_up_proj_and_rope_apply, what --recompute-modules mla_up_proj recomputes */
    dg_graph_set_module(g, DG_MODULE_MLA_UP_PROJ);
    int q = QL > 0 ? mla_linear(g, pre, "linear_q_up_proj", DG_MODEL_PARAM_COLUMN, N * Q, QL, cq)
                   : mla_linear(g, pre, "linear_q_proj", DG_MODEL_PARAM_COLUMN, N * Q, H, cq);
    q = dg_reshape(g, q, 4, DG_SHAPE(B, S, N, Q));
    int kv = mla_linear(g, pre, "linear_kv_up_proj", DG_MODEL_PARAM_COLUMN, N * (Dn + Dv), R, ckv);
    kv = dg_reshape(g, kv, 4, DG_SHAPE(B, S, N, Dn + Dv));
    int k_nope = dg_narrow(g, kv, 0, Dn), v = dg_narrow(g, kv, Dn, Dv);

    int q_pe = mla_rope(g, c, dg_narrow(g, q, Dn, P));
    k_pe = dg_expand_heads(g, mla_rope(g, c, k_pe), k_nope); /* the rotated key shared by the heads */
    int query = cat_last(g, dg_narrow(g, q, 0, Dn), Dn, q_pe, P);
    int keyt = cat_last(g, k_nope, Dn, k_pe, P);
    /* Known cost: the fused attention takes one head size for q, k and v, so
     * v is padded with zeros to Q and the output's first Dv columns kept
     * (the padded columns' context is zero and their gradient dropped). */
    if (Dv < Q) v = dg_pad_last(g, v, 0, Q);

    dg_graph_set_module(g, DG_MODULE_CORE_ATTN);
    double scale = dg_model_mla_softmax_scale(c);
    dg_attn_opts ao = {.causal = 1, .scale = scale, .sink = -1, .dropout = c->attention_dropout,
                       .key = c->attention_dropout > 0 ? dg_attn_key(g, key, -1, 0) : -1, .site = site};
    int a = c->attention_unfused ? dg_attention_unfused(g, query, keyt, v, 1, scale, c->attention_dropout, key, site)
                                 : dg_attention_opt(g, query, keyt, v, &ao, NULL);
    if (Dv < Q) a = dg_narrow(g, a, 0, Dv);
    int r = dg_reshape(g, a, 3, DG_SHAPE(B, S, N * Dv));
    dg_graph_set_module(g, DG_MODULE_ATTN);
    int wo = dg_model_param(g, pre, "self_attention.linear_proj.weight", DG_MODEL_PARAM_ROW, 2, DG_SHAPE(H, N * Dv));
    int y = dg_linear(g, r, wo);
    if (c->add_bias_linear) {
        int bo = dg_model_param(g, pre, "self_attention.linear_proj.bias", DG_MODEL_PARAM_ROW_BIAS, 1, DG_SHAPE(H));
        y = dg_bias_add(g, y, bo);
    }
    return y;
}
