/* dg_pass_recompute.h — activation recompute as a graph pass (the pipeline's
 * recompute stage, after autodiff).
 *
 * A region is a set of forward nodes whose outputs the backward does not
 * keep from the forward: the pass re-emits the micro-batch graph, and where
 * a backward node of a region's layers reads a tensor the region produced,
 * it reads a recomputed copy instead: the region's forward nodes that lead
 * to it, re-emitted with phase recompute (dg_graph.h) from the tensors that
 * enter the region (its checkpoints: the layer's input, parameters, the
 * dropout key, so dropout draws the same mask). The forward's own tensors
 * then die at their last forward reader.
 *
 * When (ordering edges): a region's first recompute nodes wait for the
 * backward nodes that make the gradient entering the region (found by
 * walking the backward upstream from the nodes that read the recomputed
 * tensors to where it leaves the region's layers; a gradient received from
 * another pipeline stage is made in no layer here), so recomputation never
 * runs during the forward; the readers of the recomputed tensors of the
 * region above (weight gradients too) run before that gradient is made,
 * and every reader runs before the backward leaves its region's layers. So
 * the backward goes layer by layer as Megatron's checkpointed layers do,
 * each recompute just before the backward that reads it, and one layer's
 * recomputed activations are freed before the next layer's are made.
 *
 * Regions come from node stamps, never op names: a node of layer l
 * (dg_node.layer) is in
 *   - the full region of its layer group when full_group[l] >= 0 (layers
 *     with the same group recompute together: Megatron's uniform method
 *     with --recompute-num-layers N groups N layers; block groups each);
 *   - else the (layer, module) region when modules[l] has the bit of its
 *     module (dg_module.h) or of the module it is nested in (moe_act and
 *     shared_experts are inside moe).
 * Nodes outside layers (embedding, head, loss) and point-to-point
 * transfers (a pipeline stage's send and receive) are never recomputed.
 * Collectives inside a region (EP dispatch, TP reductions) are recomputed
 * too: every rank's graph has the same recompute nodes, in the same order.
 */
#ifndef DG_PASS_RECOMPUTE_H
#define DG_PASS_RECOMPUTE_H

#include "dg_graph.h"

typedef struct dg_recompute_opts {
    int n_layers;
    const int *full_group;    /* [n_layers]: -1 or the layer's full-recompute group */
    const unsigned *modules;  /* [n_layers]: bit (1u << dg_module) per module recomputed */
} dg_recompute_opts;

/* Does o recompute anything? */
int dg_recompute_any(const dg_recompute_opts *o);

typedef struct dg_recompute_stats {
    int n_nodes;        /* recompute nodes emitted */
    int n_regions;      /* regions recomputed */
    double flops;       /* their cost (dg_op_def.cost), FLOPs */
} dg_recompute_stats;

/* Re-emit src (forward + backward of one micro-batch) into *out with the
 * regions o selects recomputed; tmap[t] gets src tensor t's id in *out.
 * stats may be NULL. With nothing selected *out is a plain copy. Returns
 * DG_OK or an error naming the node. */
int dg_pass_recompute(const dg_graph *src, const dg_recompute_opts *o, dg_graph **out, int *tmap,
                      dg_recompute_stats *stats, dg_err *err);

#endif /* DG_PASS_RECOMPUTE_H */
