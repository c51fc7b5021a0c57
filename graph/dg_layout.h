/* dg_layout.h — tensor layouts and op sharding rules.
 *
 * A layout (dg_sharding, dg_graph.h) says how a logical tensor is laid out
 * over the device mesh, in the spirit of SBP (OneFlow) and GSPMD:
 *
 *   split(dim, axis)      each rank of the axis' group holds a slice of dim;
 *                         up to two axes per dim (split outer, split2 inner:
 *                         the sequence under CP and SP together), and a
 *                         `stride` of k > 1 splits each of k equal blocks of
 *                         the dim on its own (fused weights: SwiGLU's
 *                         [gate; up] is stride 2, fused QKV stride 3);
 *   replicated            no dim split and no partial sum;
 *   partial-sum(axis)     each rank holds a summand; the group's sum is the
 *                         value (a row-parallel linear before its all-reduce).
 *
 * The data axes are different: DP, EDP and EP ranks each run their own
 * micro-batch (EP folds into DP for everything but the experts), so an
 * activation is never "split" over them. A collective over a data axis is an
 * exchange between micro-batches (the EP dispatch, a gradient bucket's
 * reduction) and leaves the logical layout as it was; only a parameter's
 * placement (experts: dim 0 over ep) names a data axis.
 *
 * Sharding rules (dg_op_def.shard, dg_op.h) map the inputs' layouts to the
 * outputs', or answer DG_SHARD_CANNOT. The builder (dg_graph_add) runs the
 * rule of every new node, so layouts propagate as a graph is built; the
 * verifier (dg_verify_sharding.c) runs them again on the forward and rejects
 * a recorded layout that differs from its producer's rule, a node whose rule
 * cannot take its inputs (a collective is missing before it), and a gradient
 * bucket reduced over a group other than the one that replicates its
 * parameters. Rules of the common op shapes are here so ops/ and moe/ share
 * them.
 */
#ifndef DG_LAYOUT_H
#define DG_LAYOUT_H

#include <stdbool.h>

#include "dg_op.h"

/* DP, EDP, EP: axes over which ranks run different micro-batches. */
bool dg_axis_is_data(dg_axis a);

/* Ranks along axis a in g's mesh (1 when unset). */
int dg_mesh_size(const dg_graph *g, dg_axis a);

/* A rank's coordinate on a mesh axis is a runtime input, i32 [1] named
 * "<axis>_rank" ("ep_rank"), shared by all ranks of the group's graph: the
 * graph's input for axis a (created on first use; -1 after an error), and
 * the axis whose coordinate tensor t is (DG_AXIS_NONE for any other). */
int dg_mesh_coord_input(dg_graph *g, dg_axis a);
dg_axis dg_mesh_coord_axis(const dg_tensor *t);

/* Element offset, in the global row-major tensor, of the slice a tensor
 * split on dim 0 holds at the given mesh coordinates (coord[axis]); 0 for
 * a tensor not split on dim 0 (one axis on dim 0). Init locates expert
 * slices with it. */
int64_t dg_shard_offset(const dg_tensor *t, const int *coord);

bool dg_layout_equal(const dg_sharding *a, const dg_sharding *b);
/* No dim split and no partial sum. */
bool dg_layout_is_replicated(const dg_sharding *s);
/* Dim d is split over some axis. */
bool dg_layout_dim_split(const dg_sharding *s, int d);
/* Any dim split, or a partial sum, over a non-data axis. */
bool dg_layout_has_model_axis(const dg_sharding *s, int ndim);
/* "[tp,-]", "[cp+tp,-]", "[tp/2,-]" (stride 2), "...+partial(tp)". buf: 64 bytes. */
const char *dg_layout_str(const dg_sharding *s, int ndim, char *buf);

/* The layouts node n's rule gives its outputs from its inputs' recorded
 * layouts in g: op->shard, or dg_shard_replicated when the op has none.
 * attrs gets the node's attrs as the rule rewrites them (may be NULL).
 * Returns DG_OK or DG_SHARD_CANNOT. */
int dg_layout_infer(const dg_graph *g, const dg_node *n, dg_sharding *out, dg_attrs *attrs);

/* ---- rules shared by ops (each has dg_op_def.shard's signature) ------------ */

/* Every input replicated -> every output replicated; else cannot. The rule
 * of an op without one. */
int dg_shard_replicated(const dg_graph *g, const dg_node *n, const dg_sharding *in,
                        dg_sharding *out, dg_attrs *attrs);
/* Element-wise: every input laid out alike (split or partial) -> outputs
 * alike; inputs of lower rank (broadcast scalars) must be replicated. */
int dg_shard_elementwise(const dg_graph *g, const dg_node *n, const dg_sharding *in,
                         dg_sharding *out, dg_attrs *attrs);
/* Linear in its input (scale, copies): any layout, partial sums included,
 * passes through to output 0 (other outputs replicated). */
int dg_shard_linear_unary(const dg_graph *g, const dg_node *n, const dg_sharding *in,
                          dg_sharding *out, dg_attrs *attrs);
/* Row-wise over the last dim (norms, softmax): input 0's leading dims may
 * be split (the sequence), its last dim may not, no partial sums; other
 * inputs (weights) replicated. Output 0 takes input 0's layout. */
int dg_shard_rowwise(const dg_graph *g, const dg_node *n, const dg_sharding *in,
                     dg_sharding *out, dg_attrs *attrs);

#endif /* DG_LAYOUT_H */
