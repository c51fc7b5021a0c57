/* dg_close.h — when a device's fp32 output counts as the CPU's (used by
 * test_cuda_ops; its own test, test_cuda_close, runs without a GPU).
 *
 * got and want: n floats. They match when NaNs sit at the same places and
 *   ||got - want||_2 <= norm_tol ||want||_2                 (norm-wise)
 *   |got[i] - want[i]| <= elem_tol max(|want[i]|, rms(want)) (each element)
 *
 * Why norm-wise: cuBLAS and the CUDA kernels sum in other orders than
 * OpenBLAS and the CPU kernels (tiles, split-K, warp reductions), and an
 * element that is a sum of K terms differs by up to about K u sum|terms|
 * (u = 6e-8), which is unbounded relative to the element itself where the
 * terms cancel: on an H200 single elements of attention_bwd's outputs were
 * off by 3.3e-5 of the rms, and a gradient through the whole device graph
 * by 1.1e-4, on tolerance only. Rounding errors in different orders are
 * nearly independent, so over a tensor they add up as sqrt(K) u, far below
 * norm_tol; a wrong kernel (a missed term, a bad index, a race) moves the
 * norm by far more. The element-wise bound, 30 to 100 times the worst
 * rounding seen, still catches an error confined to a few elements of a
 * large tensor, which the norm would dilute.
 *
 * Returns 1 when they match; else 0, with the first failed check written to
 * why (why_len bytes). */
#ifndef DG_CLOSE_H
#define DG_CLOSE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

static inline int dg_close_f32(const float *got, const float *want, int64_t n, double norm_tol,
                               double elem_tol, char *why, size_t why_len) {
    double ss = 0, dd = 0;
    int64_t finite = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(got[i]) != isnan(want[i])) {
            snprintf(why, why_len, "[%lld]: got %.9g, want %.9g", (long long)i, got[i], want[i]);
            return 0;
        }
        if (isnan(want[i])) continue;
        double d = (double)got[i] - want[i];
        ss += (double)want[i] * want[i];
        dd += d * d;
        finite++;
    }
    if (!(sqrt(dd) <= norm_tol * sqrt(ss))) {
        snprintf(why, why_len, "||got - want|| / ||want|| = %.3g, expected <= %.1g",
                 ss > 0 ? sqrt(dd / ss) : sqrt(dd), norm_tol);
        return 0;
    }
    double rms = finite ? sqrt(ss / (double)finite) : 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(want[i])) continue;
        double ref = fmax(fabs(want[i]), rms), d = fabs((double)got[i] - want[i]);
        if (!(d <= elem_tol * ref)) {
            snprintf(why, why_len, "[%lld]: got %.9g, want %.9g (rel %.3g, expected <= %.1g)", (long long)i,
                     got[i], want[i], d / (ref > 0 ? ref : 1), elem_tol);
            return 0;
        }
    }
    return 1;
}

#endif
