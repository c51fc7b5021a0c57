/* dg_op_attention.h — fused causal self-attention with grouped-query heads.
 *
 * attention(q, k, v) -> o, lse
 *   q   [B, S, Hq, D]     (heads interleaved per token, as the QKV linear
 *   k   [B, S, Hkv, D]     writes them: no transpose before attention)
 *   v   [B, S, Hkv, D]     Hq % Hkv == 0: Hkv == Hq is MHA, 1 < Hkv < Hq
 *                          GQA (query head h uses kv head h / (Hq/Hkv)),
 *                          Hkv == 1 MQA
 *   o   [B, S, Hq, D]      softmax(scale q k^T + causal mask) v, per head
 *   lse [B, Hq, S]         log-sum-exp of each query row's scaled scores;
 *                          saved for the backward, and what ring attention
 *                          (CP) needs to merge partial results
 *   sink [Hq]          (only with softmax 2) each head's learnable sink logit
 * attrs: i[0] = causal (1: query i sees keys j <= i; 0: all keys)
 *        f[0] = scale (> 0; dg_attention() puts 1/sqrt(D) for scale <= 0)
 *        i[1] = window (0: unbounded; W > 0, causal only: query i sees keys
 *               i - W < j <= i; Megatron's --window-size L,0 is W = L + 1)
 *        i[2] = softmax (DG_ATTN_SOFTMAX_*: 0 vanilla; 1 off-by-one, a zero
 *               logit with no value in every row's denominator; 2 learnable,
 *               that logit per head from the sink input). lse includes it.
 *        f[1] = dropout p on the probabilities (0: none), i[3] = its site
 *               (the model's number for this dropout); with p > 0 the last
 *               input is the attention key (i32 [5], dg_op_attn_key.h): the
 *               mask is the counter-based draw of dg_cpu_attention.h
 *               (dg_attn_drop) at each probability's global (sample, head,
 *               query, key), recomputed by the backward; the unfused
 *               chain's dropout draws the same one. Outside training none.
 * Kernel: flash-style, O(S) memory (kernels/cpu/dg_cpu_attention.h).
 * Cost: the matmul FLOPs, 4 D per visible (query, key) pair: 4 B Hq S^2 D,
 * or 4 B Hq S (S+1)/2 D when causal (fewer in a window: attn_pairs).
 *
 * attention_bwd(q, k, v, o, do, lse [, key] [, dlse]) -> dq, dk, dv
 *   The adjoint of attention; dlse (the gradient of lse, [B, Hq, S]) is
 *   optional. Same attrs as the forward node. Not differentiable again.
 *   A sink needs nothing here: P = exp(s - lse) with the sink in lse.
 *
 * attention_sink_bwd(o, do, lse, sink [, dlse]) -> dsink [Hq]
 *   The learnable sink's gradient, -sum over rows of p_sink (dO . O - dlse)
 *   (kernels/cpu/dg_cpu_attention.h); TP splits it by heads with the sink.
 *   Cost: the FLOPs it runs, 14 D per visible pair (3.5x the forward): 7 tile
 *   products, since dQ is a separate pass that recomputes P and dP so that
 *   results do not depend on the thread count.
 */
#ifndef DG_OP_ATTENTION_H
#define DG_OP_ATTENTION_H

#include "dg_op.h"

extern const dg_op_def dg_op_attention;
extern const dg_op_def dg_op_attention_bwd;
extern const dg_op_def dg_op_attention_sink_bwd;

/* attrs.i[2] of attention */
enum { DG_ATTN_SOFTMAX_VANILLA = 0, DG_ATTN_SOFTMAX_OFF_BY_ONE = 1, DG_ATTN_SOFTMAX_LEARNABLE = 2 };

/* Every variant: causal, scale (<= 0: 1/sqrt(D)), window, softmax (and
 * the sink tensor for DG_ATTN_SOFTMAX_LEARNABLE, else -1), dropout p with
 * the attention key tensor and the site (key -1 when p is 0). */
typedef struct dg_attn_opts {
    int causal;
    double scale;
    int64_t window;
    int softmax, sink;
    double dropout;
    int key, site;
} dg_attn_opts;

int dg_attention_opt(dg_graph *g, int q, int k, int v, const dg_attn_opts *o, int *lse_out);

/* Causal attention. Returns o's id (or -1 after a builder error) and, if
 * lse_out is not NULL, writes lse's id there. scale <= 0 means 1/sqrt(D). */
int dg_attention(dg_graph *g, int q, int k, int v, double scale, int *lse_out);

/* The same with causal chosen (0: every query sees every key). */
int dg_attention_ex(dg_graph *g, int q, int k, int v, int causal, double scale, int *lse_out);

/* The attention variants: a window of `window` keys (0: unbounded) and a
 * softmax DG_ATTN_SOFTMAX_*; sink is the [Hq] logits tensor with
 * DG_ATTN_SOFTMAX_LEARNABLE, ignored (pass -1) otherwise. */
int dg_attention_var(dg_graph *g, int q, int k, int v, int causal, double scale, int64_t window, int softmax,
                     int sink, int *lse_out);

#endif /* DG_OP_ATTENTION_H */
