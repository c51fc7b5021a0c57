/* dg_pass_precision.h — 16-bit mixed precision on fp32 arithmetic (--bf16,
 * --fp16), as a pass over the forward graph.
 *
 * A 16-bit Megatron run keeps fp32 master weights and fp32 gradient
 * accumulation (main_grad), and stores parameters' working copies and the
 * activations between kernels in 16 bits; kernels compute in fp32 inside
 * (GEMM accumulation, softmax, norms, the loss) and round their outputs.
 * This pass gives a graph those numerics: it re-emits the forward graph with
 * a `round` node (the round16 op, dg_op_round16.h) in front of each
 * floating-point input of every node, one per tensor:
 *   - a parameter read becomes its 16-bit copy, whose gradient passes
 *     through unrounded into the fp32 gradient;
 *   - an activation becomes its 16-bit value, and the gradient flowing back
 *     into it is rounded as a 16-bit run's is.
 * With a loss scale (fp16), see loss_scaling below. Scalars (the losses) stay fp32, and the router's logits (inputs of
 * moe_router and of the MoE losses) stay fp32 as with Megatron's
 * --moe-router-dtype fp32. Run it after the parallel passes and before
 * autodiff; the runtime stays fp32, so every backend runs the result.
 */
#ifndef DG_PASS_PRECISION_H
#define DG_PASS_PRECISION_H

#include "dg_op.h"

typedef struct dg_pass_precision_opts {
    int format;               /* round16's format: 0 bf16, 1 fp16 */
    const dg_op_def *round16; /* the rounding op (ops/dg_op_round16.h) */
    /* fp16 only: the loss scale. The pass adds an input "loss_scale" (f32
     * [1], the trainer sets it each step), scales the gradient at the loss
     * (tensor `loss` of src) by it and unscales each parameter's gradient
     * as it leaves the 16-bit copy, so gradients between are the scaled
     * ones a 16-bit run rounds (and overflows). NULL: no loss scale. */
    const dg_op_def *loss_scaling;
    int loss;
} dg_pass_precision_opts;

/* Re-emit src into *out (new graph) with the rounding nodes; tmap[t] gets
 * each src tensor's id in *out. Returns DG_OK or an error. */
int dg_pass_precision(const dg_graph *src, const dg_pass_precision_opts *o, dg_graph **out, int *tmap,
                      dg_err *err);

#endif /* DG_PASS_PRECISION_H */
