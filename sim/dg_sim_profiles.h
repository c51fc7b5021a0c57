/* dg_sim_profiles.h — the built-in GPU profiles of `dagatron simulate`
 * (`--device-profile a100|h100`): published peak figures of one GPU and its
 * DGX node, and the fractions of those peaks that kernels reach, each with
 * its source (docs/simulate.md, "Published configurations").
 *
 * A dg_sim_gpu_spec is plain data; dg_sim_gpu_spec_find() looks one up by
 * name. dg_sim_gpu_links() derives, for a parallel layout, which link each
 * parallel axis's group uses: a group whose ranks all sit in one node (8
 * GPUs, Megatron's rank order tp-cp-ep-dp-pp, tp fastest) talks over NVLink,
 * any other over InfiniBand (each GPU of a DGX has its own NIC, so a ring
 * across nodes runs at one NIC's rate per GPU).
 *
 * No constant here is fitted to the published MFU the simulator is checked
 * against (dg_sim_published.h): peaks come from datasheets, efficiencies
 * from kernel benchmarks or a stated assumption.
 */
#ifndef DG_SIM_PROFILES_H
#define DG_SIM_PROFILES_H

typedef struct dg_sim_gpu_spec {
    const char *name;        /* "a100", "h100" */
    const char *desc;        /* one line: the part and its node */
    double bf16_flops;       /* dense bf16 tensor-core peak, FLOP/s */
    double fp32_flops;       /* fp32 (non tensor-core) peak, FLOP/s */
    double hbm_bytes_s;      /* HBM bandwidth, bytes/s */
    double hbm_bytes;        /* HBM capacity, bytes */
    /* fractions of peak that kernels reach (each sourced in the .c file) */
    double gemm_eff;         /* large bf16 GEMM (and grouped GEMM), of bf16_flops */
    double attn_eff;         /* fused attention forward + backward, of bf16_flops */
    double mem_eff;          /* memory-bound kernels (norms, element-wise), of hbm_bytes_s */
    double task_overhead_s;  /* per kernel: launch gap on the GPU's stream */
    /* links: per GPU, one direction, achievable (peak x efficiency) */
    int gpus_per_node;
    double nvlink_gbps, nvlink_usec; /* within a node */
    double ib_gbps, ib_usec;         /* between nodes */
} dg_sim_gpu_spec;

/* The built-in spec of that name, or NULL. */
const dg_sim_gpu_spec *dg_sim_gpu_spec_find(const char *name);

/* All built-in specs (n set to their count). */
const dg_sim_gpu_spec *dg_sim_gpu_specs(int *n);

/* The parallel layout of a run: sizes per axis (world = tp cp ep dp pp) and
 * whether experts split over tp (etp_is_tp: --expert-tensor-parallel-size
 * equal to TP; else 1). */
typedef struct dg_sim_layout {
    int tp, cp, ep, dp, pp;
    int etp_is_tp;
} dg_sim_layout;

/* Whether the group of `axis` (a dg_axis: DG_AXIS_TP .. DG_AXIS_EDP) of
 * rank 0 stays within one node of `gpus_per_node` GPUs under the layout.
 * Every group of an axis has the same shape, so rank 0's answers for all. */
int dg_sim_axis_intra_node(const dg_sim_layout *l, int axis, int gpus_per_node);

/* The --emulate-link spec string of the layout on spec's links, e.g.
 * "tp=240,3.4 cp=22.5,9.6 ep=240,3.4 dp=22.5,9.6 pp=22.5,9.6 edp=22.5,9.6",
 * written into buf (size n). Returns buf. */
char *dg_sim_gpu_links(const dg_sim_gpu_spec *s, const dg_sim_layout *l, char *buf, int n);

#endif /* DG_SIM_PROFILES_H */
