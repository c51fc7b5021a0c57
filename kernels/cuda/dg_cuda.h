/* dg_cuda.h — the CUDA backend's entry points, callable from C.
 *
 * The backend (the .cu and .c files of kernels/cuda) links cudart, cuBLAS, cuBLASLt and
 * NCCL, never libcuda: cudart loads the driver at run time, so a machine
 * without a GPU or driver gets a one-line reason instead of a crash. A build
 * without nvcc links dg_cuda_stub.c instead, where every entry point says so.
 * The rest of the backend: dg_cuda_exec.h (kernel table, device executor,
 * single-node runs), dg_cuda_device.h (the device runtime's CUDA device) and
 * dg_cuda_nccl.h (the NCCL comm backend).
 */
#ifndef DG_CUDA_H
#define DG_CUDA_H

#include "dg_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when this build compiled the CUDA sources (DG_CUDA=ON or AUTO with nvcc). */
int dg_cuda_compiled(void);

/* Number of usable CUDA devices. Returns DG_OK with *count >= 1, or
 * DG_EINPUT with err explaining why none can be used (no driver, no device,
 * or a build without CUDA). */
int dg_cuda_device_count(int *count, dg_err *err);

/* Select this rank's GPU (its local rank, as the launcher names it, modulo
 * the device count) for the calling thread; *gpu receives it (may be NULL).
 * DG_EINPUT when no GPU is usable. NCCL's bootstrap needs it first. */
int dg_cuda_select_local(int *gpu, dg_err *err);

/* What `dagatron cuda` reports about one device and the libraries. */
typedef struct dg_cuda_info {
    char name[256];
    int cc_major, cc_minor;  /* compute capability */
    int sm_count;
    size_t mem_bytes;
    int driver_version;      /* cudaDriverGetVersion, e.g. 13000 */
    int runtime_version;     /* cudaRuntimeGetVersion */
    int cublas_version;      /* cublasGetVersion: major*10000 + minor*100 + patch (CUDA 12+) */
    int nccl_version;        /* ncclGetVersion */
} dg_cuda_info;

/* Fill info for `device`. Returns DG_OK or DG_EINPUT (no usable device). */
int dg_cuda_info_get(int device, dg_cuda_info *info, dg_err *err);

/* Element-wise y[i] += a * x[i] on the device, for n floats in host memory
 * (copies in and out). The smallest real kernel: proves the toolchain links. */
int dg_cuda_axpy(float a, const float *x, float *y, int n, dg_err *err);

#ifdef __cplusplus
}
#endif

#endif /* DG_CUDA_H */
