/* dg_cuda_stub.c — the CUDA entry points in a build without CUDA sources. */
#include "dg_cuda.h"

int dg_cuda_compiled(void) { return 0; }

int dg_cuda_device_count(int *count, dg_err *err) {
    *count = 0;
    return dg_err_set(err, DG_EINPUT,
                      "CUDA backend: this build has no CUDA support (configure with -DDG_CUDA=ON and nvcc installed)");
}

int dg_cuda_axpy(float a, const float *x, float *y, int n, dg_err *err) {
    (void)a; (void)x; (void)y; (void)n;
    return dg_err_set(err, DG_EINPUT, "CUDA backend: this build has no CUDA support");
}
