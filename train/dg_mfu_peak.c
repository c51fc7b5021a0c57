/* dg_mfu_peak.c — the peak MFU is measured against (see the header). */
#include "dg_mfu_peak.h"

#include <stdio.h>
#include <string.h>

#include "dg_cuda.h"
#include "dg_flops.h"

/* Dense peaks (no sparsity) from NVIDIA's datasheets. fp32 is the CUDA
 * cores' FMA rate: SMs x 128 lanes x 2 x boost clock (H100 SXM: 132 x 128 x
 * 2 x 1.98 GHz = 66.9 TFLOP/s). A row with a name part matches only names
 * containing it, so it goes before the row of the same chip without one. */
typedef struct gpu_row {
    int cc_major, cc_minor, sms;
    const char *name_part; /* NULL: any name */
    const char *label;
    double fp32, half;     /* FLOP/s */
} gpu_row;

static const gpu_row GPUS[] = {
    /* H100 NVL / H200 NVL: 132 SMs at lower clocks; bf16 1,671 sparse */
    {9, 0, 132, "NVL", "H100/H200 NVL", 60.0e12, 835.5e12},
    /* H100 SXM5 (bf16 1,979 sparse); H200 SXM is the same GH100 die and clocks */
    {9, 0, 132, NULL, "H100 SXM / H200", 66.9e12, 989.4e12},
    /* H100 PCIe: 114 SMs (bf16 1,513 sparse) */
    {9, 0, 114, NULL, "H100 PCIe", 51.2e12, 756.5e12},
    /* A100 SXM4 / PCIe: 108 SMs (bf16 624 sparse) */
    {8, 0, 108, NULL, "A100", 19.5e12, 312.0e12},
};

double dg_gpu_dense_peak(const char *name, int cc_major, int cc_minor, int sm_count, int half, const char **label) {
    for (size_t i = 0; i < sizeof GPUS / sizeof GPUS[0]; i++) {
        const gpu_row *r = &GPUS[i];
        if (r->cc_major != cc_major || r->cc_minor != cc_minor || r->sms != sm_count) continue;
        if (r->name_part && (!name || !strstr(name, r->name_part))) continue;
        if (label) *label = r->label;
        return half ? r->half : r->fp32;
    }
    if (label) *label = NULL;
    return 0.0;
}

static void gpu_peak(const dg_train_config *c, dg_mfu_peak *p) {
    int half = c->compat.bf16 || c->compat.fp16;
    const char *dtype = c->compat.bf16 ? "bf16 (tensor cores)" : c->compat.fp16 ? "fp16 (tensor cores)"
                                                                                : "fp32 (CUDA cores, no TF32)";
    dg_cuda_info info;
    dg_err err = {{0}};
    /* the node's first GPU: a node's GPUs are one kind */
    if (dg_cuda_info_get(0, &info, &err) != DG_OK) {
        snprintf(p->what, sizeof p->what, "no peak (MFU not reported): %.200s", err.msg);
        return;
    }
    const char *label;
    p->flops = dg_gpu_dense_peak(info.name, info.cc_major, info.cc_minor, info.sm_count, half, &label);
    if (p->flops > 0)
        snprintf(p->what, sizeof p->what, "%.96s (sm_%d%d, %d SMs): dense %s peak %.1f TFLOP/s (%s datasheet)",
                 info.name, info.cc_major, info.cc_minor, info.sm_count, dtype, p->flops / 1e12, label);
    else
        snprintf(p->what, sizeof p->what, "no dense %s peak known for %.96s (sm_%d%d, %d SMs): MFU not reported",
                 dtype, info.name, info.cc_major, info.cc_minor, info.sm_count);
}

void dg_mfu_peak_of(const dg_train_config *c, int threads, dg_mfu_peak *p) {
    memset(p, 0, sizeof *p);
    if (!strcmp(c->device, "cuda")) {
        gpu_peak(c, p);
        return;
    }
    double one = dg_measure_sgemm_peak();
    p->flops = one * threads;
    snprintf(p->what, sizeof p->what, "%d compute threads x sgemm peak %.1f GFLOP/s (measured)", threads, one / 1e9);
}
