/* dg_cpu_norm.h — RMSNorm and LayerNorm over the last dimension, forward and
 * backward, on the CPU.
 *
 * Every tensor is viewed as [rows, H] (all leading dimensions folded into
 * rows). Definitions follow PyTorch / Megatron in fp32:
 *   rmsnorm:   y = x * rstd * w,              rstd = 1 / sqrt(mean(x^2) + eps)
 *   layernorm: y = (x - mean) * rstd * w + b, rstd = 1 / sqrt(var + eps),
 *              var biased (divided by H, as torch.nn.LayerNorm does)
 * Row statistics are accumulated in double, so they are at least as
 * accurate as PyTorch's float accumulation.
 *
 * Threading and determinism: forward and dx split rows over the team. The
 * weight gradients (dw, db) are sums over rows; they are split over
 * COLUMNS instead, and every column is accumulated over rows 0..rows-1 in
 * order, in double, so the result is bitwise the same for any thread count.
 *
 * The backward recomputes the row statistics from x (cheap: one pass over
 * the row) rather than taking them from the forward, which keeps the graph
 * to one saved tensor (x) and makes recompute trivial.
 */
#ifndef DG_CPU_NORM_H
#define DG_CPU_NORM_H

#include <stdint.h>

#include "dg_team.h"

/* x [rows, H], w [H] -> y [rows, H]; rstd [rows] receives 1/sqrt(ms + eps)
 * when not NULL. */
void dg_cpu_rmsnorm_fwd(const dg_team *team, const float *x, const float *w, float *y,
                        float *rstd, int64_t rows, int64_t H, float eps);

/* dy [rows, H], x [rows, H], w [H] -> dx [rows, H], dw [H].
 * Scratch: rstd_ws [rows] floats, acc_ws [H] doubles. dx or dw may be NULL
 * (not computed). */
void dg_cpu_rmsnorm_bwd(const dg_team *team, const float *dy, const float *x, const float *w,
                        float *dx, float *dw, int64_t rows, int64_t H, float eps,
                        float *rstd_ws, double *acc_ws);

/* x [rows, H], w [H], b [H] -> y [rows, H]; mean, rstd [rows] when not NULL. */
void dg_cpu_layernorm_fwd(const dg_team *team, const float *x, const float *w, const float *b,
                          float *y, float *mean, float *rstd, int64_t rows, int64_t H, float eps);

/* dy [rows, H], x [rows, H], w [H] -> dx [rows, H], dw [H], db [H].
 * Scratch: mean_ws [rows], rstd_ws [rows] floats, acc_ws [2 * H] doubles.
 * dx, dw or db may be NULL. */
void dg_cpu_layernorm_bwd(const dg_team *team, const float *dy, const float *x, const float *w,
                          float *dx, float *dw, float *db, int64_t rows, int64_t H, float eps,
                          float *mean_ws, float *rstd_ws, double *acc_ws);

#endif /* DG_CPU_NORM_H */
