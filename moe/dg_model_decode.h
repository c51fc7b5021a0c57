/* dg_model_decode.h — the Mixtral-style decoder (dg_model.h) lowered into a
 * decoding-step graph with a KV cache, for `dagatron generate`.
 *
 * One graph runs L new tokens per sequence on top of what the caches hold:
 * L = the prompt length once (the prefill), then L = 1 per generated token.
 * The math is dg_model_build_forward's, node for node, with the same
 * parameter names, so a training checkpoint loads unchanged; only the
 * attention differs:
 *
 *   training:  q, k, v = linear(x); rope(q), rope(k) at 0 .. S-1;
 *              causal attention(q, k, v)
 *   decoding:  q, k, v = linear(x); rope_at(q), rope_at(k) at pos .. pos+L-1;
 *              k_cache' = kv_append(k_cache, k, pos), v_cache' likewise;
 *              kv_attention(q, k_cache', v_cache', pos)
 *
 * Positions are an input tensor (i32 [B]), not an attribute, so one graph
 * per L serves every step. The caches are per layer: a leaf input (the
 * state before the step) and the kv_append output (after it); the caller
 * binds both to one buffer so the append is in place (see dg_op_kv.h for
 * why this keeps the graph single-assignment and the verifier content).
 * dg_decoder (train/dg_generate.h) does so on the serial executor. An executor
 * that plans the output into its arena (dg_sched) still computes the right
 * values, the kernel then copying the cache, but the caller must copy
 * k_out / v_out back to k_in / v_in between steps.
 *
 * Two deliberate differences from the training graph:
 *  - no targets, no losses (cross entropy, aux and z losses are training
 *    signals); the output is the logits;
 *  - routing is dropless whatever --moe-expert-capacity-factor says:
 *    capacity is computed over the tokens of one batch, so with it a
 *    token's experts would depend on which other tokens share its step,
 *    and a cached decode (T = B tokens) could not reproduce a full forward
 *    (T = B * S). Dropless routing is per token, identical in both.
 */
#ifndef DG_MODEL_DECODE_H
#define DG_MODEL_DECODE_H

#include "dg_graph.h"
#include "dg_model.h"

typedef struct dg_decode_shape {
    int batch;      /* B: sequences decoded together */
    int new_tokens; /* L: tokens fed per sequence this step (>= 1) */
    int max_len;    /* Smax: cache length, the longest prompt + continuation */
    int all_logits; /* 1: logits for all L tokens; 0: for the last one only */
} dg_decode_shape;

/* Tensor ids of a decode-step graph. */
typedef struct dg_decode_io {
    int tokens; /* input i32 [B, L] */
    int pos;    /* input i32 [B]: position of tokens[b, 0] (tokens already cached) */
    int logits; /* f32 [B, L, V], or [B, 1, V] without all_logits */
    int n_layers;
    /* Per layer, [B, Smax, Hkv, D]: the cache the step reads (a leaf,
     * role input) and the one it leaves (the kv_append output). Arrays of
     * n_layers entries, owned by the io (dg_decode_io_free). */
    int *k_in, *v_in, *k_out, *v_out;
} dg_decode_io;

void dg_decode_io_free(dg_decode_io *io);

/* Build the decode-step graph into g (empty), run the verifier on it, and
 * fill *io. Returns DG_OK, or DG_EINPUT with err naming the bad setting. */
int dg_model_build_decode(dg_graph *g, const dg_model_config *c, const dg_decode_shape *s,
                          dg_decode_io *io, dg_err *err);

#endif /* DG_MODEL_DECODE_H */
