/* dg_flops.c — see dg_flops.h. */
#include "dg_flops.h"

#include "dg_base.h"
#include "dg_cpu_gemm.h"

/* Multi-latent attention's FLOPs per token of one layer, Megatron's MLA
 * branch: 6 x (the projections: q (one linear, or the q lora's down and up
 * projections and its norm), the kv lora's and its norm, the RoPE key, the
 * output) + 6 x S x (QK^T and PV, halved by the causal mask). */
static double mla_attn_per_token(const dg_model_config *c) {
    double S = c->seq_length, H = c->hidden_size, A = c->num_attention_heads;
    double Q = (double)c->qk_head_dim + c->qk_pos_emb_head_dim, Dv = c->v_head_dim;
    double q = c->q_lora_rank > 0 ? c->q_lora_rank * (H + A * Q + 1) : H * A * Q;
    double kv = c->kv_lora_rank * (H + A * ((double)c->qk_head_dim + Dv) + 1) + H * c->qk_pos_emb_head_dim;
    return 6.0 * (q + kv + A * Dv * H) + 6.0 * S * (A * Q / 2 + A * Dv / 2);
}

double dg_model_flops(const dg_model_config *c, double batch) {
    /* the MTP modules count as layers of the last one's kind (Megatron's
     * num_layers + mtp_num_layers), plus their norms and eh_proj, and each
     * adds an output layer's logits */
    double S = c->seq_length, L = dg_model_total_layers(c), H = c->hidden_size, V = c->vocab_size;
    double M = DG_MAX(c->mtp_num_layers, 0);
    double A = c->num_attention_heads, G = c->num_query_groups, D = (double)dg_model_head_dim(c);
    /* the attention term in units of 12 H^2 per token and layer */
    double attn = c->multi_latent_attention ? mla_attn_per_token(c) / (12.0 * H * H)
                                            : (1.0 + G / A + S / H) * (A * D / H);
    /* average the MLP term over layers: MoE layers route to top-k experts;
     * a gated (SwiGLU) MLP has three matrices, a GeLU one two (Megatron's
     * multiplier: 3/2 with --swiglu, else 1). Megatron keys it on --swiglu
     * alone, so gpt-oss's quick GeGLU, gated too, counts as 1 there; so it
     * does here, for throughput and MFU figures comparable with Megatron's
     * (they undercount its fc1 by a third) */
    double gate = c->mlp_gelu || c->quick_geglu ? 1.0 : 1.5;
    double mlp = 0.0;
    for (int l = 0; l < (int)L; l++) {
        if (dg_model_layer_is_moe(c, l))
            mlp += (c->moe_ffn_hidden_size / H) * c->moe_router_topk * gate +
                   (c->moe_shared_expert_size / H) * gate;
        else
            mlp += (c->ffn_hidden_size / H) * gate;
    }
    mlp /= L;
    double mtp = 6.0 * batch * S * M * (3.0 * H + 2.0 * H * H);
    return 12.0 * batch * S * L * H * H * (attn + mlp + (1.0 + M) * V / (2.0 * L * H)) + mtp;
}

double dg_measure_sgemm_peak(void) {
    const int n = 1024;
    float *a = dg_aligned_alloc(sizeof(float) * n * n);
    float *b = dg_aligned_alloc(sizeof(float) * n * n);
    float *c = dg_aligned_alloc(sizeof(float) * n * n);
    for (int i = 0; i < n * n; i++) {
        a[i] = (float)((i % 7) - 3) * 0.01f;
        b[i] = (float)((i % 5) - 2) * 0.01f;
    }
    dg_cpu_sgemm(NULL, 0, 0, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n); /* warm up */
    double best = 0.0;
    for (int r = 0; r < 3; r++) {
        double t0 = dg_now();
        dg_cpu_sgemm(NULL, 0, 0, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        double dt = dg_now() - t0;
        double rate = 2.0 * n * (double)n * n / dt;
        if (rate > best) best = rate;
    }
    dg_free(a);
    dg_free(b);
    dg_free(c);
    return best;
}
