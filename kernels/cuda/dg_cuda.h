/* dg_cuda.h — the CUDA backend's entry points, callable from C.
 *
 * The CUDA backend compiles and links against cudart (never libcuda). No
 * machine this project runs on has a GPU, so every entry point first asks
 * cudaGetDeviceCount and fails with a clear message when there is none.
 */
#ifndef DG_CUDA_H
#define DG_CUDA_H

#include "dg_base.h"

/* 1 when this build compiled the CUDA sources (DG_CUDA=ON or AUTO with nvcc). */
int dg_cuda_compiled(void);

/* Number of usable CUDA devices. Returns DG_OK with *count set, or DG_EINPUT
 * with err explaining why none can be used (no driver, no device, or a build
 * without CUDA). */
int dg_cuda_device_count(int *count, dg_err *err);

/* Element-wise y[i] += a * x[i] on the device, for n floats in host memory
 * (copies in and out). The smallest real kernel: proves the toolchain links. */
int dg_cuda_axpy(float a, const float *x, float *y, int n, dg_err *err);

#endif /* DG_CUDA_H */
