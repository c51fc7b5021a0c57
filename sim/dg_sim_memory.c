/* dg_sim_memory.c — see dg_sim_memory.h. */
#include "dg_sim_memory.h"

#include <string.h>

#include "dg_model.h"
#include "dg_pass_pp.h"

dg_sim_recompute dg_sim_mem_recompute(const dg_train_config *c) {
    if (!strcmp(c->recompute_granularity, "full")) return DG_SIM_RECOMPUTE_FULL;
    if (c->recompute_activations || !strcmp(c->recompute_granularity, "selective")) return DG_SIM_RECOMPUTE_SELECTIVE;
    return DG_SIM_RECOMPUTE_NONE;
}

static double act_bytes(const dg_train_config *c) { return c->compat.bf16 || c->compat.fp16 ? 2 : 4; }

/* Korthikanti et al. 2022, Section 4.1, term by term; e: bytes of an
 * activation (2 in the paper), masks 1 byte. "rep" terms stay whole on
 * each TP rank without SP (the paper's 10sbh), the others are split. */
double dg_sim_mem_layer_activations(const dg_train_config *c, int tp, int cp, int etp, int sp, int moe,
                                    dg_sim_recompute rc) {
    const dg_model_config *m = &c->model;
    double e = act_bytes(c), t = tp > 1 ? tp : 1, s = (double)m->seq_length / (cp > 1 ? cp : 1);
    double b = m->micro_batch_size, h = m->hidden_size, sb = s * b;
    double a = m->num_attention_heads > 0 ? m->num_attention_heads : 1;
    double g = c->group_query_attention && m->num_query_groups > 0 ? m->num_query_groups : a;
    double d = (double)dg_model_head_dim(m);
    double hid_mask = m->hidden_dropout > 0 ? 1 : 0;
    double rep_div = sp ? t : 1; /* SP splits the paper's 10sbh too */
    if (rc == DG_SIM_RECOMPUTE_FULL) return e * sb * h / rep_div;
    /* attention: the norm's input and QKV's input (rep), the residual
     * dropout's mask (rep); Q, K, V and the output projection's input (split) */
    double rep = 2 * e * sb * h + hid_mask * sb * h;
    double split = e * sb * d * (a + 2 * g) + e * sb * a * d;
    if (m->attention_unfused && rc == DG_SIM_RECOMPUTE_NONE) {
        /* softmax output 2as^2b, its dropout mask as^2b and output 2as^2b */
        double drop = m->attention_dropout > 0 ? 1 : 0;
        split += a * sb * (double)m->seq_length * (e + drop * (1 + e));
    } else if (!m->attention_unfused) {
        split += 4 * a * sb; /* the fused kernel's log-sum-exp, fp32 */
    }
    /* MLP: the norm's input and fc1's input (rep), the residual dropout's
     * mask (rep); the activation's input and fc2's input (split) */
    double glu = m->mlp_gelu ? 1 : 2;
    rep += 2 * e * sb * h + hid_mask * sb * h;
    double ffn = m->ffn_hidden_size > 0 ? m->ffn_hidden_size : 4 * h;
    if (!moe) {
        split += e * sb * ffn * (glu + 1);
        return rep / rep_div + split / t;
    }
    /* routed experts (dropless, the average load): the router's fp32
     * logits and probabilities over E; per routed copy (top-k) of a token
     * its permuted input, the activation's and fc2's inputs (split over
     * ETP) and its output before the combine; the shared expert as a dense
     * MLP. Tokens are split over TP under SP. */
    double k = m->moe_router_topk > 0 ? m->moe_router_topk : 1;
    double fm = m->moe_ffn_hidden_size > 0 ? m->moe_ffn_hidden_size : ffn;
    double et = etp > 1 ? etp : 1, E = m->num_experts;
    double tok = 8 * sb * E + k * sb * (2 * e * h + e * fm * (glu + 1) / et);
    split += e * sb * m->moe_shared_expert_size * (glu + 1);
    return rep / rep_div + split / t + tok / rep_div;
}

/* ---- parameters ------------------------------------------------------------ */

typedef struct params {
    double dense, expert; /* elements on one rank */
} params;

static double norm_size(const dg_model_config *m) { return m->normalization_layernorm ? 2 : 1; }

/* One decoder layer's parameters on a rank: TP splits the projections and
 * the MLPs, ETP x EP the routed experts; norms and the router are whole. */
static void layer_params(const dg_train_config *c, const dg_grid_sizes *sz, int l, params *p) {
    const dg_model_config *m = &c->model;
    double t = sz->tp, h = m->hidden_size, a = m->num_attention_heads > 0 ? m->num_attention_heads : 1;
    double g = c->group_query_attention && m->num_query_groups > 0 ? m->num_query_groups : a;
    double d = (double)dg_model_head_dim(m), bias = m->add_bias_linear ? 1 : 0, glu = m->mlp_gelu ? 2 : 3;
    double attn;
    if (m->multi_latent_attention) { /* Megatron's MLA term, all of it split (an upper bound) */
        double Q = (double)m->qk_head_dim + m->qk_pos_emb_head_dim, ql = m->q_lora_rank, kl = m->kv_lora_rank;
        double q = ql > 0 ? ql * (h + a * Q + norm_size(m)) : h * a * Q;
        attn = q + kl * (h + a * ((double)m->qk_head_dim + m->v_head_dim) + norm_size(m)) +
               h * m->qk_pos_emb_head_dim + a * m->v_head_dim * h;
    } else {
        attn = h * d * (a + 2 * g) + a * d * h + bias * d * (a + 2 * g);
    }
    p->dense += attn / t + bias * h + 2 * h * norm_size(m) + (m->qk_layernorm ? 2 * d * norm_size(m) : 0);
    double ffn = m->ffn_hidden_size > 0 ? m->ffn_hidden_size : 4 * h;
    if (!dg_model_layer_is_moe(m, l)) {
        p->dense += (glu * h * ffn + bias * ffn * (glu - 1)) / t + bias * h;
        return;
    }
    double fm = m->moe_ffn_hidden_size > 0 ? m->moe_ffn_hidden_size : ffn, E = m->num_experts;
    double ep = sz->ep > 0 ? sz->ep : 1, etp = sz->etp > 0 ? sz->etp : sz->tp;
    p->dense += h * E + glu * h * m->moe_shared_expert_size / t;
    p->expert += E / ep * glu * h * fm / etp;
}

/* The decoder layers of stage i: [first, first + n) without virtual
 * stages; with v chunks, chunk k of rank i holds layers of virtual stage
 * i + k p (dg_pass_pp.h). */
static void stage_params(const dg_train_config *c, const dg_grid_sizes *sz, const int *rank_of, int i, params *p) {
    const dg_model_config *m = &c->model;
    int L = m->num_layers;
    for (int l = 0; l < L; l++)
        if (rank_of[l] == i) layer_params(c, sz, l, p);
    double h = m->hidden_size, V = m->vocab_size, t = sz->tp;
    if (i == 0) {
        p->dense += V * h / t;
        if (m->position_embedding == DG_MODEL_POS_LEARNED)
            p->dense += h * (m->max_position_embeddings > 0 ? m->max_position_embeddings : m->seq_length);
    }
    if (i == sz->pp - 1) {
        /* the output layer: its own weight untied; tied, a copy on the
         * last stage when it is not the first (Megatron's shared embedding) */
        if (m->untie_embeddings || sz->pp > 1) p->dense += V * h / t;
        p->dense += h * norm_size(m);
        for (int k = 0; k < m->mtp_num_layers; k++) { /* MTP modules: a layer, eh_proj and three norms */
            layer_params(c, sz, L + k, p);
            p->dense += 2 * h * h / t + 3 * h * norm_size(m);
        }
    }
}

/* ---- activations on a stage -------------------------------------------------- */

static void pp_opts(const dg_train_config *c, const dg_grid_sizes *sz, dg_pp_opts *o) {
    memset(o, 0, sizeof *o);
    o->size = sz->pp;
    o->num_layers = c->model.num_layers;
    o->first_layers = c->decoder_first_pipeline_num_layers > 0 ? c->decoder_first_pipeline_num_layers : -1;
    o->last_layers = c->decoder_last_pipeline_num_layers > 0 ? c->decoder_last_pipeline_num_layers : -1;
    int v = c->num_virtual_stages_per_pipeline_rank;
    if (c->num_layers_per_virtual_pipeline_stage > 0 && sz->pp > 1)
        v = c->model.num_layers / (sz->pp * c->num_layers_per_virtual_pipeline_stage);
    o->virtual_stages = v > 1 ? v : 0;
}

/* Layer-micro-batches stage i holds at once (in layers of one micro-batch):
 * 1F1B (and zero-bubble H1, same memory) min(p - i, m) x its layers;
 * interleaved, its warm-up's chunks (p - i - 1) 2 + (v - 1) p + 1 (at most
 * m v) of layers/v each; all-forward-all-backward all m. */
static double held_layers(const dg_train_config *c, const dg_pp_opts *o, int i, double layers) {
    double p = o->size, m = c->num_microbatches > 0 ? c->num_microbatches : 1;
    if (!strcmp(c->pipeline_schedule, "all-forward-all-backward")) return layers * m;
    if (p <= 1) return layers;
    int v = dg_pp_chunks(o);
    if (v > 1) {
        double chunks = (p - i - 1) * 2 + (v - 1) * p + 1;
        return DG_MIN(chunks, m * v) * layers / v;
    }
    return DG_MIN(p - i, m) * layers;
}

static double stage_activations(const dg_train_config *c, const dg_grid_sizes *sz, const dg_pp_opts *o,
                                const int *rank_of, int i) {
    const dg_model_config *m = &c->model;
    int sp = c->sequence_parallel && sz->tp > 1, etp = sz->etp > 0 ? sz->etp : sz->tp;
    dg_sim_recompute rc = dg_sim_mem_recompute(c);
    /* one micro-batch's layers of this stage (a dense and an MoE layer each
     * as they are); full recompute with --recompute-num-layers N under
     * "block" recomputes N of them, "uniform" keeps one input per N */
    double per_mb = 0, biggest = 0;
    int n = 0;
    for (int l = 0; l < m->num_layers; l++) {
        if (rank_of[l] != i) continue;
        int moe = dg_model_layer_is_moe(m, l);
        dg_sim_recompute r = rc;
        int N = c->recompute_num_layers > 0 ? c->recompute_num_layers : 1;
        if (rc == DG_SIM_RECOMPUTE_FULL && !strcmp(c->recompute_method, "block") && n >= N) r = DG_SIM_RECOMPUTE_NONE;
        double full = dg_sim_mem_layer_activations(c, sz->tp, sz->cp, etp, sp, moe, DG_SIM_RECOMPUTE_NONE);
        double a = dg_sim_mem_layer_activations(c, sz->tp, sz->cp, etp, sp, moe, r);
        if (r == DG_SIM_RECOMPUTE_FULL && !strcmp(c->recompute_method, "uniform")) a /= N;
        per_mb += a;
        biggest = DG_MAX(biggest, full);
        n++;
    }
    double acts = n > 0 ? held_layers(c, o, i, n) * per_mb / n : 0;
    /* a recomputed layer's activations exist again during its backward (one
     * micro-batch's, N layers under uniform) */
    int uniform = !strcmp(c->recompute_method, "uniform") && c->recompute_num_layers > 0;
    if (rc == DG_SIM_RECOMPUTE_FULL) acts += biggest * (uniform ? c->recompute_num_layers : 1);
    double s = (double)m->seq_length / (sz->cp > 1 ? sz->cp : 1), b = m->micro_batch_size, h = m->hidden_size;
    double t = sz->tp, e = act_bytes(c), div = sp ? t : 1;
    if (i == 0) { /* the token ids (int64) and the embedding dropout's mask of each held micro-batch */
        double held = held_layers(c, o, 0, 1);
        acts += held * (8 * s * b + (m->hidden_dropout > 0 ? s * b * h : 0) / div);
    }
    if (i == sz->pp - 1) /* the final norm's and the output layer's inputs, fp32 logits (Megatron's 4sbh(1 + V/h)) */
        acts += 2 * e * s * b * h / div + 4 * s * b * (double)m->vocab_size / t;
    return acts;
}

/* ---- the stages ------------------------------------------------------------- */

/* The pipeline rank of every decoder layer: rank_of[l]. Stage by stage
 * (dg_pp_stage_layers), not layer by layer: dg_pp_stage_of_layer costs
 * O(p^2) a layer, which at PP 128 made this model slower than the plan's
 * whole search. */
static void layer_ranks(const dg_pp_opts *o, int *rank_of) {
    int L = o->num_layers, v = dg_pp_chunks(o);
    for (int l = 0; l < L; l++) rank_of[l] = o->size - 1;
    if (v > 1) {
        for (int l = 0; l < L; l++) rank_of[l] = dg_pp_vstage_of_layer(o, l) % o->size;
        return;
    }
    for (int s = 0, first = 0; s < o->size; s++) {
        int n = dg_pp_stage_layers(o, s, &first);
        for (int l = first; l < first + n && l < L; l++) rank_of[l] = s;
    }
}

void dg_sim_memory_stages(const dg_train_config *c, const dg_grid_sizes *sz, dg_sim_mem *out) {
    dg_pp_opts o;
    pp_opts(c, sz, &o);
    int bf16 = c->compat.bf16, fp16 = c->compat.fp16;
    double pb = bf16 || fp16 ? 2 : 4;
    double gb = fp16 || (bf16 && c->compat.grad_reduce_in_bf16) ? 2 : 4;
    double ob = fp16 ? 16 : bf16 ? 12 : 8;
    int etp = sz->etp > 0 ? sz->etp : sz->tp;
    double world = (double)sz->tp * sz->cp * sz->ep * sz->dp * sz->pp;
    double dp = (double)sz->dp * sz->ep * sz->cp, edp = world / ((double)etp * sz->ep * sz->pp);
    int *rank_of = dg_malloc(sizeof(int) * (size_t)DG_MAX(c->model.num_layers, 1));
    layer_ranks(&o, rank_of);
    for (int i = 0; i < sz->pp; i++) {
        params p = {0, 0};
        stage_params(c, sz, rank_of, i, &p);
        dg_sim_mem *m = &out[i];
        m->stage = i;
        m->params = pb * (p.dense + p.expert);
        m->grads = gb * (p.dense + p.expert);
        m->optimizer = c->use_distributed_optimizer ? ob * (p.dense / dp + p.expert / edp) : ob * (p.dense + p.expert);
        m->activations = stage_activations(c, sz, &o, rank_of, i);
        m->total = m->params + m->grads + m->optimizer + m->activations;
    }
    dg_free(rank_of);
}

const char *dg_sim_mem_biggest(const dg_sim_mem *m) {
    const char *name = "parameters";
    double x = m->params;
    if (m->grads > x) x = m->grads, name = "gradients";
    if (m->optimizer > x) x = m->optimizer, name = "optimizer state";
    if (m->activations > x) name = "activations";
    return name;
}
