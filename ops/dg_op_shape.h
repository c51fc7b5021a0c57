/* dg_op_shape.h — ops that change a tensor's shape, not its values.
 *
 *   reshape(x, ndim, shape) -> x's elements, row-major, viewed as `shape`
 *
 * The element count must not change. One dimension may be given as -1: it
 * is inferred from the others (like torch.reshape). Used to go between the
 * [B, S, heads * head_dim] of a linear layer and the [B, S, heads, head_dim]
 * attention and rope work on.
 *
 * Attributes: i[0] = ndim, i[1 .. 4] = the new shape (as given, -1 kept).
 * The kernel copies (graph tensors own their buffers); a later memory-plan
 * pass may alias the output to the input instead. The adjoint reshapes the
 * gradient back to x's shape.
 */
#ifndef DG_OP_SHAPE_H
#define DG_OP_SHAPE_H

#include "dg_op.h"

extern const dg_op_def dg_op_reshape;

int dg_reshape(dg_graph *g, int x, int ndim, const int64_t *shape);

#endif /* DG_OP_SHAPE_H */
