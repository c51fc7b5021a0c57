/* dg_cuda_probe.cu — device discovery, versions, and one small kernel. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <string.h>

extern "C" {
#include "dg_cuda.h"
#include "dg_cuda_check.h"
}

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

extern "C" int dg_cuda_info_get(int device, dg_cuda_info *info, dg_err *err) {
    memset(info, 0, sizeof *info);
    int n = 0;
    DG_TRY(dg_cuda_device_count(&n, err));
    if (device < 0 || device >= n)
        return dg_err_set(err, DG_EINPUT, "CUDA backend: device %d does not exist (%d found)", device, n);
    cudaDeviceProp p;
    DG_CUDA_TRY(cudaGetDeviceProperties(&p, device));
    snprintf(info->name, sizeof info->name, "%s", p.name);
    info->cc_major = p.major;
    info->cc_minor = p.minor;
    info->sm_count = p.multiProcessorCount;
    info->mem_bytes = p.totalGlobalMem;
    DG_CUDA_TRY(cudaDriverGetVersion(&info->driver_version));
    DG_CUDA_TRY(cudaRuntimeGetVersion(&info->runtime_version));
    DG_CUBLAS_TRY(cublasGetProperty(MAJOR_VERSION, &info->cublas_version));
    int minor = 0, patch = 0;
    DG_CUBLAS_TRY(cublasGetProperty(MINOR_VERSION, &minor));
    DG_CUBLAS_TRY(cublasGetProperty(PATCH_LEVEL, &patch));
    info->cublas_version = info->cublas_version * 10000 + minor * 100 + patch;
    DG_NCCL_TRY(ncclGetVersion(&info->nccl_version));
    return DG_OK;
}

extern "C" int dg_cuda_axpy(float a, const float *x, float *y, int n, dg_err *err) {
    int devices = 0;
    DG_TRY(dg_cuda_device_count(&devices, err));
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
