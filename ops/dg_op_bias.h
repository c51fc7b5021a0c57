/* dg_op_bias.h — adding a parameter vector along the rows: a linear layer's
 * bias and a learned absolute position embedding (dg_cpu_bias.h for the math).
 *
 *   bias_add(x [..., N], b [N]) -> [..., N]      x + b on every row
 *   pos_embed_add(x [B, S, H], table [P, H]) -> [B, S, H]
 *       x[b, s] + table[s] for s < S <= P (Megatron's learned absolute
 *       position embedding with position ids 0..S-1)
 *
 *   pos_embed_add_at(x [B, L, H], table [P, H], pos i32 [B]) -> [B, L, H]
 *       x[b, l] + table[pos[b] + l]: a decoding step's positions (forward
 *       only); a position past P fails the kernel with DG_EINPUT.
 *
 * Backward ops (with CPU kernels):
 *   bias_grad(dy [..., N]) -> db [N]             sum over the rows
 *   pos_embed_grad(dy [B, S, H]) -> dtable [P, H]  sum over the batch, zero
 *       rows past S;  attrs i[0] = P
 * Both sums run in row order per column: bitwise the same for any thread
 * count.
 *
 * Sharding: bias_add takes x split on its last dim with b split alike (a
 * column-parallel bias), or x split on leading dims with b replicated; a
 * partial-sum x cannot take a bias (the row-parallel linear's all-reduce
 * comes first, as in Megatron's RowParallelLinear). pos_embed_add takes a
 * replicated table and x split on the batch only.
 */
#ifndef DG_OP_BIAS_H
#define DG_OP_BIAS_H
#include "dg_op.h"
extern const dg_op_def dg_op_bias_add;
extern const dg_op_def dg_op_bias_grad;
extern const dg_op_def dg_op_pos_embed_add;
extern const dg_op_def dg_op_pos_embed_grad;
int dg_bias_add(dg_graph *g, int x, int b);
extern const dg_op_def dg_op_pos_embed_add_at;
int dg_pos_embed_add(dg_graph *g, int x, int table);
int dg_pos_embed_add_at(dg_graph *g, int x, int table, int pos);
#endif /* DG_OP_BIAS_H */
