/* dg_sim_profiles.c — see dg_sim_profiles.h. The sources of every number are
 * listed beside it and in docs/simulate.md; none is fitted to the published
 * MFU the simulator is compared against. */
#include "dg_sim_profiles.h"

#include <stdio.h>
#include <string.h>

#include "dg_graph.h"

/* Link efficiencies (a stated assumption, the same for both parts): NCCL's
 * ring collectives reach about 80% of NVLink's one-direction peak within a
 * DGX (nccl-tests bus bandwidth ~230-240 GB/s of 300 on A100) and about 90%
 * of an InfiniBand NIC's line rate between nodes (GPUDirect RDMA, one NIC
 * per GPU). */
#define NVLINK_EFF 0.80
#define IB_EFF 0.90
/* Per-step ring latency of NCCL's own cost model (src/graph/tuning.cc,
 * hwLat, Ring / Simple protocol): 3.4 us on NVLink, 9.6 us over the network. */
#define NVLINK_USEC 3.4
#define IB_USEC 9.6

static const dg_sim_gpu_spec SPECS[] = {
    {
        .name = "a100",
        .desc = "NVIDIA A100 SXM4 80GB, DGX A100 node: 8 GPUs on NVLink 3, 8 x HDR 200 Gb/s InfiniBand",
        /* A100 datasheet: bf16 tensor core 312 TFLOPS dense (624 with
         * sparsity), fp32 19.5 TFLOPS, HBM2e 2,039 GB/s (80GB SXM). */
        .bf16_flops = 312e12,
        .fp32_flops = 19.5e12,
        .hbm_bytes_s = 2039e9,
        .hbm_bytes = 80e9,
        /* Maximum achievable matmul FLOPS (stas00/ml-engineering, mamf-finder):
         * A100 SXM bf16 267.9 TFLOPS of 312 = 85.9%. */
        .gemm_eff = 0.86,
        /* FlashAttention-2 (Dao 2023): forward + backward at head dim 128,
         * seq 2k reaches about 190-200 TFLOPS on A100, ~62% of peak. */
        .attn_eff = 0.62,
        /* Assumption: streaming kernels reach ~80% of HBM bandwidth
         * (BabelStream-style copy/triad on A100: ~1.6-1.8 of 2.0 TB/s). */
        .mem_eff = 0.80,
        /* Assumption: ~2 us between dependent kernels on one stream
         * (launches are queued ahead; the gap is the GPU's own). */
        .task_overhead_s = 2e-6,
        .gpus_per_node = 8,
        /* NVLink 3: 600 GB/s per GPU both directions = 300 GB/s one way.
         * DGX A100: 8 x ConnectX-6 HDR 200 Gb/s = 25 GB/s per GPU. */
        .nvlink_gbps = 300.0 * NVLINK_EFF,
        .nvlink_usec = NVLINK_USEC,
        .ib_gbps = 25.0 * IB_EFF,
        .ib_usec = IB_USEC,
    },
    {
        .name = "h100",
        .desc = "NVIDIA H100 SXM5 80GB, DGX H100 node: 8 GPUs on NVLink 4, 8 x NDR 400 Gb/s InfiniBand",
        /* H100 SXM datasheet: bf16 tensor core 1,979 TFLOPS with sparsity =
         * 989.4 dense, fp32 67 TFLOPS, HBM3 3.35 TB/s. */
        .bf16_flops = 989.4e12,
        .fp32_flops = 67e12,
        .hbm_bytes_s = 3350e9,
        .hbm_bytes = 80e9,
        /* Maximum achievable matmul FLOPS: H100 SXM bf16 792.1 of 989 = 80.1%. */
        .gemm_eff = 0.80,
        /* FlashAttention-3 (Shah et al. 2024): forward up to 740 TFLOPS (75%),
         * backward slower (~1.5-1.75x FA2's); forward + backward ~55%. */
        .attn_eff = 0.55,
        .mem_eff = 0.80,
        .task_overhead_s = 2e-6,
        .gpus_per_node = 8,
        /* NVLink 4: 900 GB/s per GPU both directions = 450 GB/s one way.
         * DGX H100: 8 x ConnectX-7 NDR 400 Gb/s = 50 GB/s per GPU. */
        .nvlink_gbps = 450.0 * NVLINK_EFF,
        .nvlink_usec = NVLINK_USEC,
        .ib_gbps = 50.0 * IB_EFF,
        .ib_usec = IB_USEC,
    },
};

const dg_sim_gpu_spec *dg_sim_gpu_specs(int *n) {
    *n = (int)(sizeof SPECS / sizeof SPECS[0]);
    return SPECS;
}

const dg_sim_gpu_spec *dg_sim_gpu_spec_find(const char *name) {
    int n;
    const dg_sim_gpu_spec *s = dg_sim_gpu_specs(&n);
    for (int i = 0; name && i < n; i++)
        if (!strcmp(s[i].name, name)) return &s[i];
    return NULL;
}

/* Does coordinate c of an axis vary in the group of `axis`? The groups are
 * those of sched/dg_grid.h: tp, cp, ep, dp, pp each alone; edp (expert
 * gradients) over cp x dp, and tp too when experts are whole on each tp
 * rank (ETP 1). */
static int varies(const dg_sim_layout *l, int axis, int c) {
    if (axis == DG_AXIS_EDP) return c == DG_AXIS_CP || c == DG_AXIS_DP || (c == DG_AXIS_TP && !l->etp_is_tp);
    return axis == c;
}

int dg_sim_axis_intra_node(const dg_sim_layout *l, int axis, int gpus_per_node) {
    /* rank = tp + TP (cp + CP (ep + EP (dp + DP pp))): the group of rank 0
     * spans ranks 0 .. sum over varying axes of (size - 1) x stride; all in
     * node 0 iff that last rank is below gpus_per_node. */
    int size[DG_AXIS_COUNT] = {0};
    size[DG_AXIS_TP] = l->tp, size[DG_AXIS_CP] = l->cp, size[DG_AXIS_EP] = l->ep;
    size[DG_AXIS_DP] = l->dp, size[DG_AXIS_PP] = l->pp;
    static const int order[] = {DG_AXIS_TP, DG_AXIS_CP, DG_AXIS_EP, DG_AXIS_DP, DG_AXIS_PP};
    long stride = 1, last = 0;
    for (int i = 0; i < 5; i++) {
        int c = order[i], n = size[c] > 0 ? size[c] : 1;
        if (varies(l, axis, c)) last += (long)(n - 1) * stride;
        stride *= n;
    }
    return last < gpus_per_node;
}

char *dg_sim_gpu_links(const dg_sim_gpu_spec *s, const dg_sim_layout *l, char *buf, int n) {
    static const struct {
        int axis;
        const char *name;
    } AX[] = {{DG_AXIS_TP, "tp"}, {DG_AXIS_CP, "cp"}, {DG_AXIS_EP, "ep"},
              {DG_AXIS_DP, "dp"}, {DG_AXIS_PP, "pp"}, {DG_AXIS_EDP, "edp"}};
    int at = 0;
    buf[0] = 0;
    for (int i = 0; i < 6 && at < n; i++) {
        int nv = dg_sim_axis_intra_node(l, AX[i].axis, s->gpus_per_node);
        at += snprintf(buf + at, (size_t)(n - at), "%s%s=%g,%g", i ? " " : "", AX[i].name,
                       nv ? s->nvlink_gbps : s->ib_gbps, nv ? s->nvlink_usec : s->ib_usec);
    }
    return buf;
}
