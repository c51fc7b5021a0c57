/* dg_op_act.h — activation ops (see dg_cpu_act.h for the math).
 *
 *   swiglu(x [..., 2F]) -> [..., F]   silu(x[..., :F]) * x[..., F:]
 *       Megatron's fused fc1 layout: gate first, up second.
 *   gelu_tanh(x) -> same shape        GeLU, tanh approximation (torch's
 *                                     F.gelu(x, approximate='tanh'))
 *
 * No attributes. Backward ops (with CPU kernels):
 *   swiglu_bwd(dy [..., F], x [..., 2F]) -> dx [..., 2F]
 *   gelu_tanh_bwd(dy, x) -> dx
 *
 * (The builder is dg_gelu_tanh, not dg_gelu: dg_cpu_math.h already has a
 * float dg_gelu, and op files include both.)
 */
#ifndef DG_OP_ACT_H
#define DG_OP_ACT_H

#include "dg_op.h"

extern const dg_op_def dg_op_swiglu;
extern const dg_op_def dg_op_swiglu_bwd;
extern const dg_op_def dg_op_gelu_tanh;
extern const dg_op_def dg_op_gelu_tanh_bwd;

int dg_swiglu(dg_graph *g, int x);
int dg_gelu_tanh(dg_graph *g, int x);

#endif /* DG_OP_ACT_H */
