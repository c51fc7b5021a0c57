/* cmd_cuda.c — `dagatron cuda`: is the CUDA backend built, which GPU, which
 * driver and library versions. Without a usable GPU: the one-line reason,
 * exit 2. */
#include <stdio.h>

#include "dg_cli.h"
#include "dg_cuda.h"

/* 13000 -> "13.0" (CUDA's major*1000 + minor*10 encoding). */
static void cuda_version(int v, char *buf, size_t n) {
    snprintf(buf, n, "%d.%d", v / 1000, (v % 1000) / 10);
}

int dg_cmd_cuda(int argc, char **argv) {
    (void)argc;
    (void)argv;
    printf("CUDA backend compiled: %s\n", dg_cuda_compiled() ? "yes" : "no");
    int n = 0;
    dg_err err = {{0}};
    if (dg_cuda_device_count(&n, &err) != DG_OK) {
        dg_err_print(&err);
        return DG_EINPUT;
    }
    printf("CUDA devices: %d\n", n);
    for (int d = 0; d < n; d++) {
        dg_cuda_info in;
        int st = dg_cuda_info_get(d, &in, &err);
        if (st != DG_OK) {
            dg_err_print(&err);
            return st;
        }
        char drv[16], rt[16];
        cuda_version(in.driver_version, drv, sizeof drv);
        cuda_version(in.runtime_version, rt, sizeof rt);
        printf("device %d: %s, compute capability %d.%d, %d SMs, %.1f GiB\n", d, in.name,
               in.cc_major, in.cc_minor, in.sm_count, (double)in.mem_bytes / (1 << 30));
        if (d == 0)
            printf("driver (CUDA API) %s, runtime %s, cuBLAS %d.%d.%d, NCCL %d.%d.%d\n", drv, rt,
                   in.cublas_version / 10000, in.cublas_version / 100 % 100, in.cublas_version % 100,
                   in.nccl_version / 10000, in.nccl_version / 100 % 100, in.nccl_version % 100);
    }
    return 0;
}
