/* dg_cpu_gemm.h — dense matrix multiply on the CPU through OpenBLAS.
 *
 * OpenBLAS is called single-threaded: the scheduler owns the cores and hands
 * this kernel a dg_team. C is computed as blocks of dg_cpu_gemm_row_block(M)
 * rows, one cblas_sgemm call each, dealt to the team's threads. The blocks
 * (and so every call's shape) do not depend on the thread count, and the K
 * loop is never split, so C is bitwise the same for any number of threads.
 */
#ifndef DG_CPU_GEMM_H
#define DG_CPU_GEMM_H

#include <stdint.h>

#include "dg_team.h"

/* Rows of C per cblas_sgemm call: a function of M only. */
int64_t dg_cpu_gemm_row_block(int64_t M);

/* Make OpenBLAS single-threaded. Call once before running kernels. */
void dg_cpu_init(void);

/* C = alpha * op(A) @ op(B) + beta * C, row-major.
 *   op(A): [M, K]  (A stored [M, K] with lda, or [K, M] when ta)
 *   op(B): [K, N]  (B stored [K, N] with ldb, or [N, K] when tb)
 *   C:     [M, N]  with ldc */
void dg_cpu_sgemm(const dg_team *team, int ta, int tb, int64_t M, int64_t N, int64_t K,
                  float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
                  float beta, float *C, int64_t ldc);

#endif /* DG_CPU_GEMM_H */
