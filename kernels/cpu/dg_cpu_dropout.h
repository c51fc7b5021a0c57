/* dg_cpu_dropout.h — dropout with a counter-based mask.
 *
 * Element i of sample s keeps its value (times 1 / (1 - p)) unless
 *     u = dg_dropout_u(key, salt, s, i) < p,
 * where u in [0, 1) is a hash of the run's seed, the iteration, the sample's
 * global index, the dropout site (salt) and the element's index within the
 * sample. Nothing is stored: the backward recomputes the same mask, any
 * thread count draws the same numbers, and a sample gets the same mask
 * whichever rank or micro-batch holds it.
 *
 * key (the graph's "rng_key" input, i32 [4]): seed, iteration, global index
 * of the micro-batch's first sample, and 1 while training (0: identity, as
 * Megatron's model.eval()).
 * x, y: [samples, per_sample]; y may alias x. dropout_bwd is the same map on dy.
 */
#ifndef DG_CPU_DROPOUT_H
#define DG_CPU_DROPOUT_H

#include <math.h>
#include <stdint.h>

#include "dg_base.h"
#include "dg_team.h"

#ifndef DG_HD
#define DG_HD
#endif

/* The mask's arithmetic, shared with the CUDA kernel (DG_HD there) so both
 * draw the same bits. The stream: the seed and iteration (key[0], key[1]),
 * then the site (salt), mixed. */
static inline DG_HD uint64_t dg_dropout_stream(const int32_t *key, int64_t salt) {
    uint64_t st = ((uint64_t)(uint32_t)key[0] << 32) | (uint32_t)key[1];
    uint64_t stream = dg_splitmix64(&st);
    st = stream ^ (uint64_t)salt;
    return dg_splitmix64(&st);
}

/* Keep an element when the top 32 bits of its hash are >= this. */
static inline DG_HD uint32_t dg_dropout_threshold(double p) {
    return (uint32_t)(p * 4294967296.0 < 4294967295.0 ? p * 4294967296.0 : 4294967295.0);
}

static inline DG_HD float dg_dropout_scale(double p) { return (float)(1.0 / (1.0 - p)); }

/* The 64 random bits of element elem of sample `sample` (a global index):
 * splitmix64's finaliser of (stream, sample, elem). */
static inline DG_HD uint64_t dg_dropout_bits(uint64_t stream, uint64_t sample, uint64_t elem) {
    uint64_t s = stream ^ (sample * 0xD1B54A32D192ED03ull) ^ (elem * 0x9E3779B97F4A7C15ull);
    return dg_splitmix64(&s);
}

/* That element: x * scale, or 0 when dropped (the bits' top 32 < threshold). */
static inline DG_HD float dg_dropout1(uint64_t stream, uint64_t sample, uint64_t elem, uint32_t threshold,
                                      float scale, float x) {
    uint32_t u = (uint32_t)(dg_dropout_bits(stream, sample, elem) >> 32);
    return u >= threshold ? x * scale : 0.0f;
}

/* What the counter-based op draws per element (ops/dg_op_dropout.h's kind):
 *   DROPOUT  x / (1 - p), or 0 with probability p
 *   JITTER   x * u, u uniform in [1 - p, 1 + p) (the MoE router's input
 *            jitter, --moe-input-jitter-eps p)
 *   NORMAL   a standard normal draw, whatever x is (the router's random
 *            logits, --moe-router-force-load-balancing), by Box-Muller on
 *            the bits' two halves */
typedef enum dg_noise_kind { DG_NOISE_DROPOUT = 0, DG_NOISE_JITTER = 1, DG_NOISE_NORMAL = 2 } dg_noise_kind;
#define DG_NOISE_KINDS 3

static inline DG_HD float dg_noise1(int kind, uint64_t stream, uint64_t sample, uint64_t elem, uint32_t threshold,
                                    float scale, float p, float x) {
    if (kind == DG_NOISE_DROPOUT) return dg_dropout1(stream, sample, elem, threshold, scale, x);
    uint64_t bits = dg_dropout_bits(stream, sample, elem);
    if (kind == DG_NOISE_JITTER) {
        float u = (float)(uint32_t)(bits >> 40) * (1.0f / 16777216.0f); /* 24 bits: exact in [0, 1) */
        return x * ((1.0f - p) + 2.0f * p * u);
    }
    double u1 = ((double)(uint32_t)(bits >> 32) + 1.0) / 4294967296.0; /* (0, 1]: the log is finite */
    double u2 = (double)(uint32_t)bits / 4294967296.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

void dg_cpu_dropout(const dg_team *team, const float *x, float *y, const int32_t *key, int64_t salt,
                    double p, int64_t samples, int64_t per_sample);

/* The same over a slice of each sample: x's row r holds elements
 * elem_offset .. elem_offset + per_sample - 1 of sample r (SP's sequence
 * split: a rank's tokens are one run of each sample), which draw the
 * whole sample's mask there. */
void dg_cpu_dropout_at(const dg_team *team, const float *x, float *y, const int32_t *key, int64_t salt,
                       double p, int64_t samples, int64_t per_sample, int64_t elem_offset);

/* dg_cpu_dropout_at with any kind's draw (dg_noise_kind). Outside training
 * (key[3] 0) dropout and jitter are the identity; the normal draw is not
 * (Megatron's random router logits are drawn in evaluation too). */
void dg_cpu_noise_at(const dg_team *team, int kind, const float *x, float *y, const int32_t *key, int64_t salt,
                     double p, int64_t samples, int64_t per_sample, int64_t elem_offset);

#endif /* DG_CPU_DROPOUT_H */
