/* dg_op_basic.h — element-wise and reduction ops: the builder calls.
 *
 * All take and return tensor ids in g, and return -1 after a builder error
 * (g->status, g->err). Inputs are f32.
 */
#ifndef DG_OP_BASIC_H
#define DG_OP_BASIC_H

#include "dg_op.h"

extern const dg_op_def dg_op_add;   /* y = a + b, same shapes */
extern const dg_op_def dg_op_mul;   /* y = a * b, same shapes */
extern const dg_op_def dg_op_scale; /* y = f[0] * x */
extern const dg_op_def dg_op_fill;  /* y = f[0]; no inputs; i[0] = ndim, i[1..4] = shape */
extern const dg_op_def dg_op_sum;   /* y = sum(x), a scalar; i[0] = 1 for mean */

int dg_add(dg_graph *g, int a, int b);
int dg_mul(dg_graph *g, int a, int b);
int dg_scale(dg_graph *g, int x, double alpha);
int dg_fill(dg_graph *g, int ndim, const int64_t *shape, double value);
int dg_sum(dg_graph *g, int x);
int dg_mean(dg_graph *g, int x);
/* Broadcast a scalar to a shape, times alpha: the adjoint of sum/mean. */
int dg_broadcast_scalar(dg_graph *g, int scalar, int ndim, const int64_t *shape, double alpha);
extern const dg_op_def dg_op_broadcast_scalar; /* y[shape] = f[0] * x[0]; i[0]=ndim, i[1..4]=shape */

/* What autodiff needs from ops/ (see dg_autodiff.h). */
struct dg_autodiff_ops;
const struct dg_autodiff_ops *dg_ops_autodiff(void);

#endif /* DG_OP_BASIC_H */
