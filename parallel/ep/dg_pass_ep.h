/* dg_pass_ep.h — expert parallelism as a graph pass.
 *
 * The model builder emits one logical "moe_experts" node per MoE layer, over
 * all E experts, with the expert weights [E, ...] placed dim 0 over ep
 * (dg_tensor.place). The EP pass re-emits the logical graph (dg_reemit.h):
 *
 *   - each parameter placed over ep becomes this rank's slice [E/ep, ...],
 *     laid out split[0] = ep (the global name stays, so checkpoints reshard;
 *     dg_shard_offset gives the slice's place in the global tensor);
 *   - each node whose op has DG_TRAIT_EXPERTS (moe_experts) is rewritten
 *     through the pass's table (dg_pass_ep.c; dg_ep.c does the work) into
 *     counts exchange, all-to-all(v) dispatch, grouped
 *     GEMMs and combine, by the dispatcher and overlap chunks in the options
 *     (dg_ep.h has the details); with ep = 1 and one chunk the lowering
 *     is the single-rank block (permute, grouped GEMMs, unpermute).
 *
 * Under TP (the mesh's tp size > 1, set by the TP pass before), the lowering
 * adds the tp collectives expert tensor parallelism needs (dg_etp.h).
 *
 * The graph it returns holds the mesh's ep size; every rank of an EP group
 * gets the same graph (a rank's place in the group is the "ep_rank" input).
 */
#ifndef DG_PASS_EP_H
#define DG_PASS_EP_H

#include "dg_graph.h"

typedef struct dg_pass_ep_opts {
    int ep_size;       /* --expert-model-parallel-size (>= 1) */
    int dispatcher;    /* --moe-token-dispatcher-type: 0 alltoall, 1 allgather */
    int chunks;        /* --moe-a2a-overlap-chunks (>= 1) */
    int64_t recv_rows; /* dispatch receive bound per chunk; 0: the worst case */
    int etp_size;      /* --expert-tensor-parallel-size: 1 or the TP size; 0 = the TP size */
} dg_pass_ep_opts;

/* Expert tensor parallelism (sched/dg_grid.h, "The expert grid"). The
 * builder places expert weights over tp as well (fc1 dim 1, fc2 dim 2:
 * ETP = TP, Megatron's default). With o->etp_size 1 this drops that tp
 * placement from the expert weights of g (a logical graph, before the TP
 * pass), so the TP pass leaves them whole and the moe_experts lowering
 * gives each tp rank a disjoint slice of the tokens (dg_etp.h). Other
 * values leave g as it is. */
void dg_pass_ep_place_experts(dg_graph *g, const dg_pass_ep_opts *o);

/* Run the pass on the logical graph src: *out gets a new graph (free with
 * dg_graph_free), tmap[t] the id in *out of src's tensor t (outputs of a
 * lowered node map to the lowered outputs). Returns DG_OK or DG_EINPUT naming
 * the flag or node at fault. */
int dg_pass_ep(const dg_graph *src, const dg_pass_ep_opts *o, dg_graph **out, int *tmap, dg_err *err);

#endif /* DG_PASS_EP_H */
