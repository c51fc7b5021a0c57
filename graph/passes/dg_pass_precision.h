/* dg_pass_precision.h — the dtype pass: 16-bit mixed precision (--bf16,
 * --fp16) as Megatron runs it.
 *
 * A 16-bit Megatron run keeps f32 main parameters, optimizer state and
 * gradient accumulation (main_grad), and stores the parameters' working
 * copies and the activations in 16 bits; kernels compute in f32 inside
 * (GEMM accumulation, norms, softmax, the loss). This pass re-emits the
 * forward graph with a cast (dg_op_cast.h) from each f32 parameter to its
 * 16-bit working copy in front of the nodes that read it. The storage rule
 * of dg_op_infer (dg_op.h) does the rest: everything computed from a 16-bit
 * tensor is stored in 16 bits, forward and backward, except the outputs an
 * op keeps in f32 (norm and softmax statistics, losses, router
 * probabilities) and scalars; a parameter's gradient comes back through its
 * cast's adjoint in f32. The memory planner sizes every tensor by its dtype.
 * With a loss scale (fp16), see loss_scaling below. Run it after the
 * parallel passes that split parameters (tp, cp, ep) and before autodiff.
 */
#ifndef DG_PASS_PRECISION_H
#define DG_PASS_PRECISION_H

#include "dg_op.h"

typedef struct dg_pass_precision_opts {
    dg_dtype dtype;            /* DG_BF16 or DG_F16 */
    const dg_op_def *cast;     /* the cast op (ops/dg_op_cast.h) */
    /* fp16 only: the loss scale. The pass adds an input "loss_scale" (f32
     * [1], the trainer sets it each step), scales the gradient at the loss
     * (tensor `loss` of src) by it and unscales each parameter's gradient
     * as it leaves the 16-bit copy, so gradients between are the scaled
     * ones a 16-bit run stores (and overflows). NULL: no loss scale. */
    const dg_op_def *loss_scaling;
    int loss;
} dg_pass_precision_opts;

/* Re-emit src into *out (new graph) with the casts; tmap[t] gets each src
 * tensor's id in *out. Returns DG_OK or an error. */
int dg_pass_precision(const dg_graph *src, const dg_pass_precision_opts *o, dg_graph **out, int *tmap,
                      dg_err *err);

#endif /* DG_PASS_PRECISION_H */
