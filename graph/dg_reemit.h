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
 *   node   the pass's rewrite of one node, given its inputs already mapped
 *          into dst (in[], which the hook may replace: the TP pass puts
 *          the collective a sharding rule needs in front of the node). It
 *          either emits the node's parallel form itself, writing the ids of
 *          n's outputs in dst to out[], and returns DG_OK; or returns
 *          DG_REEMIT_COPY to have n copied onto in[] as it is; anything
 *          else is an error (err, or dst's builder error, names it). The
 *          parallel passes (parallel/) look n's op up in their own table of
 *          rewrites here. NULL: every node copied.
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

/* A node hook's answer "copy n as it is" (no status code uses it). */
#define DG_REEMIT_COPY 100

typedef struct dg_reemit_opts {
    int (*leaf)(dg_graph *dst, const dg_graph *src, int t, void *ctx);
    int (*node)(dg_graph *dst, const dg_graph *src, const dg_node *n, int *in, int *out, void *ctx,
                dg_err *err);
    void *ctx; /* the pass's state, handed to both hooks */
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

/* The parallel passes' leaf hook: a parameter of src placed over axis `a`
 * (dg_tensor.place) becomes this rank's shard in dst: each placed dim
 * divided by `size` (a dim of k > 1 blocks, place.stride, splits each
 * block), laid out split over `a` as placed, same name, init and placement
 * (so checkpoints reshard: dg_shard_offset). Other leaves, or size 1: the
 * default. `flag` names the size in the error when it does not divide. */
int dg_reemit_leaf_shard(dg_graph *dst, const dg_graph *src, int t, dg_axis a, int size, const char *flag);

/* A parallel pass's run: a new graph named as src, with src's mesh and
 * mesh[axis] = size, into which src is re-emitted with o. *out gets it
 * (free with dg_graph_free), or NULL with the error returned. */
int dg_reemit_pass(const dg_graph *src, dg_axis axis, int size, const dg_reemit_opts *o, dg_graph **out, int *tmap,
                   dg_err *err);

/* Re-emit src into dst. Returns DG_OK or an error naming the node. */
int dg_reemit(dg_graph *dst, const dg_graph *src, const dg_reemit_opts *o, int *tmap, dg_err *err);

#endif /* DG_REEMIT_H */
