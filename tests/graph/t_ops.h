/* t_ops.h — small test-only ops for the graph tests, so graph/ can be tested
 * without ops/ (which is written concurrently and may not build).
 *
 *   t_matmul  [M,K] x [K,N] -> [M,N]; dtypes must agree
 *   t_add     a + b, same shape and dtype
 *   t_relu    elementwise, one input
 *   t_sum     1..4 inputs of one shape -> their sum (a variadic op)
 *   t_scale   x * alpha; attrs: i[0] "repeat", f[0] "alpha" (named attrs in dumps)
 *   t_loss    [M,N] -> f32 scalar (mean); adjoint broadcasts back with t_bcast
 *   t_fill    no inputs; i[0] ndim, i[1..4] shape, f[0] value (autodiff's seed)
 *   t_bcast   scalar -> the shape in i[0..4] like t_fill
 * t_add's adjoint passes the gradient to both inputs, so dg_autodiff can run
 * over graphs of t_add, t_loss and collectives.
 */
#ifndef T_OPS_H
#define T_OPS_H

#include "dg_graph.h"
#include "dg_op.h"

extern const dg_op_def t_op_matmul;
extern const dg_op_def t_op_add;
extern const dg_op_def t_op_relu;
extern const dg_op_def t_op_sum;
extern const dg_op_def t_op_scale;
extern const dg_op_def t_op_loss;
extern const dg_op_def t_op_fill;
extern const dg_op_def t_op_bcast;

/* Builder shorthands; each returns the output id or -1. */
int t_matmul(dg_graph *g, int a, int b, const char *name);
int t_add(dg_graph *g, int a, int b, const char *name);
int t_relu(dg_graph *g, int x, const char *name);
int t_scale(dg_graph *g, int x, double alpha, const char *name);
int t_loss(dg_graph *g, int x, const char *name);

/* A model-like graph for dump tests: n_layers x [matmul (column parallel),
 * relu, matmul (row parallel), all_reduce, residual add, scale], a loss,
 * then a hand-made backward (phase backward) of the same size with the
 * collectives' adjoints, and a tiny optimizer phase. About 25 nodes per
 * layer. Deterministic: the same arguments give the same graph. */
dg_graph *t_build_sample(int n_layers, int hidden, int tp);

#endif
