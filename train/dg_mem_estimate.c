/* dg_mem_estimate.c — see dg_mem_estimate.h. */
#include "dg_mem_estimate.h"

#include <string.h>

#include "dg_memlimit.h"

double dg_mem_need_total(const dg_mem_need *n) {
    return n->params + n->grads + n->optimizer + n->activations + n->inputs + n->graph + n->data;
}

/* Graph elements one layer of one micro-batch adds at least (forward,
 * backward, the loss; measured on the MoE model: about 70 nodes and 85
 * tensors), and the bytes of the Megatron sample indices per sample
 * (sample_index 2 x int64, shuffle_index int64). */
#define NODES_PER_LAYER 60
#define TENSORS_PER_LAYER 70
#define DATA_BYTES_PER_SAMPLE 24

/* Multi-latent attention's parameters (moe/dg_model.h): q's projection(s)
 * and norm, the kv down and up projections and norm, the output. */
static double mla_params(const dg_model_config *m) {
    double H = m->hidden_size, A = m->num_attention_heads, Q = (double)m->qk_head_dim + m->qk_pos_emb_head_dim;
    double ql = m->q_lora_rank, kl = m->kv_lora_rank, norm = m->normalization_layernorm ? 2 : 1;
    double q = ql > 0 ? ql * H + A * Q * ql + (m->qk_layernorm ? norm * ql : 0) : A * Q * H;
    double kv = (kl + m->qk_pos_emb_head_dim) * H + A * ((double)m->qk_head_dim + m->v_head_dim) * kl +
                (m->qk_layernorm ? norm * kl : 0);
    return q + kv + H * A * m->v_head_dim + (m->add_bias_linear ? H : 0);
}

/* Parameters of one layer on this rank: attention, norms, and the smaller
 * of a dense and an MoE MLP when the flags do not say which yet (a lower
 * bound), experts split over EP. */
static double layer_params(const dg_train_config *c, int layer) {
    const dg_model_config *m = &c->model;
    double H = m->hidden_size, A = m->num_attention_heads > 0 ? m->num_attention_heads : 1;
    double G = c->group_query_attention && m->num_query_groups > 0 ? m->num_query_groups : A;
    double D = (double)dg_model_head_dim(m);
    double attn = m->multi_latent_attention ? mla_params(m) + 2 * H
                                            : H * A * D * 2 + H * G * D * 2 + 2 * H + (m->qk_layernorm ? 2 * D : 0);
    double F = m->ffn_hidden_size > 0 ? m->ffn_hidden_size : 4 * H;
    double Fm = m->moe_ffn_hidden_size > 0 ? m->moe_ffn_hidden_size : F;
    double ep = c->expert_model_parallel_size > 1 ? c->expert_model_parallel_size : 1;
    double dense = 3 * F * H;
    double moe = m->num_experts * H + (double)m->num_experts / ep * 3 * Fm * H + 3.0 * m->moe_shared_expert_size * H;
    double mlp = dense;
    if (m->num_experts > 0) {
        int known = c->num_microbatches > 0; /* dg_train_config_finish has parsed --moe-layer-freq */
        mlp = known ? (dg_model_layer_is_moe(m, layer) ? moe : dense) : (moe < dense ? moe : dense);
    }
    return attn + mlp;
}

void dg_mem_estimate_config(const dg_train_config *c, int64_t vocab, int data_size, int with_data,
                            dg_mem_need *n) {
    const dg_model_config *m = &c->model;
    memset(n, 0, sizeof *n);
    double L = dg_model_total_layers(m), H = m->hidden_size, V = (double)vocab, B = m->micro_batch_size;
    double S = m->seq_length, shards = data_size > 0 ? data_size : 1;
    double P = V * H * (m->untie_embeddings ? 2 : 1) + H;
    for (int l = 0; l < (int)L; l++) P += layer_params(c, l);
    P += DG_MAX(m->mtp_num_layers, 0) * (2.0 * H * H + 3 * H); /* each MTP module's eh_proj and three norms */
    n->params = 4 * P;
    n->grads = 4 * P * 2; /* each gradient, and its copy packed into a bucket */
    /* accumulator + master weights + exp_avg + exp_avg_sq, sharded by the
     * distributed optimizer */
    n->optimizer = 16 * P / (c->use_distributed_optimizer ? shards : 1);
    n->activations = 4 * B * S * (V * (1 + DG_MAX(m->mtp_num_layers, 0)) + L * H);
    double gbs = c->global_batch_size > 0 ? c->global_batch_size : B * shards;
    double n_mb = gbs / (B * shards);
    if (n_mb < 1) n_mb = 1;
    n->inputs = n_mb * B * S * 12 + B * (S + 1) * 4;
    n->graph = n_mb * (L * (NODES_PER_LAYER * (double)sizeof(dg_node) +
                            TENSORS_PER_LAYER * (double)sizeof(dg_tensor)) +
                       (double)sizeof(dg_model_io));
    if (with_data && !c->mock_data) {
        int evals = c->eval_iters > 0 && c->eval_interval > 0 ? c->train_iters / c->eval_interval + 1 : 0;
        double samples = gbs * ((double)c->train_iters + (double)evals * c->eval_iters + c->eval_iters);
        n->data = DATA_BYTES_PER_SAMPLE * samples;
    }
}

void dg_mem_estimate_plan(const dg_sched_plan *p, const dg_dp_buckets *b, const dg_train_config *c,
                          dg_mem_need *n) {
    memset(n, 0, sizeof *n);
    const dg_graph *g = p->g;
    n->activations = p->planned ? (double)p->mem.arena_bytes : 0;
    for (int t = 0; t < g->n_tensors; t++) {
        if (p->planned && p->mem.offset[t] >= 0) continue;
        double bytes = (double)dg_tensor_bytes(&g->tensors[t]);
        switch (g->tensors[t].role) {
        case DG_ROLE_PARAMETER: n->params += bytes; break;
        case DG_ROLE_INPUT: n->inputs += bytes; break;
        case DG_ROLE_OPTIMIZER: n->optimizer += bytes; break;
        default: n->grads += bytes; break;
        }
    }
    for (int i = 0; i < b->n; i++) {
        const dg_dp_bucket *k = &b->b[i];
        double owned = b->reduce_scatter ? (double)k->shard : (double)k->padded;
        n->optimizer += 16 * owned + (b->reduce_scatter ? 4.0 * (double)k->padded : 0);
    }
    n->inputs += 4.0 * c->model.micro_batch_size * (c->model.seq_length + 1.0);
}

/* Tenths of a GB: ranks differ by a few MB in what they already hold, and
 * equal messages are printed once (dg_dist_agree). */
int dg_mem_need_check(const dg_mem_need *n, int ranks_on_node, dg_err *err) {
    double need = dg_mem_need_total(n), have = (double)dg_mem_available_bytes(ranks_on_node);
    if (need <= have) return DG_OK;
    const double GB = 1e9;
    return dg_err_set(err, DG_EINPUT,
                      "memory: needs %.1f GB, this rank has %.1f GB (parameters %.1f, gradients %.1f, "
                      "optimizer state %.1f, activations %.1f, inputs %.1f, step graph %.1f, data indices "
                      "%.1f GB; the node's memory is shared by %d rank%s): make the model, --micro-batch-size, "
                      "--global-batch-size or --seq-length smaller, or use more ranks",
                      need / GB, have / GB, n->params / GB, n->grads / GB, n->optimizer / GB,
                      n->activations / GB, n->inputs / GB, n->graph / GB, n->data / GB, ranks_on_node,
                      ranks_on_node == 1 ? "" : "s");
}
