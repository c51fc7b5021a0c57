/* dg_op_shard.h — sharding rules of the dense ops (dg_op_def.shard; the
 * layouts and the shared rules are in graph/dg_layout.h).
 *
 *   matmul / linear   column parallel: x not split on K, w split on N (any
 *                     stride) -> y split on its last dim like w;
 *                     row parallel: x split on K and w split on K over the
 *                     same axis -> y partial(axis);
 *                     x's leading dims (batch, sequence) keep their split;
 *                     a partial x times a replicated w stays partial.
 *   swiglu            [gate; up] on the last dim: its split must be strided
 *                     by 2 (each rank holds its gate and up rows), the
 *                     output is split contiguously.
 *   gelu              any split, no partial sum.
 *   embedding         table split on the vocabulary (dim 0) -> output
 *                     partial over that axis (Megatron's vocab-parallel
 *                     embedding: masked lookups, summed by an all-reduce);
 *                     on the hidden dim -> output split on its last dim.
 *   attention         q, k, v alike, split by heads (dim 2) or batch; the
 *                     sequence cannot be split (CP lowers it to a ring) nor
 *                     the head dim.
 *   attn_scores,      unfused attention (dg_op_attn_unfused.h): batch or
 *   attn_context(_t), heads split, as attention's; the S x S scores and
 *   attn_softmax(_bwd) probabilities [B, H, S, S] split alike, never on
 *                     the S x S dims.
 *   rope              heads or batch split; sequence and head dim not.
 *   reshape           a split dim must lead the group of dims it merges
 *                     into or splits from (Hq*D <-> Hq, D); the attrs are
 *                     rewritten for the local shape (dim / mesh size).
 *   sum               of a tensor split over one axis -> partial(axis).
 *   softmax_xent      replicated logits (vocab-parallel cross entropy
 *                     is its lowering, dg_op_vocab.h, not a rule).
 * Norms use dg_shard_rowwise, add/mul dg_shard_elementwise, scale and
 * broadcast_scalar dg_shard_linear_unary; every other op the replicated
 * rule.
 */
#ifndef DG_OP_SHARD_H
#define DG_OP_SHARD_H

#include "dg_layout.h"

int dg_shard_matmul(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                    dg_attrs *attrs);
int dg_shard_swiglu(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                    dg_attrs *attrs);
int dg_shard_pointwise(const dg_graph *g, const dg_node *n, const dg_sharding *in,
                       dg_sharding *out, dg_attrs *attrs);
int dg_shard_embedding(const dg_graph *g, const dg_node *n, const dg_sharding *in,
                       dg_sharding *out, dg_attrs *attrs);
int dg_shard_attention(const dg_graph *g, const dg_node *n, const dg_sharding *in,
                       dg_sharding *out, dg_attrs *attrs);
int dg_shard_attention_sink_bwd(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                                dg_attrs *attrs);
int dg_shard_attn_scores(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                         dg_attrs *attrs);
int dg_shard_attn_context(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                          dg_attrs *attrs);
int dg_shard_attn_softmax(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                          dg_attrs *attrs);
int dg_shard_rope(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                  dg_attrs *attrs);
int dg_shard_reshape(const dg_graph *g, const dg_node *n, const dg_sharding *in,
                     dg_sharding *out, dg_attrs *attrs);
int dg_shard_sum(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                 dg_attrs *attrs);

#endif /* DG_OP_SHARD_H */
