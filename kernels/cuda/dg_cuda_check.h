/* dg_cuda_check.h — check macros for CUDA runtime, cuBLAS and NCCL calls.
 *
 * Each returns from the calling function with a one-line message naming the
 * call and file:line in `err` (which must be in scope), never exits: a
 * failing library call on the GPU is reported like any other dagatron
 * error. DG_EINTERNAL: these are not the user's fault, except "no device",
 * which dg_cuda_device_count reports as DG_EINPUT before any of these run.
 * C and CUDA C++ both include it.
 */
#ifndef DG_CUDA_CHECK_H
#define DG_CUDA_CHECK_H

#include "dg_base.h"

#define DG_CUDA_TRY(call)                                                                       \
    do {                                                                                        \
        cudaError_t dg_ce_ = (call);                                                            \
        if (dg_ce_ != cudaSuccess)                                                              \
            return dg_err_set(err, DG_EINTERNAL, "CUDA: %s failed at %s:%d: %s", #call,        \
                              __FILE__, __LINE__, cudaGetErrorString(dg_ce_));                  \
    } while (0)

#define DG_CUBLAS_TRY(call)                                                                     \
    do {                                                                                        \
        cublasStatus_t dg_bs_ = (call);                                                         \
        if (dg_bs_ != CUBLAS_STATUS_SUCCESS)                                                    \
            return dg_err_set(err, DG_EINTERNAL, "cuBLAS: %s failed at %s:%d: status %d", #call, \
                              __FILE__, __LINE__, (int)dg_bs_);                                 \
    } while (0)

#define DG_NCCL_TRY(call)                                                                       \
    do {                                                                                        \
        ncclResult_t dg_nr_ = (call);                                                           \
        if (dg_nr_ != ncclSuccess)                                                              \
            return dg_err_set(err, DG_EINTERNAL, "NCCL: %s failed at %s:%d: %s", #call,        \
                              __FILE__, __LINE__, ncclGetErrorString(dg_nr_));                  \
    } while (0)

#endif /* DG_CUDA_CHECK_H */
