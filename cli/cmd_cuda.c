/* cmd_cuda.c — `dagatron cuda`: is the CUDA backend built, is a GPU usable. */
#include <stdio.h>

#include "dg_cli.h"
#include "dg_cuda.h"

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
    return 0;
}
