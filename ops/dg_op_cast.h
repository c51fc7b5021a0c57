/* dg_op_cast.h — the two ops of mixed precision (--bf16, --fp16).
 *
 * "cast": y = x in another floating dtype (i[0] = a dg_dtype: DG_F32,
 * DG_BF16 or DG_F16), rounded to nearest, ties to even
 * (kernels/cpu/dg_cpu_half.h). The dtype pass (dg_pass_precision.h) casts
 * each f32 parameter to its 16-bit working copy; the adjoint casts the
 * gradient back to x's dtype, so a parameter's gradient arrives and
 * accumulates in f32 (Megatron's main_grad).
 */
#ifndef DG_OP_CAST_H
#define DG_OP_CAST_H

#include "dg_op.h"

extern const dg_op_def dg_op_cast;

/* x cast to dtype. Returns the id or -1. */
int dg_cast(dg_graph *g, int x, dg_dtype dtype);

/* "loss_scaling" (x, s): fp16's loss scale, s an f32 [1] input the trainer
 * sets each step. i[0] = k (+1 or -1), i[1] = 0: y = x, and the gradient
 * is multiplied by s^k (on the loss, k = +1 scales every gradient; on a
 * parameter, before its cast to fp16, k = -1 unscales its f32 gradient);
 * i[1] = 1: y = x * s^k (what those adjoints emit). */
extern const dg_op_def dg_op_loss_scaling;
int dg_loss_scaling(dg_graph *g, int x, int s, int k, int apply_forward);

#endif /* DG_OP_CAST_H */
