/* ref_dump.c — build the MoE model, run forward + backward with dagatron's
 * serial executor, and write weights, batch, losses and gradients for the
 * PyTorch oracle (ref_moe_model.py).
 *
 * usage: ref_dump PREFIX [sigmoid] [pre_softmax] [tied] [freq2] [threads2] [rot50] [dense] [qwen3]
 *        [layernorm] [expert_bias] [gptoss_attn] [offbyone] [mla] [noqlora] [yarn] [gelu_bias]
 *        [quick_geglu] [shared] [clamp] [gptoss_yarn] [groups] [mtp]
 * qwen3: --kv-channels 24 (not hidden / heads = 16) and --qk-layernorm.
 * expert_bias: sigmoid scores and a random expert bias per MoE layer (an input).
 * gptoss_attn: gpt-oss's attention, --window-size 4,0 --window-attn-skip-freq 2
 * --softmax-type learnable; offbyone: --window-size 4,0 --softmax-type off-by-one.
 * mla: multi-latent attention (--q-lora-rank 24 --kv-lora-rank 16 --qk-head-dim 12
 * --qk-pos-emb-head-dim 8 --v-head-dim 16 --qk-layernorm, no GQA); noqlora: without
 * --q-lora-rank; yarn: --rope-type yarn --rotary-scaling-factor 40 --mscale 1
 * --mscale-all-dim 0.5 (concentration and softmax scale both != 1).
 * gelu_bias: Megatron's MoE defaults: GeLU experts, biases on every linear
 * layer (the experts' [E, F] and [E, H] too).
 * gptoss_yarn: YaRN on ordinary attention as --enable-gpt-oss sets it
 * (--position-embedding-type yarn, factor 32, 131072 original positions,
 * betas 32 / 1, mscale 1 / 0, the correction range unrounded: with head
 * size 16 the ramp covers pairs 6 and 7 at fractional bounds).
 * quick_geglu: gpt-oss's MLP: --quick-geglu --glu-linear-offset 1
 * --activation-func-clamp-value 0.5 (small enough to clamp some of fc1's
 * outputs at these weights), with biases.
 * shared: a shared expert (--moe-shared-expert-intermediate-size 40), and so
 * no biases (Megatron's SharedExpertMLP takes none).
 * clamp: --activation-func-clamp-value 0.5 (on SwiGLU unless quick_geglu).
 * groups: --moe-router-num-groups 2 --moe-router-group-topk 1
 * --moe-router-topk-scaling-factor 2.5.
 * mtp: --mtp-num-layers 2 --mtp-loss-scaling-factor 0.3 (each module's inputs
 * the batch's tokens, targets and mask rolled left, zeros past the end).
 * dense: Megatron's default GPT (no MoE, GeLU, LayerNorm, learned positions,
 * biases, tied embeddings), what `dagatron train` builds without
 * architecture flags.
 * writes PREFIX.json (config + tensor table) and PREFIX.bin (raw bytes). */
#include <stdio.h>
#include <string.h>

#include "dg_autodiff.h"
#include "dg_exec_serial.h"
#include "dg_gradcheck.h"
#include "dg_ep_model.h"
#include "dg_model.h"
#include "dg_op_basic.h"
#include "dg_cpu_gemm.h"

typedef struct writer {
    FILE *bin, *json;
    long offset;
    int first;
} writer;

static void put(writer *w, const char *name, const char *dtype, const dg_tensor *shape_of,
                const void *data, size_t bytes) {
    fwrite(data, 1, bytes, w->bin);
    fprintf(w->json, "%s\n  {\"name\": \"%s\", \"dtype\": \"%s\", \"offset\": %ld, \"shape\": [",
            w->first ? "" : ",", name, dtype, w->offset);
    for (int i = 0; shape_of && i < shape_of->ndim; i++)
        fprintf(w->json, "%s%lld", i ? ", " : "", (long long)shape_of->shape[i]);
    fprintf(w->json, "]}");
    w->offset += (long)bytes;
    w->first = 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: ref_dump PREFIX [sigmoid] [pre_softmax] [tied] [freq2] [threads2] [rot50] [dense] "
                        "[qwen3] [layernorm] [expert_bias] [gptoss_attn] [offbyone] [mla] [noqlora] [yarn] "
                        "[gelu_bias] [quick_geglu] [shared] [clamp] [gptoss_yarn] [groups] [mtp]\n");
        return 2;
    }
    dg_cpu_init();
    dg_model_config c;
    dg_model_config_tiny(&c);
    int nthreads = 1;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "sigmoid")) c.score_function_sigmoid = 1;
        else if (!strcmp(argv[i], "pre_softmax")) c.router_pre_softmax = 1;
        else if (!strcmp(argv[i], "tied")) c.untie_embeddings = 0;
        else if (!strcmp(argv[i], "freq2")) c.moe_layer_freq = 2;
        else if (!strcmp(argv[i], "threads2")) nthreads = 2;
        else if (!strcmp(argv[i], "rot50")) c.rotary_percent = 0.5;
        else if (!strcmp(argv[i], "qwen3")) { /* Qwen3's attention: heads of their own size, q/k norms */
            c.kv_channels = 24;
            c.qk_layernorm = 1;
        }
        else if (!strcmp(argv[i], "layernorm")) c.normalization_layernorm = 1;
        else if (!strcmp(argv[i], "expert_bias")) { /* aux-loss-free balancing: sigmoid + a bias input */
            c.score_function_sigmoid = 1;
            c.moe_expert_bias = 1;
        }
        else if (!strcmp(argv[i], "gptoss_attn")) { /* windows on layer 1 of 2, learnable sinks */
            c.attn_window = 5;
            c.window_attn_skip_freq = 2;
            c.softmax_type = 2;
        }
        else if (!strcmp(argv[i], "offbyone")) { /* windows on every layer, a zero sink */
            c.attn_window = 5;
            c.softmax_type = 1;
        }
        else if (!strcmp(argv[i], "mla")) {
            c.multi_latent_attention = 1;
            c.num_query_groups = c.num_attention_heads;
            c.q_lora_rank = 24;
            c.kv_lora_rank = 16;
            c.qk_head_dim = 12;
            c.qk_pos_emb_head_dim = 8;
            c.v_head_dim = 16;
            c.qk_layernorm = 1;
            c.rotary_scaling_factor = 1.0;
            c.mscale = 1.0;
        }
        else if (!strcmp(argv[i], "noqlora")) c.q_lora_rank = 0;
        else if (!strcmp(argv[i], "yarn")) {
            c.rope_yarn = 1;
            c.rotary_scaling_factor = 40.0;
            c.mscale = 1.0;
            c.mscale_all_dim = 0.5;
        }
        else if (!strcmp(argv[i], "gptoss_yarn")) {
            c.rope_yarn = 1;
            c.rotary_scaling_factor = 32.0;
            c.mscale = 1.0;
            c.mscale_all_dim = 0.0;
            c.yarn_original_max_pos = 131072;
            c.yarn_beta_fast = 32.0;
            c.yarn_beta_slow = 1.0;
            c.yarn_unrounded = 1;
        }
        else if (!strcmp(argv[i], "gelu_bias")) {
            c.mlp_gelu = 1;
            c.add_bias_linear = 1;
        } else if (!strcmp(argv[i], "quick_geglu")) {
            c.quick_geglu = 1;
            c.glu_linear_offset = 1.0;
            c.activation_clamp = 0.5;
            c.add_bias_linear = 1;
        } else if (!strcmp(argv[i], "shared")) {
            c.moe_shared_expert_size = 40;
            c.add_bias_linear = 0;
        } else if (!strcmp(argv[i], "clamp")) c.activation_clamp = 0.5;
        else if (!strcmp(argv[i], "groups")) { /* DeepSeek's group-limited routing, scaled probs */
            c.moe_router_num_groups = 2;
            c.moe_router_group_topk = 1;
            c.moe_router_topk_scaling_factor = 2.5;
        }
        else if (!strcmp(argv[i], "mtp")) { /* two MTP modules, their losses weighted 0.3 / 2 each */
            c.mtp_num_layers = 2;
            c.mtp_loss_scaling_factor = 0.3;
        }
        else if (!strcmp(argv[i], "dense")) {
            c.num_experts = 0;
            c.num_query_groups = c.num_attention_heads;
            c.mlp_gelu = 1;
            c.add_bias_linear = 1;
            c.normalization_layernorm = 1;
            c.position_embedding = DG_MODEL_POS_LEARNED;
            c.max_position_embeddings = c.seq_length + 8; /* rows past S: zero gradient */
            c.untie_embeddings = 0;
        }
        else {
            fprintf(stderr, "ref_dump: unknown option '%s'\n", argv[i]);
            return 2;
        }
    }
    dg_graph *g = NULL;
    dg_model_io io;
    dg_err err = {{0}};
    if (dg_model_forward_local(&g, "ref", &c, NULL, &io, &err) != DG_OK ||
        dg_autodiff(g, io.loss, dg_ops_autodiff(), NULL, &err) != DG_OK) {
        dg_err_print(&err);
        return 1;
    }
    dg_buffers b;
    dg_buffers_alloc(g, &b);
    dg_test_rng rng = {20261122};
    int64_t B = c.micro_batch_size, S = c.seq_length;
    for (int t = 0; t < g->n_tensors; t++) {
        const dg_tensor *x = &g->tensors[t];
        if (x->role != DG_ROLE_PARAMETER) continue;
        float *p = b.ptr[t];
        int64_t n = dg_tensor_numel(x);
        if (strstr(x->name, "norm")) /* norm weights near 1, as after init */
            for (int64_t i = 0; i < n; i++) p[i] = 1.0f + 0.1f * (float)dg_test_rng_normal(&rng);
        else
            dg_test_fill_normal(&rng, p, n, strstr(x->name, "router") ? 0.5 : 0.08);
    }
    for (int l = 0; l < dg_model_total_layers(&c) && l < DG_MODEL_MAX_TRACKED; l++) /* biases that change the choice */
        if (io.expert_bias[l] >= 0)
            dg_test_fill_normal(&rng, b.ptr[io.expert_bias[l]], c.num_experts, 0.2);
    int32_t *tok = b.ptr[io.tokens], *tgt = b.ptr[io.targets];
    float *mask = b.ptr[io.loss_mask];
    for (int64_t i = 0; i < B * S; i++) {
        tok[i] = (int32_t)(dg_test_rng_next(&rng) % (uint64_t)c.vocab_size);
        tgt[i] = (int32_t)(dg_test_rng_next(&rng) % (uint64_t)c.vocab_size);
        mask[i] = (i % 7 == 3) ? 0.0f : 1.0f; /* some masked positions */
    }
    for (int d = 0; d < c.mtp_num_layers; d++) /* the batch rolled d + 1 to the left */
        for (int64_t i = 0; i < B * S; i++) {
            int64_t p = i % S + d + 1, in = p < S;
            ((int32_t *)b.ptr[io.mtp_tokens[d]])[i] = in ? tok[i + d + 1] : 0;
            ((int32_t *)b.ptr[io.mtp_targets[d]])[i] = in ? tgt[i + d + 1] : 0;
            ((float *)b.ptr[io.mtp_loss_mask[d]])[i] = in ? mask[i + d + 1] : 0.0f;
        }
    dg_test_team *team = dg_test_team_new(nthreads);
    if (dg_run_serial(g, NULL, &b, dg_test_team_get(team), &err) != DG_OK) {
        dg_err_print(&err);
        return 1;
    }

    char path[4096];
    writer w = {0};
    snprintf(path, sizeof path, "%s.bin", argv[1]);
    w.bin = fopen(path, "wb");
    snprintf(path, sizeof path, "%s.json", argv[1]);
    w.json = fopen(path, "w");
    if (!w.bin || !w.json) {
        fprintf(stderr, "ref_dump: cannot write %s\n", path);
        return 1;
    }
    w.first = 1;
    fprintf(w.json,
            "{\"config\": {\"num_layers\": %d, \"hidden_size\": %d, \"num_attention_heads\": %d, "
            "\"num_query_groups\": %d, \"num_experts\": %d, \"moe_router_topk\": %d, "
            "\"moe_aux_loss_coeff\": %.17g, \"moe_z_loss_coeff\": %.17g, \"rope_base\": %.17g, "
            "\"norm_epsilon\": %.17g, \"untie_embeddings\": %d, \"moe_layer_freq\": %d, "
            "\"score_function\": \"%s\", \"pre_softmax\": %d, \"rotary_percent\": %.17g, "
            "\"normalization\": \"%s\", \"mlp_gelu\": %d, \"add_bias_linear\": %d, "
            "\"position_embedding\": %d, \"kv_channels\": %d, \"qk_layernorm\": %d, \"attn_window\": %d, "
            "\"window_attn_skip_freq\": %d, \"softmax_type\": %d, "
            "\"multi_latent_attention\": %d, \"q_lora_rank\": %d, \"kv_lora_rank\": %d, \"qk_head_dim\": %d, "
            "\"qk_pos_emb_head_dim\": %d, \"v_head_dim\": %d, \"rope_yarn\": %d, "
            "\"rotary_scaling_factor\": %.17g, \"mscale\": %.17g, \"mscale_all_dim\": %.17g, "

            "\"yarn_original_max_pos\": %d, \"yarn_beta_fast\": %.17g, \"yarn_beta_slow\": %.17g, "
            "\"yarn_unrounded\": %d, "
            "\"quick_geglu\": %d, \"glu_linear_offset\": %.17g, \"activation_clamp\": %.17g, "
            "\"moe_shared_expert_size\": %d, \"mtp_num_layers\": %d, \"mtp_loss_scaling_factor\": %.17g, "
            "\"moe_router_num_groups\": %d, \"moe_router_group_topk\": %d, "
            "\"moe_router_topk_scaling_factor\": %.17g},\n\"tensors\": [",
            c.num_layers, c.hidden_size, c.num_attention_heads, c.num_query_groups, c.num_experts,
            c.moe_router_topk, c.moe_aux_loss_coeff, c.moe_z_loss_coeff, c.rope_base,
            c.norm_epsilon, c.untie_embeddings, c.moe_layer_freq,
            c.score_function_sigmoid ? "sigmoid" : "softmax", c.router_pre_softmax,
            c.rotary_percent > 0 ? c.rotary_percent : 1.0,
            c.normalization_layernorm ? "LayerNorm" : "RMSNorm", c.mlp_gelu, c.add_bias_linear,
            c.position_embedding, c.kv_channels, c.qk_layernorm, c.attn_window, c.window_attn_skip_freq,
            c.softmax_type, c.multi_latent_attention, c.q_lora_rank,
            c.kv_lora_rank, c.qk_head_dim, c.qk_pos_emb_head_dim, c.v_head_dim, c.rope_yarn,
            c.rotary_scaling_factor, c.mscale, c.mscale_all_dim,
            c.yarn_original_max_pos, c.yarn_beta_fast, c.yarn_beta_slow, c.yarn_unrounded,
            c.quick_geglu, c.glu_linear_offset, c.activation_clamp, c.moe_shared_expert_size,
            c.mtp_num_layers, c.mtp_loss_scaling_factor, c.moe_router_num_groups, c.moe_router_group_topk,
            c.moe_router_topk_scaling_factor);
    char name[160];
    for (int t = 0; t < g->n_tensors; t++) {
        const dg_tensor *x = &g->tensors[t];
        if (x->role != DG_ROLE_PARAMETER) continue;
        snprintf(name, sizeof name, "param/%s", x->name);
        put(&w, name, "f32", x, b.ptr[t], dg_tensor_bytes(x));
        if (x->grad >= 0) {
            snprintf(name, sizeof name, "grad/%s", x->name);
            put(&w, name, "f32", x, b.ptr[x->grad], dg_tensor_bytes(x));
        }
    }
    for (int l = 0; l < dg_model_total_layers(&c) && l < DG_MODEL_MAX_TRACKED; l++)
        if (io.expert_bias[l] >= 0) {
            const dg_tensor *x = &g->tensors[io.expert_bias[l]];
            snprintf(name, sizeof name, "input/%s", x->name);
            put(&w, name, "f32", x, b.ptr[io.expert_bias[l]], dg_tensor_bytes(x));
        }
    put(&w, "batch/tokens", "i32", &g->tensors[io.tokens], tok, dg_tensor_bytes(&g->tensors[io.tokens]));
    put(&w, "batch/targets", "i32", &g->tensors[io.targets], tgt, dg_tensor_bytes(&g->tensors[io.targets]));
    put(&w, "batch/loss_mask", "f32", &g->tensors[io.loss_mask], mask, dg_tensor_bytes(&g->tensors[io.loss_mask]));
    put(&w, "out/lm_loss", "f32", NULL, b.ptr[io.lm_loss], 4);
    put(&w, "out/loss", "f32", NULL, b.ptr[io.loss], 4);
    if (io.aux_loss >= 0) put(&w, "out/aux_loss", "f32", NULL, b.ptr[io.aux_loss], 4);
    if (io.z_loss >= 0) put(&w, "out/z_loss", "f32", NULL, b.ptr[io.z_loss], 4);
    for (int d = 0; d < c.mtp_num_layers; d++) {
        snprintf(name, sizeof name, "out/mtp_loss_%d", d + 1);
        put(&w, name, "f32", NULL, b.ptr[io.mtp_loss[d]], 4);
    }
    fprintf(w.json, "\n]}\n");
    fclose(w.bin);
    fclose(w.json);
    printf("ref_dump: %d nodes, %d tensors, loss %.9g (lm %.9g)\n", g->n_nodes, g->n_tensors,
           *(float *)b.ptr[io.loss], *(float *)b.ptr[io.lm_loss]);
    dg_test_team_free(team);
    dg_buffers_free(&b);
    dg_graph_free(g);
    return 0;
}
