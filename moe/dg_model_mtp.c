/* dg_model_mtp.c — multi-token prediction modules; see dg_model_mtp.h. */
#include "dg_model_mtp.h"

#include <stdio.h>

#include "dg_module.h"
#include "dg_op_chunk.h"
#include "dg_ops.h"

int dg_model_mtp_check(const dg_model_config *c, dg_err *err) {
    if (c->mtp_num_layers == 0) return DG_OK;
    if (c->mtp_num_layers < 0 || c->mtp_num_layers > DG_MODEL_MAX_MTP)
        return dg_err_set(err, DG_EINPUT, "--mtp-num-layers %d: expected 0 .. %d", c->mtp_num_layers,
                          DG_MODEL_MAX_MTP);
    if (c->mtp_num_layers >= c->seq_length)
        return dg_err_set(err, DG_EINPUT, "--mtp-num-layers %d: the deepest module predicts past --seq-length %d",
                          c->mtp_num_layers, c->seq_length);
    if (!(c->mtp_loss_scaling_factor >= 0))
        return dg_err_set(err, DG_EINPUT, "--mtp-loss-scaling-factor %g: expected >= 0", c->mtp_loss_scaling_factor);
    /* Megatron's MTP embedding rolls the position ids along with the tokens;
     * dagatron's learned positions are the sequence's own */
    if (c->position_embedding == DG_MODEL_POS_LEARNED)
        return dg_err_set(err, DG_EINPUT,
                          "--mtp-num-layers with --position-embedding-type learned_absolute: not supported (the MTP "
                          "modules' shifted positions are not built); use rope or none");
    if (c->num_layers + c->mtp_num_layers > DG_MODEL_MAX_TRACKED && c->moe_expert_bias)
        return dg_err_set(err, DG_EINPUT,
                          "--moe-router-enable-expert-bias: at most %d layers with the MTP modules, --num-layers %d + "
                          "--mtp-num-layers %d",
                          DG_MODEL_MAX_TRACKED, c->num_layers, c->mtp_num_layers);
    return DG_OK;
}

/* Module d's shifted inputs: tokens, targets [B, S] i32, mask f32. */
static void mtp_inputs(dg_graph *g, const dg_model_config *c, int d, dg_model_io *io) {
    int64_t B = c->micro_batch_size, S = c->seq_length;
    char n[DG_NAME_LEN];
    snprintf(n, sizeof n, "mtp_tokens_%d", d + 1);
    io->mtp_tokens[d] = dg_input_new(g, n, DG_I32, 2, DG_SHAPE(B, S));
    snprintf(n, sizeof n, "mtp_targets_%d", d + 1);
    io->mtp_targets[d] = dg_input_new(g, n, DG_I32, 2, DG_SHAPE(B, S));
    snprintf(n, sizeof n, "mtp_loss_mask_%d", d + 1);
    io->mtp_loss_mask[d] = dg_input_new(g, n, DG_F32, 2, DG_SHAPE(B, S));
}

/* eh_proj([enorm(e), hnorm(h)]) of module d (prefix pre), [B, S, H]. */
static int mtp_combine(dg_graph *g, const dg_model_config *c, const char *pre, int e, int h) {
    int64_t H = c->hidden_size;
    dg_graph_set_module(g, DG_MODULE_LAYERNORM);
    int xs[2] = {dg_model_norm(g, c, pre, "enorm", e), dg_model_norm(g, c, pre, "hnorm", h)};
    dg_graph_set_module(g, DG_MODULE_NONE);
    int cat = dg_concat_dim(g, xs, 2, 2);
    /* column-parallel as Megatron's (its output gathered over tp before the layer) */
    int w = dg_model_param(g, pre, "eh_proj.weight", DG_MODEL_PARAM_COLUMN, 2, DG_SHAPE(H, 2 * H));
    return dg_linear(g, cat, w);
}

int dg_model_mtp(dg_graph *g, const dg_model_config *c, int h, int emb, int wout, int key, dg_model_io *io,
                 dg_model_layer_io *lo) {
    int L = c->num_layers, D = c->mtp_num_layers, sum = -1;
    for (int d = 0; d < D && g->status == DG_OK; d++) {
        int l = L + d;
        char pre[48], tl[80];
        snprintf(pre, sizeof pre, "mtp.layers.%d.", d);
        dg_model_layer_prefix(c, l, tl, sizeof tl);
        /* sites after the decoder's 5L: the embedding's dropout, then the layer's */
        int base = 1 + 5 * L + 6 * d;
        dg_model_sites s = {base + 1, base + 2, base + 3, base + 4, base + 5};
        dg_graph_set_layer(g, l);
        mtp_inputs(g, c, d, io);
        int e = dg_embedding(g, emb, io->mtp_tokens[d]);
        if (c->hidden_dropout > 0) e = dg_dropout(g, e, key, c->hidden_dropout, base);
        int x = mtp_combine(g, c, pre, e, h);
        x = dg_model_layer(g, c, tl, l, x, key, &s, lo);
        if (l < DG_MODEL_MAX_TRACKED) {
            io->tokens_per_expert[l] = lo->counts;
            io->expert_bias[l] = lo->bias;
        }
        dg_graph_set_layer(g, l);
        dg_graph_set_module(g, DG_MODULE_LAYERNORM);
        h = dg_model_norm(g, c, pre, "final_layernorm", x);
        dg_graph_set_module(g, DG_MODULE_NONE);
        int logits = dg_linear(g, h, wout);
        io->mtp_loss[d] = dg_softmax_xent(g, logits, io->mtp_targets[d], io->mtp_loss_mask[d], NULL);
        int term = dg_scale(g, io->mtp_loss[d], c->mtp_loss_scaling_factor / D);
        sum = sum < 0 ? term : dg_add(g, sum, term);
        dg_graph_set_layer(g, -1);
    }
    return g->status == DG_OK ? sum : -1;
}
