/* dg_cpu_xent.h — fused softmax cross-entropy with a loss mask, Megatron's
 * masked mean:
 *
 *   lse[i]  = log(sum_j exp(logits[i, j]))         (max-subtracted)
 *   ce[i]   = lse[i] - logits[i, targets[i]]
 *   loss    = sum_i(mask[i] * ce[i]) / sum_i(mask[i])
 *   dlogits = (softmax(logits[i]) - onehot(targets[i])) * mask[i] / sum(mask) * dloss
 *
 * logits [N, V], targets [N] int32, mask [N] float (NULL: all ones).
 * Rows whose mask is exactly 0 are skipped: their target is never read (so
 * it may be a padding id such as -100) and their dlogits row is 0. A
 * target outside [0, V) on any other row is an input error (DG_EINPUT).
 * When sum(mask) is 0 the loss and all gradients are 0 (PyTorch would give
 * NaN; a step with no loss tokens then simply does nothing).
 *
 * Threading and determinism: per-row work (lse, dlogits) splits rows over
 * the team; the two sums over rows run on the calling thread in row order,
 * in double, so the loss is bitwise the same for any thread count.
 */
#ifndef DG_CPU_XENT_H
#define DG_CPU_XENT_H

#include <math.h>
#include <stdint.h>

#include "dg_team.h"

#ifndef DG_HD
#define DG_HD
#endif

/* logits [N, V], targets [N], mask [N] or NULL -> loss [1], lse [N].
 * Returns DG_OK, or DG_EINPUT for a bad target (*bad_row = its row when
 * bad_row is not NULL). */
int dg_cpu_xent_fwd(const dg_team *team, const float *logits, const int32_t *targets,
                    const float *mask, float *loss, float *lse, int64_t N, int64_t V,
                    int64_t *bad_row);

/* logits [N, V], targets [N], mask [N] or NULL, lse [N] (from the forward),
 * dloss (the loss gradient) -> dlogits [N, V]. Same status as the forward. */
int dg_cpu_xent_bwd(const dg_team *team, const float *logits, const int32_t *targets,
                    const float *mask, const float *lse, float dloss, float *dlogits, int64_t N,
                    int64_t V, int64_t *bad_row);

/* ---- vocab-parallel (Megatron's vocab_parallel_cross_entropy) -------------
 * This rank holds columns [lo, lo + vl) of the V-wide logits as logits
 * [N, vl]; the whole logits are never formed on one rank.
 *
 *   stats:   per row this slice's logsumexp and the target's logit (0 when
 *            another rank holds it): stats [N, 2].
 *   combine: the tp group's stats gathered rank-major, stats [P, N, 2] ->
 *            lse [N] = max-shifted logsumexp of the P partial ones, tl [N]
 *            = the target logits' sum (one rank contributes), summed in
 *            rank order so every rank gets the same bits.
 *   loss:    sum(mask * (lse - tl)) / sum(mask), as dg_cpu_xent_fwd.
 *   bwd:     dg_cpu_xent_bwd on the slice: softmax minus the one-hot of a
 *            target inside it; no communication.
 * Targets are checked against the whole vocab V (DG_EINPUT as above). */
void dg_cpu_vocab_xent_stats(const dg_team *team, const float *logits, const int32_t *targets,
                             float *stats, int64_t N, int64_t vl, int64_t lo);
void dg_cpu_vocab_xent_combine(const float *stats, int64_t P, int64_t N, float *lse, float *tl);

/* Row r of the combine (shared with the CUDA kernel): the P ranks' stats
 * in rank order. */
static inline DG_HD void dg_vocab_xent_combine_row(const float *stats, int64_t P, int64_t N, int64_t r, float *lse,
                                                   float *tl) {
    float mx = -INFINITY, t = 0.0f;
    for (int64_t p = 0; p < P; p++) mx = fmaxf(mx, stats[(p * N + r) * 2]);
    double s = 0;
    for (int64_t p = 0; p < P; p++) {
        s += expf(stats[(p * N + r) * 2] - mx);
        t += stats[(p * N + r) * 2 + 1]; /* one rank holds it, the others add 0 */
    }
    *lse = mx + (float)log(s);
    *tl = t;
}
int dg_cpu_vocab_xent_loss(const int32_t *targets, const float *mask, const float *lse, const float *tl,
                           float *loss, int64_t N, int64_t V, int64_t *bad_row);
int dg_cpu_vocab_xent_bwd(const dg_team *team, const float *logits, const int32_t *targets,
                          const float *mask, const float *lse, float dloss, float *dlogits, int64_t N,
                          int64_t vl, int64_t lo, int64_t V, int64_t *bad_row);

#endif /* DG_CPU_XENT_H */
