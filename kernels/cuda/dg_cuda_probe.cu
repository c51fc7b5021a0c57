/* dg_cuda_probe.cu — device discovery and one small kernel for the CUDA
 * backend. Links against cudart only; the driver is loaded by cudart at run
 * time, and its absence is reported, not crashed on. */
#include <cuda_runtime.h>

extern "C" {
#include "dg_cuda.h"
}

/* Report a failed CUDA runtime call with file:line through err. */
#define DG_CUDA_TRY(call)                                                          \
    do {                                                                           \
        cudaError_t e_ = (call);                                                   \
        if (e_ != cudaSuccess)                                                     \
            return dg_err_set(err, DG_EINPUT, "CUDA backend: %s failed at %s:%d: %s", \
                              #call, __FILE__, __LINE__, cudaGetErrorString(e_));  \
    } while (0)

/* y[i] += a * x[i]; x, y: [n] device floats. */
__global__ static void dg_axpy_kernel(float a, const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += a * x[i];
}

extern "C" int dg_cuda_compiled(void) { return 1; }

extern "C" int dg_cuda_device_count(int *count, dg_err *err) {
    *count = 0;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess)
        return dg_err_set(err, DG_EINPUT, "CUDA backend: no usable GPU (cudaGetDeviceCount: %s)",
                          cudaGetErrorString(e));
    if (n == 0) return dg_err_set(err, DG_EINPUT, "CUDA backend: no CUDA device found");
    *count = n;
    return DG_OK;
}

extern "C" int dg_cuda_axpy(float a, const float *x, float *y, int n, dg_err *err) {
    int devices = 0;
    int st = dg_cuda_device_count(&devices, err);
    if (st != DG_OK) return st;
    float *dx = NULL, *dy = NULL;
    size_t bytes = (size_t)n * sizeof(float);
    DG_CUDA_TRY(cudaMalloc(&dx, bytes));
    DG_CUDA_TRY(cudaMalloc(&dy, bytes));
    DG_CUDA_TRY(cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice));
    DG_CUDA_TRY(cudaMemcpy(dy, y, bytes, cudaMemcpyHostToDevice));
    dg_axpy_kernel<<<(n + 255) / 256, 256>>>(a, dx, dy, n);
    DG_CUDA_TRY(cudaGetLastError());
    DG_CUDA_TRY(cudaMemcpy(y, dy, bytes, cudaMemcpyDeviceToHost));
    DG_CUDA_TRY(cudaFree(dx));
    DG_CUDA_TRY(cudaFree(dy));
    return DG_OK;
}
