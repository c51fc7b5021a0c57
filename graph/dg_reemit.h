/* dg_reemit.h — copy a graph into another through the builder: how passes
 * rewrite graphs.
 *
 * Graphs are append-only, so a pass does not edit its input: it re-emits
 * every node of `src`, in id order (the builder's order, inputs first), into
 * `dst` with dg_graph_add, so the ops' infer() computes the shapes the new
 * leaves imply and their sharding rules the layouts. Two hooks make a pass:
 *
 *   leaf   gives each leaf of src (parameter, input, optimizer state) its
 *          tensor in dst: the EP pass turns an expert weight placed over ep
 *          into its local slice [E/ep, ...]; micro-batch instantiation shares
 *          parameters by name and makes each micro-batch's own inputs.
 *          NULL: parameters by name (dg_param, keeping init and placement),
 *          other leaves new.
 *   lower  says which nodes the pass lowers: for those, the op's `lower`
 *          callback (dg_op.h) emits the parallel subgraph instead of a copy,
 *          with `lower_opts` as its options.
 *   inputs may replace a node's inputs (already mapped into dst) before it
 *          is copied: the TP pass puts the collective a node's sharding
 *          rule needs in front of it (an all-reduce of a partial sum, a
 *          copy_to_group before a column-parallel linear). NULL: none.
 *
 * Node stamps (phase, layer, micro-batch, stage, module, stream, group,
 * priority, the forward node a backward one came from) and tensor names come
 * along; `microbatch` >= -1 restamps every node. src's ordering edges come
 * along too: a -> b becomes (the last node emitted for a) -> (the first
 * emitted for b).
 * tmap[t] (src->n_tensors ints) receives each src tensor's id in dst.
 */
#ifndef DG_REEMIT_H
#define DG_REEMIT_H

#include "dg_op.h"

#define DG_REEMIT_KEEP_MICROBATCH (-2)

typedef struct dg_reemit_opts {
    int (*leaf)(dg_graph *dst, const dg_graph *src, int t, void *ctx);
    int (*lower)(const dg_graph *src, const dg_node *n, void *ctx); /* 1: lower n */
    int (*inputs)(dg_graph *dst, const dg_node *n, int *in, void *ctx); /* DG_OK or an error */
    const void *lower_opts;
    void *ctx;
    int microbatch; /* DG_REEMIT_KEEP_MICROBATCH, or the stamp for every node */
    /* src tensors dst already holds: shared[t] >= 0 is t's id in dst, and a
     * node whose outputs are all shared is not emitted again (micro-batch
     * instantiation computes the step's weights once). NULL: none. */
    const int *shared;
} dg_reemit_opts;

/* Options that copy src as it is. */
dg_reemit_opts dg_reemit_plain(void);

/* The default leaf hook (see above). */
int dg_reemit_leaf_default(dg_graph *dst, const dg_graph *src, int t, void *ctx);

/* Re-emit src into dst. Returns DG_OK or an error naming the node. */
int dg_reemit(dg_graph *dst, const dg_graph *src, const dg_reemit_opts *o, int *tmap, dg_err *err);

#endif /* DG_REEMIT_H */
