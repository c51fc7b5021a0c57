/* dg_cuda_stub.c — the CUDA entry points in a build without CUDA sources:
 * every one reports that this build has no CUDA support. */
#include "dg_cuda.h"
#include "dg_cuda_device.h"
#include "dg_cuda_exec.h"
#include "dg_cuda_nccl.h"

#define DG_NO_CUDA "CUDA backend: this build has no CUDA support (configure with -DDG_CUDA=ON and nvcc installed)"

int dg_cuda_compiled(void) { return 0; }

int dg_cuda_device_count(int *count, dg_err *err) {
    *count = 0;
    return dg_err_set(err, DG_EINPUT, DG_NO_CUDA);
}

int dg_cuda_select_local(int *gpu, dg_err *err) {
    if (gpu) *gpu = -1;
    return dg_err_set(err, DG_EINPUT, DG_NO_CUDA);
}

int dg_cuda_info_get(int device, dg_cuda_info *info, dg_err *err) {
    (void)device; (void)info;
    return dg_err_set(err, DG_EINPUT, DG_NO_CUDA);
}

int dg_cuda_axpy(float a, const float *x, float *y, int n, dg_err *err) {
    (void)a; (void)x; (void)y; (void)n;
    return dg_err_set(err, DG_EINPUT, DG_NO_CUDA);
}

dg_kernel_fn dg_cuda_kernel_for(const dg_op_def *op) {
    (void)op;
    return NULL;
}

int dg_cuda_ctx_new(int device, dg_cuda_ctx **out, dg_err *err) {
    (void)device;
    *out = NULL;
    return dg_err_set(err, DG_EINPUT, DG_NO_CUDA);
}

void dg_cuda_ctx_free(dg_cuda_ctx *c) { (void)c; }

int dg_run_cuda(const dg_graph *g, const int *order, dg_buffers *b, dg_cuda_ctx *ctx,
                const dg_cuda_run_opts *o, dg_cuda_run_stats *stats, dg_err *err) {
    (void)g; (void)order; (void)b; (void)ctx; (void)o; (void)stats;
    return dg_err_set(err, DG_EINPUT, DG_NO_CUDA);
}

int dg_comm_nccl_new(dg_comm *mpi_group, void *mpi_comm, dg_comm **out, dg_err *err) {
    (void)mpi_group; (void)mpi_comm;
    *out = NULL;
    return dg_err_set(err, DG_EINPUT, DG_NO_CUDA);
}

int dg_cuda_run_node(dg_cuda_ctx *c, const dg_graph *g, const dg_node *n, void *const *in,
                     void *const *out, int poison, dg_err *err) {
    (void)c; (void)g; (void)n; (void)in; (void)out; (void)poison;
    return dg_err_set(err, DG_EINPUT, DG_NO_CUDA);
}

int dg_comm_is_nccl(const dg_comm *c) {
    (void)c;
    return 0;
}

void *dg_comm_nccl_bind_stream(dg_comm *c, void *stream) {
    (void)c; (void)stream;
    return NULL;
}

int dg_comm_nccl_check(dg_comm *c, dg_err *err) {
    (void)c;
    return dg_err_set(err, DG_EINPUT, DG_NO_CUDA);
}

dg_device *dg_cuda_device_new(int gpu, dg_err *err) {
    (void)gpu;
    dg_err_set(err, DG_EINPUT, DG_NO_CUDA);
    return NULL;
}
