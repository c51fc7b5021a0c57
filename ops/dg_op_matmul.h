/* dg_op_matmul.h — matrix multiply and the linear layer.
 *
 * matmul(a, b, ta, tb): a and b are viewed as 2-D, [rows, last dim] (all
 * leading dimensions folded into rows); C = op(a) @ op(b) where op
 * transposes when ta / tb is set. The output keeps a's leading dimensions
 * when a is not transposed and has more than 2 dims: x [B, S, K] @ w [K, N]
 * -> [B, S, N]. Otherwise it is [M, N].
 *   attrs.i[0] = ta, attrs.i[1] = tb
 *
 * linear(x, w) = x @ w^T with w [out_features, in_features], Megatron's
 * weight layout (ColumnParallelLinear splits dim 0 over tp).
 */
#ifndef DG_OP_MATMUL_H
#define DG_OP_MATMUL_H

#include "dg_op.h"

extern const dg_op_def dg_op_matmul;

int dg_matmul(dg_graph *g, int a, int b, int ta, int tb);
int dg_linear(dg_graph *g, int x, int w);

#endif /* DG_OP_MATMUL_H */
