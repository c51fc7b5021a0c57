/* dg_model_decode.c — the decoding-step graph (see dg_model_decode.h).
 *
 * Parameters (the experts' by dg_model_expert_params), norms, attention's
 * projections and the MLPs come from
 * the builder pieces dg_model.c shares (dg_model_param, dg_model_norm,
 * dg_model_attn_project / _output, dg_model_mlp_biased), so both graphs
 * name and shape them alike. What stays here is what decoding does its own
 * way: attention reads and appends the KV caches, and the MoE block routes
 * dropless with no auxiliary losses. test_generate checks the two builders
 * agree on every logit.
 */
#include "dg_model_decode.h"

#include <math.h>
#include <string.h>

#include "dg_grouped_bias.h"
#include "dg_grouped_gemm.h"
#include "dg_moe_experts.h"
#include "dg_op_kv.h"
#include "dg_ops.h"
#include "dg_permute.h"
#include "dg_router.h"
#include "dg_verify.h"

void dg_decode_io_free(dg_decode_io *io) {
    dg_free(io->k_in);
    dg_free(io->v_in);
    dg_free(io->k_out);
    dg_free(io->v_out);
    io->k_in = io->v_in = io->k_out = io->v_out = NULL;
    io->n_layers = 0;
}

/* Cached GQA attention on x [B, L, H] for layer l; returns [B, L, H]. */
static int attention_block(dg_graph *g, const dg_model_config *c, const dg_decode_shape *s,
                           const char *pre, int l, int x, int pos, dg_decode_io *io) {
    int64_t B = s->batch, L = s->new_tokens, Smax = s->max_len;
    int64_t Hkv = c->num_query_groups, D = dg_model_head_dim(c);
    dg_model_qkv p;
    dg_model_attn_project(g, c, pre, x, B, L, &p);
    int q = p.q, k = p.k;
    if (c->position_embedding == DG_MODEL_POS_ROPE) {
        q = dg_rope_at(g, p.q, pos, c->rope_base, dg_model_rotary_dim(c));
        k = dg_rope_at(g, p.k, pos, c->rope_base, dg_model_rotary_dim(c));
    }

    char name[DG_NAME_LEN];
    snprintf(name, sizeof name, "kv_cache.%d.k", l);
    io->k_in[l] = dg_input_new(g, name, DG_F32, 4, DG_SHAPE(B, Smax, Hkv, D));
    snprintf(name, sizeof name, "kv_cache.%d.v", l);
    io->v_in[l] = dg_input_new(g, name, DG_F32, 4, DG_SHAPE(B, Smax, Hkv, D));
    io->k_out[l] = dg_kv_append(g, io->k_in[l], k, pos);
    io->v_out[l] = dg_kv_append(g, io->v_in[l], p.v, pos);
    int a = dg_kv_attention(g, q, io->k_out[l], io->v_out[l], pos, 1.0 / sqrt((double)D));
    return dg_model_attn_output(g, c, a, B, L, &p);
}


/* Routed experts on the step's T = B * L tokens (dropless, no losses). */
static int moe_block(dg_graph *g, const dg_model_config *c, const dg_decode_shape *s,
                     const char *pre, int x) {
    int64_t B = s->batch, L = s->new_tokens, H = c->hidden_size, T = B * L;
    int64_t E = c->num_experts;
    int wr = dg_model_param(g, pre, "mlp.router.weight", DG_MODEL_PARAM_REPLICATED, 2, DG_SHAPE(E, H));
    int w1, w2;
    dg_moe_expert_mlp m;
    dg_model_expert_params(g, c, pre, &m, &w1, &w2);
    int xt = dg_reshape(g, x, 2, DG_SHAPE(T, H));
    int logits = dg_linear(g, xt, wr);

    dg_router_opts ro;
    dg_model_router_opts(c, &ro);
    ro.capacity_factor = 0; /* dropless: see dg_model_decode.h */
    dg_router_out r;
    if (dg_moe_router(g, logits, &ro, &r) < 0) return -1;

    dg_permute_out p;
    if (dg_moe_permute(g, xt, r.indices, (int)E, &p) < 0) return -1;
    int u = dg_grouped_linear(g, p.x_perm, p.tokens_per_expert, w1);
    if (m.b1 >= 0) u = dg_grouped_bias_add(g, u, p.tokens_per_expert, m.b1);
    u = dg_mlp_activation(g, u, m.act, m.glu_offset, m.clamp);
    int d = dg_grouped_linear(g, u, p.tokens_per_expert, w2);
    if (m.b2 >= 0) d = dg_grouped_bias_add(g, d, p.tokens_per_expert, m.b2); /* weighted by probs, as training */
    int y = dg_moe_unpermute(g, d, r.probs, p.row_map);
    if (c->moe_shared_expert_size > 0)
        y = dg_add(g, y, dg_model_mlp_biased(g, c, pre, "mlp.shared_experts", xt, c->moe_shared_expert_size, 0));
    return dg_reshape(g, y, 3, DG_SHAPE(B, L, H));
}

int dg_model_build_decode(dg_graph *g, const dg_model_config *c, const dg_decode_shape *s,
                          dg_decode_io *io, dg_err *err) {
    memset(io, 0, sizeof *io);
    io->tokens = io->pos = io->logits = -1;
    DG_TRY(dg_model_config_check(c, err));
    if (c->rope_yarn && !c->multi_latent_attention)
        return dg_err_set(err, DG_EINPUT, "--position-embedding-type yarn: not supported by decoding (generate) yet: "
                          "the KV cache's rope is plain");
    if (c->attn_window > 0 || c->softmax_type != 0)
        return dg_err_set(err, DG_EINPUT, "decode: %s: not supported: the KV-cache attention has no window or sink",
                          c->attn_window > 0 ? "--window-size" : "--softmax-type");
    if (c->multi_latent_attention)
        return dg_err_set(err, DG_EINPUT, "--multi-latent-attention: not supported by decoding (generate) yet: "
                          "its KV cache is not built");

    if (s->batch < 1 || s->new_tokens < 1 || s->max_len < s->new_tokens)
        return dg_err_set(err, DG_EINPUT,
                          "decode: need batch >= 1 and 1 <= new tokens <= cache length, got batch %d, "
                          "%d new tokens, cache %d",
                          s->batch, s->new_tokens, s->max_len);
    int64_t B = s->batch, L = s->new_tokens, H = c->hidden_size, V = c->vocab_size;
    io->n_layers = c->num_layers;
    size_t nl = sizeof(int) * (size_t)c->num_layers;
    io->k_in = dg_malloc(nl);
    io->v_in = dg_malloc(nl);
    io->k_out = dg_malloc(nl);
    io->v_out = dg_malloc(nl);
    dg_graph_set_phase(g, DG_PHASE_FORWARD);
    dg_graph_set_layer(g, -1);

    io->tokens = dg_input_new(g, "tokens", DG_I32, 2, DG_SHAPE(B, L));
    io->pos = dg_input_new(g, "pos", DG_I32, 1, DG_SHAPE(B));
    int emb = dg_param(g, "embedding.word_embeddings.weight", 2, DG_SHAPE(V, H), NULL);
    int x = dg_embedding(g, emb, io->tokens);
    if (c->position_embedding == DG_MODEL_POS_LEARNED) {
        int64_t P = c->max_position_embeddings > 0 ? c->max_position_embeddings : c->seq_length;
        int pt = dg_param_new(g, "embedding.position_embeddings.weight", 2, DG_SHAPE(P, H));
        x = dg_pos_embed_add_at(g, x, pt, io->pos);
    }
    for (int l = 0; l < c->num_layers; l++) {
        char pre[32];
        snprintf(pre, sizeof pre, "decoder.layers.%d.", l);
        dg_graph_set_layer(g, l);
        int h = dg_model_norm(g, c, pre, "input_layernorm", x);
        x = dg_add(g, x, attention_block(g, c, s, pre, l, h, io->pos, io));
        int h2 = dg_model_norm(g, c, pre, "pre_mlp_layernorm", x);
        int y = dg_model_layer_is_moe(c, l) ? moe_block(g, c, s, pre, h2)
                                             : dg_model_mlp(g, c, pre, "mlp", h2, c->ffn_hidden_size);
        x = dg_add(g, x, y);
        if (g->status != DG_OK) break;
    }
    dg_graph_set_layer(g, -1);
    /* The norm is per token, so taking the last token first is the same math. */
    if (!s->all_logits && L > 1) x = dg_seq_last(g, x);
    int h = dg_model_norm(g, c, "decoder.", "final_layernorm", x);
    int wout = c->untie_embeddings ? dg_param(g, "output_layer.weight", 2, DG_SHAPE(V, H), NULL) : emb;
    io->logits = dg_linear(g, h, wout);
    if (g->status != DG_OK) return dg_err_set(err, g->status, "decode model: %s", g->err.msg);
    return dg_verify_after(g, "decode model", err);
}
