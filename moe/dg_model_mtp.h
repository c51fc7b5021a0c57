/* dg_model_mtp.h — multi-token prediction (--mtp-num-layers), DeepSeek-V3's
 * sequential MTP modules as Megatron-Core's MultiTokenPredictionBlock builds
 * them (Liu et al. 2024, arXiv:2412.19437, section 2.2).
 *
 * Module d (0-based; it predicts the token d + 2 ahead) reads the hidden
 * state h_d [B, S, H] before it (h_0: the decoder's output after its final
 * norm) and the embedding of the input tokens shifted d + 1 to the left:
 *
 *   e   = word_embedding(mtp_tokens_{d+1})            (+ hidden dropout)
 *   x   = eh_proj([enorm(e), hnorm(h_d)])             [H, 2H], no bias
 *   x   = transformer layer (the last decoder layer's kind: MoE or dense)
 *   h_{d+1} = final_layernorm(x)
 *   loss_d = masked mean cross entropy of h_{d+1} W_out^T against the
 *            targets shifted d + 1 (the shared embedding and output head)
 *
 * Parameters "mtp.layers.<d>.{enorm,hnorm,eh_proj,final_layernorm}.weight"
 * and "mtp.layers.<d>.transformer_layer.<the layer's names>", as Megatron's
 * state dict. The shifted inputs (dg_model_io.mtp_*) are fed by the trainer
 * from the global sample, so every layout (CP's chunks, SP's slices) reads
 * what one rank's roll_tensor makes: zeros past the sequence's end, masked.
 *
 * The modules' nodes are stamped with layers num_layers + d: the PP pass
 * puts them on the last stage, as Megatron does (the word embedding is then
 * read on the first and the last stage, whose gradients the pass sums);
 * recompute's layer choices leave them out.
 *
 * The step's loss gains mtp_loss_scaling_factor / D x sum_d loss_d (D
 * modules): Megatron's MTPLossAutoScaler gives the hidden state that
 * gradient per micro-batch, the main loss's weight, under
 * --calculate-per-token-loss too (there it rescales by the shifted token
 * count, which comes to the same weight with an all-ones mask). An MoE
 * module's aux and z losses join the decoder's.
 */
#ifndef DG_MODEL_MTP_H
#define DG_MODEL_MTP_H

#include "dg_model.h"

/* The check of the MTP settings (part of dg_model_config_check). */
int dg_model_mtp_check(const dg_model_config *c, dg_err *err);

/* Build the MTP modules after the decoder: h its output after the final
 * norm [B, S, H], emb the word embedding, wout the output weight (emb
 * when tied), key the "rng_key" input or -1. Fills io's mtp_* and the MTP
 * layers' tokens_per_expert / expert_bias; adds MoE losses to lo. Returns
 * the weighted sum of the modules' losses (a f32 scalar), or -1 on error
 * (g->status says which). */
int dg_model_mtp(dg_graph *g, const dg_model_config *c, int h, int emb, int wout, int key, dg_model_io *io,
                 dg_model_layer_io *lo);

#endif /* DG_MODEL_MTP_H */
