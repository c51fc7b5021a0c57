/* dg_op_optim.h — the optimizer's ops: the gradient norm, clipping with the
 * NaN/inf skip, AdamW over a parameter's (owned slice of its) bucket, and
 * the copies around the parameter all-gather. graph/passes/dg_pass_optim.h
 * puts them into the step graph (phase DG_PHASE_OPTIMIZER); none has an
 * adjoint. Math in kernels/cpu/dg_cpu_adamw.h.
 *
 *   optim_sumsq(x0 .. x7 f32)  -> f64 [1]: sum over the inputs, in input
 *          order, of (x * scale)^2 (dg_cpu_sumsq: the same bits for any
 *          thread count). f[0] = scale.
 *   optim_sum(x0 .. x7 f64)    -> f64 [1]: sum of every element, in input
 *          and index order (the partial sums of a group, or the per-rank
 *          values of an all-gather, added in rank order so that every rank
 *          gets the same bits).
 *   optim_clip(sumsq f64 [1], hparams f64 [3]) -> status f64 [3]:
 *          {norm = sqrt(sumsq), clip coefficient, ok}. The coefficient is
 *          Megatron's clip_grad_norm_fp32: max_norm / (norm + 1e-6) when
 *          that is below 1 (f[0] = max_norm, --clip-grad; <= 0: no clipping),
 *          else 1. ok = 1 when the norm is finite and hparams' `apply` is
 *          nonzero: the NaN/inf skip (and evaluation steps, which run the
 *          training graph with apply = 0).
 *   optim_adamw(grad, target, m, v, status, hparams, group_rank[, after])
 *          -> done i32 [1]: AdamW (dg_cpu_adamw_scaled) on one parameter's
 *          elements [p0, p0 + numel) of its bucket, restricted to this
 *          rank's shard [r shard, (r + 1) shard) (r = group_rank[axis], 0
 *          when axis is DG_AXIS_NONE); with lr and step from hparams, the
 *          gradient scaled by f[0] and by the status' clip coefficient,
 *          nothing done unless status' ok. done = 1 if it updated, else 0.
 *          Updates target, m and v IN PLACE (see below).
 *            i[0] p0          the parameter's first element in the bucket
 *            i[1] numel       its elements
 *            i[2] shard       elements per rank (m, v are [shard])
 *            i[3] axis        the dg_axis whose group rank picks the shard
 *            i[4] grad_shard  1: grad is the bucket shard [shard]; 0: the
 *                             parameter's own gradient [numel]
 *            i[5] target_shard 1: target is the master shard [shard]; 0:
 *                             the parameter itself [numel]
 *            f[0] grad_scale (1 / data shards), f[1] beta1, f[2] beta2,
 *            f[3] eps, f[4] weight_decay
 *          `after` (optional, any dtype) only orders: a token of the node
 *          that must run first.
 *   optim_commit(master f32 [shard], after0 .. after6) -> f32 [shard]: a
 *          copy of master once the `after` tokens exist (the updated master
 *          weights, for the all-gather that follows).
 *   optim_param_store(src f32 [n], param f32, [after]) -> done i32 [1]:
 *          param = src[i[0] .. i[0] + numel(param)), IN PLACE.
 *
 *   hparams f64 [3] = {lr, step (>= 1, bias correction), apply} and status
 *   are laid out as dg_pass_optim.h's DG_OPTIM_* say; group_rank i32
 *   [DG_AXIS_COUNT] = this rank's index in each axis's group.
 *
 * In place. Optimizer state (master weights, moments) and parameters carry
 * over from one step to the next, so an update must write the buffers the
 * next step reads. Graph tensors are single-assignment, and these leaves
 * (roles PARAMETER and OPTIMIZER: persistent buffers that no node
 * produces) are the exception the optimizer makes: optim_adamw and
 * optim_param_store write their inputs. That is sound when every other
 * reader of such a leaf runs before the write, which dg_pass_optim()
 * checks (each reader must be an ancestor of the clip node, which every
 * update waits for), and when no two writers touch one element at a time
 * (the nodes of one bucket are chained by their `done` tokens).
 */
#ifndef DG_OP_OPTIM_H
#define DG_OP_OPTIM_H

#include "dg_op.h"
#include "dg_pass_optim.h"

extern const dg_op_def dg_op_optim_sumsq;
extern const dg_op_def dg_op_optim_sum;
extern const dg_op_def dg_op_optim_clip;
extern const dg_op_def dg_op_optim_adamw;
extern const dg_op_def dg_op_optim_commit;
extern const dg_op_def dg_op_optim_param_store;

/* The six, as dg_pass_optim() takes them (graph/ calls no op itself). */
dg_optim_ops dg_optim_ops_get(void);

#endif /* DG_OP_OPTIM_H */
