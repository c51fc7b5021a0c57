/* dg_sim_cost.c — the simulator's cost model: a node's time on a device,
 * each axis's link (see dg_sim.h for the formulas). */
#include <math.h>
#include <string.h>

#include "dg_collective.h"
#include "dg_grouped_gemm.h"
#include "dg_sim_internal.h"

/* The ranks an axis's group spans, counting from rank 0 of the grid (tp
 * fastest: rank = tp + TP (cp + CP (ep + EP (dp + DP pp)))). A group fits
 * in a node when that span does. */
static int64_t axis_span(const dg_grid_sizes *s, dg_axis a) {
    int64_t tp = s->tp, cp = tp * s->cp, ep = cp * s->ep, dp = ep * s->dp;
    switch (a) {
    case DG_AXIS_TP: return tp;
    case DG_AXIS_CP: return cp;
    case DG_AXIS_EP: return ep;
    case DG_AXIS_PP: return dp * s->pp;
    default: return dp; /* DP (dp_cp) and EDP vary dp, the outermost data axis */
    }
}

void dg_sim_axis_links(const dg_sim_device *d, const dg_link_spec *spec, const dg_grid_sizes *sz,
                       dg_link out[DG_AXIS_COUNT]) {
    for (int a = 0; a < DG_AXIS_COUNT; a++) {
        if (spec && spec->axis[a].gbps > 0) out[a] = spec->axis[a];
        else out[a] = axis_span(sz, (dg_axis)a) <= d->devices_per_node ? d->intra : d->inter;
    }
}

int dg_sim_p2p_tag(const dg_node *n) {
    int mb = n->microbatch < 0 ? 0 : n->microbatch + 1;
    int ph = n->phase == DG_PHASE_BACKWARD ? 1 : 0;
    int64_t slot = n->attrs.i[8];
    if (slot > 0) return (int)(((slot << 12) | ((mb * 2 + ph) & 0xfff)) & 0x7fffffff);
    return (mb * 2 + ph) & 0x7fff;
}

static double in_bytes(const dg_graph *g, const dg_node *n) {
    return n->n_in > 0 && n->in[0] >= 0 ? (double)dg_tensor_bytes(dg_Tc(g, n->in[0])) : 0.0;
}

static double out_bytes(const dg_graph *g, const dg_node *n) {
    return n->n_out > 0 && n->out[0] >= 0 ? (double)dg_tensor_bytes(dg_Tc(g, n->out[0])) : 0.0;
}

/* A collective's wire time on its axis's link: the bytes of each kind as
 * the link emulation counts them (sched/dg_comm_emulate.h). */
static double collective_time(const dg_sim_device *d, const dg_link *l, const dg_graph *g, const dg_node *n) {
    int p = (int)n->attrs.i[DG_COLL_GROUP_SIZE];
    dg_cost c = {0, 0};
    if (n->op->cost) n->op->cost(g, n, &c);
    switch (n->op->comm) {
    case DG_COMM_ALL_REDUCE: return d->comm_task_s + dg_link_time(l, DG_LINK_ALL_REDUCE, p, in_bytes(g, n));
    case DG_COMM_REDUCE_SCATTER:
        return d->comm_task_s + dg_link_time(l, DG_LINK_REDUCE_SCATTER, p, in_bytes(g, n));
    case DG_COMM_ALL_GATHER: return d->comm_task_s + dg_link_time(l, DG_LINK_ALL_GATHER, p, out_bytes(g, n));
    case DG_COMM_ALL_TO_ALL: /* the op's cost: what leaves the rank, (p-1)/p of its buffer */
        return d->comm_task_s + dg_link_time(l, DG_LINK_ALL_TO_ALL, p, c.bytes);
    case DG_COMM_SEND:
    case DG_COMM_RECV: return d->comm_task_s + dg_link_time(l, DG_LINK_P2P, p, c.bytes);
    default: /* copy_to_group, scatter_to_group: no traffic, a local copy */
        return d->comm_task_s + in_bytes(g, n) / d->mem_bytes_per_s;
    }
}

double dg_sim_node_time(const dg_sim_device *d, const dg_link axis_link[DG_AXIS_COUNT], int bf16,
                        const dg_graph *g, const dg_node *n) {
    int n16 = bf16 && d->native16; /* 16-bit compute (dg_sim_device.native16) */
    /* a reshape is a view on a GPU; the CPU executor copies it (costed) */
    if (d->native16 && !strcmp(n->op->name, "reshape")) return d->task_s;
    if (n->op->comm != DG_COMM_NONE) {
        /* the tensors' own dtypes: 16-bit activations move half the bytes */
        if (n->attrs.i[DG_COLL_GROUP_SIZE] <= 1) return d->task_s + in_bytes(g, n) / d->mem_bytes_per_s;
        int a = n->group >= 0 && n->group < DG_AXIS_COUNT ? (int)n->group : DG_AXIS_DP;
        return collective_time(d, &axis_link[a], g, n);
    }
    dg_cost c = {0, 0};
    if (n->op->cost) n->op->cost(g, n, &c);
    dg_sim_kind k = dg_sim_op_kind(n->op);
    double peak = bf16 ? d->peak_16 : d->peak_fp32;
    double flops = c.flops > 0 ? c.flops : 0, bytes = c.bytes > 0 ? c.bytes : 0;
    /* an expert GEMM's cost is over its buffer's bound; balanced routing
     * fills a share of it (moe/dg_grouped_gemm.h) */
    flops *= dg_grouped_gemm_routed_fraction(g, n);
    if (n16 && k != DG_SIM_OPTIM) bytes *= 0.5;
    return d->task_s + fmax(flops / (peak * d->eff[k]), bytes / (d->mem_bytes_per_s * d->mem_eff[k]));
}
