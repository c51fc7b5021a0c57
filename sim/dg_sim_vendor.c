/* dg_sim_vendor.c — the vendor device profiles of `dagatron simulate`
 * (`--device-profile a100|a100-40gb|a100-80gb|h100|h200`): a GPU's published
 * peak figures and memory, its DGX
 * node's links, and the fractions of those peaks kernels reach.
 *
 * Every number has its source beside it (and in docs/simulate_published.md);
 * none is fitted to the published MFU the simulator is checked against
 * (sim/dg_sim_published.c). Peaks are datasheet figures; efficiencies are
 * kernel benchmarks or a stated, reasoned assumption. The profiles model a
 * 16-bit (--bf16) run: tensor-core peaks for GEMMs and attention, CUDA-core
 * arithmetic for everything else. */
#include <stdio.h>
#include <string.h>

#include "dg_sim.h"

/* Link efficiencies (assumption, both parts): NCCL's ring collectives reach
 * about 80% of NVLink's one-direction peak inside a DGX (nccl-tests bus
 * bandwidth ~230-240 GB/s of 300 on A100) and ~90% of an InfiniBand NIC's
 * line rate between nodes (GPUDirect RDMA, one NIC per GPU). */
#define NVLINK_EFF 0.80
#define IB_EFF 0.90
/* NCCL's own cost model (src/graph/tuning.cc, Ring / Simple protocol):
 * hwLat 3.4 us per ring step on NVLink, 9.6 us over the network, and a
 * baseLat of 8.4 us per collective. */
#define NVLINK_USEC 3.4
#define IB_USEC 9.6
#define NCCL_BASE_S 8.4e-6
/* Memory-bound kernels (assumption): streaming kernels reach 80-90% of HBM
 * bandwidth (copy/triad); norms, element-wise ops, the optimizer's
 * read-modify-write sit at the lower end: 0.80 of the datasheet figure. */
#define MEM_EFF 0.80
/* Per kernel (assumption): launches are queued ahead of the GPU by the host,
 * so what a task costs beyond its work is the gap between dependent kernels
 * on one stream, ~2 us. */
#define TASK_S 2e-6

typedef struct vendor {
    const char *name, *source;
    double mem;               /* HBM capacity, bytes: the datasheet's GB (10^9 bytes) */
    double bf16, fp32, hbm;   /* dense bf16 tensor-core FLOP/s, fp32 CUDA-core FLOP/s, HBM bytes/s */
    double gemm, attn;        /* fractions of the bf16 peak */
    double nvlink_gbps, ib_gbps; /* one direction per GPU, datasheet */
} vendor;

static const vendor VENDORS[] = {
    /* A100 SXM4 80GB datasheet: bf16 312 TFLOPS dense (624 sparse), fp32
     * 19.5 TFLOPS, HBM2e 2,039 GB/s, NVLink 3 600 GB/s both directions.
     * DGX A100: 8 GPUs, 8 x ConnectX-6 HDR 200 Gb/s (25 GB/s per GPU).
     * GEMM: maximum achievable matmul FLOPS, A100 SXM bf16 267.9 of 312 =
     * 0.859 (stas00/ml-engineering, mamf-finder). Attention: FlashAttention-2
     * (Dao 2023) forward + backward ~190-200 TFLOPS at head dim 128, seq 2k:
     * 0.62. */
    {"a100",
     "A100 SXM4 80GB / DGX A100: datasheet peaks; GEMM 0.86 (MAMF), attention 0.62 (FlashAttention-2), "
     "NVLink 3 + 8x HDR IB; docs/simulate_published.md",
     80e9, 312e12, 19.5e12, 2039e9, 0.86, 0.62, 300.0, 25.0},
    {"a100-80gb",
     "A100 SXM4 80GB / DGX A100: datasheet peaks; GEMM 0.86 (MAMF), attention 0.62 (FlashAttention-2), "
     "NVLink 3 + 8x HDR IB; docs/simulate_published.md",
     80e9, 312e12, 19.5e12, 2039e9, 0.86, 0.62, 300.0, 25.0},
    /* A100 SXM4 40GB datasheet: the same peaks, HBM2 40 GB at 1,555 GB/s. */
    {"a100-40gb",
     "A100 SXM4 40GB / DGX A100: datasheet peaks (HBM2 40 GB, 1,555 GB/s); kernel efficiencies as a100; "
     "docs/simulate.md",
     40e9, 312e12, 19.5e12, 1555e9, 0.86, 0.62, 300.0, 25.0},
    /* H100 SXM5 80GB datasheet: bf16 1,979 TFLOPS sparse = 989.4 dense, fp32
     * 67 TFLOPS, HBM3 3.35 TB/s, NVLink 4 900 GB/s both directions. DGX
     * H100: 8 GPUs, 8 x ConnectX-7 NDR 400 Gb/s (50 GB/s per GPU). GEMM:
     * MAMF H100 SXM bf16 792.1 of 989 = 0.801. Attention: FlashAttention-3
     * (Shah et al. 2024) forward up to 740 TFLOPS (75%), backward slower:
     * forward + backward ~0.55. */
    {"h100",
     "H100 SXM5 80GB / DGX H100: datasheet peaks; GEMM 0.80 (MAMF), attention 0.55 (FlashAttention-3), "
     "NVLink 4 + 8x NDR IB; docs/simulate_published.md",
     80e9, 989.4e12, 67e12, 3350e9, 0.80, 0.55, 450.0, 50.0},
    /* H200 SXM datasheet: the H100's Hopper SM (bf16 989.4 TFLOPS dense,
     * fp32 67 TFLOPS) with 141 GB of HBM3e at 4.8 TB/s; NVLink 4 900 GB/s
     * both directions. DGX H200: 8 x ConnectX-7 NDR 400 Gb/s. The kernel
     * efficiencies are the H100's (assumption: the same SM and kernels). */
    {"h200",
     "H200 SXM 141GB / DGX H200: datasheet peaks (HBM3e 141 GB, 4.8 TB/s); kernel efficiencies as h100; "
     "docs/simulate.md",
     141e9, 989.4e12, 67e12, 4800e9, 0.80, 0.55, 450.0, 50.0},
};

static void fill(const vendor *v, dg_sim_device *d) {
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "%s", v->name);
    snprintf(d->source, sizeof d->source, "%s", v->source);
    /* fp32 runs' matmuls would use TF32 tensor cores; these profiles are for
     * 16-bit runs, so peak_fp32 is the CUDA cores' figure. */
    d->peak_fp32 = v->fp32;
    d->peak_16 = v->bf16;
    d->mem_bytes_per_s = v->hbm;
    d->task_s = TASK_S;
    d->comm_task_s = NCCL_BASE_S;
    /* Arithmetic of non-GEMM kinds runs on CUDA cores: its share of the
     * tensor-core peak (they are memory-bound anyway). */
    double cuda_cores = v->fp32 / v->bf16;
    for (int k = 0; k < DG_SIM_KIND_COUNT; k++) {
        d->eff[k] = cuda_cores;
        d->mem_eff[k] = MEM_EFF;
    }
    d->eff[DG_SIM_GEMM] = v->gemm;
    d->eff[DG_SIM_ATTENTION] = v->attn;
    d->intra = (dg_link){v->nvlink_gbps * NVLINK_EFF, NVLINK_USEC};
    d->inter = (dg_link){v->ib_gbps * IB_EFF, IB_USEC};
    d->devices_per_node = 8;
    /* a GPU keeps 16-bit tensors as such: no rounding kernels, 2-byte
     * activations and collectives under --bf16 (dg_sim_device.native16) */
    d->native16 = 1;
    d->mem_capacity_bytes = v->mem;
}

int dg_sim_device_vendor(const char *name, dg_sim_device *out) {
    for (size_t i = 0; name && i < sizeof VENDORS / sizeof VENDORS[0]; i++)
        if (!strcmp(VENDORS[i].name, name)) {
            fill(&VENDORS[i], out);
            return 1;
        }
    return 0;
}
