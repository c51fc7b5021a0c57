/* dg_op_attn_sink.h — a softmax sink folded into finished attention: what
 * CP's attention (its ring, or all-to-all) adds after the partial results
 * are merged, so the sink joins each row's denominator once, not once per
 * ring step (the fused attention op takes the sink itself: dg_op_attention.h).
 *
 *   attn_sink(o [B, S, H, D], lse [B, H, S] [, sink [H]]) -> o', lse'
 *       lse' = log(exp(lse) + exp(s_h)),  o' = o exp(lse - lse')
 *       with s_h the sink input (attrs i[0] = 2, learnable) or 0 (i[0] = 1,
 *       Megatron's off-by-one: no input). The rows' probabilities lose the
 *       sink's share p_s = exp(s_h - lse'); o, lse: attention's outputs.
 *   attn_sink_bwd(o', do', lse, lse' [, dlse'] [, sink]) -> do, dlse [, dsink]
 *       with g = do' . o' per row, e = 1 - p_s:
 *       do = do' e,  dlse = g p_s + dlse' e,  dsink_h = sum_rows p_s (dlse' - g)
 *       (dsink is a sum over this rank's rows: a sequence split over cp
 *       leaves a part per rank, which the data-parallel reduction over cp
 *       sums as every other gradient's). attrs i[0] as the forward's,
 *       i[1] = 1 when dlse' is given.
 * Sharding: batch, sequence and heads may be split, head dim not; lse and
 * the sink alike (the sink as the heads). */
#ifndef DG_OP_ATTN_SINK_H
#define DG_OP_ATTN_SINK_H

#include "dg_op.h"

extern const dg_op_def dg_op_attn_sink;
extern const dg_op_def dg_op_attn_sink_bwd;

/* o' (the returned id) and *lse_out = lse'; softmax: DG_ATTN_SOFTMAX_*
 * (off-by-one: sink -1; learnable: sink [H]). */
int dg_attn_sink(dg_graph *g, int o, int lse, int softmax, int sink, int *lse_out);

#endif /* DG_OP_ATTN_SINK_H */
