/* dg_op_norm.h — RMSNorm and LayerNorm over the last dimension.
 *
 *   rmsnorm(x [..., H], w [H], eps)      = x / sqrt(mean(x^2) + eps) * w
 *   layernorm(x [..., H], w [H], b [H], eps)
 *                                        = (x - mean) / sqrt(var + eps) * w + b
 *     (var biased, as torch.nn.LayerNorm)
 *
 * Attributes: f[0] = eps (both ops and their backward ops).
 *
 * Backward ops (emitted by the adjoints; ops with CPU kernels of their own):
 *   rmsnorm_bwd(dy, x, w)   -> (dx, dw)
 *   layernorm_bwd(dy, x, w) -> (dx, dw, db)
 * They recompute the row statistics from x instead of saving them, so the
 * forward has a single output. dw and db are sums over rows, accumulated in
 * a fixed order (see dg_cpu_norm.h): bitwise the same for any thread count.
 */
#ifndef DG_OP_NORM_H
#define DG_OP_NORM_H

#include "dg_op.h"

extern const dg_op_def dg_op_rmsnorm;
extern const dg_op_def dg_op_rmsnorm_bwd;
extern const dg_op_def dg_op_layernorm;
extern const dg_op_def dg_op_layernorm_bwd;

int dg_rmsnorm(dg_graph *g, int x, int w, double eps);
int dg_layernorm(dg_graph *g, int x, int w, int b, double eps);

#endif /* DG_OP_NORM_H */
