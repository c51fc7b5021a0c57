/* dg_cpu_gemm.c — row-split sgemm over a team (see dg_cpu_gemm.h). */
#include "dg_cpu_gemm.h"

#include <cblas.h>

void dg_cpu_init(void) { openblas_set_num_threads(1); }

typedef struct gemm_args {
    int ta, tb;
    int64_t M, N, K, block;
    float alpha, beta;
    const float *A, *B;
    int64_t lda, ldb, ldc;
    float *C;
} gemm_args;

int64_t dg_cpu_gemm_row_block(int64_t M) {
    /* About 8 blocks (enough to balance up to 8 threads), each a multiple of
     * 16 rows, between 32 and 512 rows: large enough that re-packing B per
     * call stays cheap, and a function of M only. */
    int64_t b = ((M + 7) / 8 + 15) / 16 * 16;
    return b < 32 ? 32 : b > 512 ? 512 : b;
}

/* Why fixed blocks: OpenBLAS may pick a different kernel path (and so a
 * different rounding) for a 32-row call than for a 64-row one, so splitting
 * M evenly over the threads would make C depend on the thread count. C is
 * instead always computed as the same sequence of fixed-height
 * calls, and threads only take turns over those blocks. The block height
 * depends on M alone (dg_cpu_gemm_row_block). */
static void gemm_blocks(void *p, int64_t b0, int64_t b1) {
    const gemm_args *a = p;
    for (int64_t b = b0; b < b1; b++) {
        int64_t m0 = b * a->block;
        int64_t m1 = m0 + a->block < a->M ? m0 + a->block : a->M;
        /* Row m of op(A) starts at A + m*lda, or at column m (A + m) when A
         * is stored transposed. */
        const float *A = a->ta ? a->A + m0 : a->A + m0 * a->lda;
        cblas_sgemm(CblasRowMajor, a->ta ? CblasTrans : CblasNoTrans,
                    a->tb ? CblasTrans : CblasNoTrans, (int)(m1 - m0), (int)a->N, (int)a->K,
                    a->alpha, A, (int)a->lda, a->B, (int)a->ldb, a->beta, a->C + m0 * a->ldc,
                    (int)a->ldc);
    }
}

void dg_cpu_sgemm(const dg_team *team, int ta, int tb, int64_t M, int64_t N, int64_t K,
                  float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
                  float beta, float *C, int64_t ldc) {
    if (M <= 0 || N <= 0) return;
    int64_t block = dg_cpu_gemm_row_block(M);
    gemm_args a = {ta, tb, M, N, K, block, alpha, beta, A, B, lda, ldb, ldc, C};
    dg_team_run(team, (M + block - 1) / block, gemm_blocks, &a);
}
