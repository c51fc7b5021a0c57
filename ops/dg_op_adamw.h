/* dg_op_adamw.h — the fused AdamW update (torch.optim.AdamW's formula, see
 * dg_cpu_adamw.h), an optimizer-phase op with no adjoint.
 *
 *   adamw(param, grad, m, v) -> (new_param, new_m, new_v), all one shape, f32
 *
 * Why new outputs instead of updating in place: graph tensors are SSA, each
 * written by exactly one node, which is what lets the verifier, the memory
 * planner and the dumps reason about lifetimes. The update therefore
 * produces fresh tensors; the executor / training loop aliases new_param,
 * new_m and new_v back onto param, m and v between steps (the kernel
 * allows its outputs to alias its inputs, so that may be done in place).
 *
 * Attributes (the training loop may rewrite lr and step in place before
 * each step; attrs are plain data):
 *   i[0] = step           t >= 1, the number of this update (bias correction)
 *   f[0] = lr
 *   f[1] = beta1
 *   f[2] = beta2
 *   f[3] = eps
 *   f[4] = weight_decay   decoupled: p *= 1 - lr * weight_decay
 * The builder stamps the node with DG_PHASE_OPTIMIZER.
 */
#ifndef DG_OP_ADAMW_H
#define DG_OP_ADAMW_H

#include "dg_cpu_adamw.h" /* dg_adamw_hparams */
#include "dg_op.h"

extern const dg_op_def dg_op_adamw;

/* Returns new_param's id; out (may be NULL) receives {new_param, new_m, new_v}. */
int dg_adamw(dg_graph *g, int param, int grad, int m, int v, const dg_adamw_hparams *h,
             int out[3]);

/* The hyper-parameters stored in an adamw node's attrs. */
dg_adamw_hparams dg_adamw_hparams_of(const dg_node *n);

#endif /* DG_OP_ADAMW_H */
