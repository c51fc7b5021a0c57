/* dg_op_round16.h — rounding to a 16-bit float format, for mixed precision
 * emulated on fp32 arithmetic (--bf16, --fp16).
 *
 * "round16": y = x rounded to the nearest bf16 (i[0] = 0) or fp16
 * (i[0] = 1) value, ties to even, stored as f32. bf16 keeps fp32's range;
 * fp16 overflows to +-inf beyond 65504 and has subnormals down to 2^-24.
 * NaN stays NaN. A kernel that reads bf16 and computes in fp32 sees exactly
 * these values, so a graph whose tensors pass through round16 where a
 * 16-bit run stores them has that run's numerics.
 *
 * The adjoint: i[1] = 1 rounds the gradient too (an activation: a 16-bit
 * run's activation gradients are 16-bit); i[1] = 0 passes it through (a
 * parameter's 16-bit copy: its gradient accumulates in fp32, as Megatron's
 * main_grad).
 */
#ifndef DG_OP_ROUND16_H
#define DG_OP_ROUND16_H

#include "dg_op.h"

enum { DG_ROUND16_BF16 = 0, DG_ROUND16_FP16 = 1 };

extern const dg_op_def dg_op_round16;

/* "loss_scaling" (x, s): fp16's loss scale, s an f32 [1] input the trainer
 * sets each step. i[0] = k (+1 or -1), i[1] = 0: y = x, and the gradient
 * is multiplied by s^k (on the loss, k = +1 scales every gradient; on a
 * parameter's 16-bit copy, k = -1 unscales its fp32 gradient); i[1] = 1:
 * y = x * s^k (what those adjoints emit). */
extern const dg_op_def dg_op_loss_scaling;
int dg_loss_scaling(dg_graph *g, int x, int s, int k, int apply_forward);

/* x (f32) rounded to `format`; round_grad: see above. Returns the id or -1. */
int dg_round16(dg_graph *g, int x, int format, int round_grad);

/* The scalar rounding, dg_round_bf16 and dg_round_fp16 (exposed for tests;
 * shared with the CUDA kernel). */
#include "dg_cpu_round16.h"

#endif /* DG_OP_ROUND16_H */
