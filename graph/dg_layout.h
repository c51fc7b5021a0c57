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

/* ---- a shard's place in the global tensor ----------------------------------
 * The one answer to "where does this rank's slice sit in the global tensor"
 * (init draws each value of the global model, checkpoints hold whole
 * tensors). t's local shape and layout, the mesh's sizes (mesh[axis], as
 * g->mesh; 0 reads as 1) and the rank's coordinates (coord[axis]) say it.
 * On a dim split over axes a (outer, split) and b (inner, split2) the dim
 * is mesh[a] * mesh[b] equal parts and the rank holds part
 * coord[a] * mesh[b] + coord[b]; with stride k > 1 the dim is k equal
 * blocks (SwiGLU's [gate; up]) and the rank holds that part of each block.
 * Expert weights are dim 0 over ep: rank r holds rows r*G .. r*G+G-1.
 *
 * A dim whose outer split is cp (mesh[cp] > 1) is the sequence under
 * context parallelism, and its parts are CP's load-balanced chunks, not
 * contiguous runs: the dim (each block of it) is 2 cp chunks of c, and cp
 * rank r holds chunks r and 2 cp - 1 - r, its 2c local positions in that
 * order (dg_layout_cp_position). An inner split (SP's tp inside cp) takes
 * contiguous parts of those 2c positions (a part may straddle the two
 * chunks), which then map through the chunks. So the data feed, parameter
 * init and checkpoints read one definition; parameters are never split
 * over cp, so theirs are the contiguous parts above. The dim's length per
 * block must be a multiple of 2 cp (the CP pass refuses other sequences).
 * (Ulysses' all-to-all leaves heads split over cp, contiguous: no caller
 * asks these functions about such an activation.) */

#ifndef DG_HD
#define DG_HD /* __host__ __device__ in the CUDA backend's files */
#endif

/* The global position of local position s (0 <= s < 2c) on CP rank r of
 * cp, with chunks of c positions: chunk r first, then chunk 2 cp - 1 - r
 * (Megatron's causal load balance: an early chunk, which sees few keys,
 * paired with a late one, which sees many). */
static inline DG_HD int64_t dg_layout_cp_position(int64_t s, int64_t c, int r, int cp) {
    return s < c ? (int64_t)r * c + s : (int64_t)(2 * cp - 1 - r) * c + (s - c);
}

/* The global shape: the local one times the split sizes. */
void dg_shard_global_shape(const dg_tensor *t, const int *mesh, int64_t *shape);

/* The global row-major index of local element i (row-major in t's local
 * shape): i itself for an unsplit tensor. */
int64_t dg_shard_global_index(const dg_tensor *t, const int *mesh, const int *coord, int64_t i);

/* The global index of the slice's first element (dg_shard_global_index of 0). */
int64_t dg_shard_offset(const dg_tensor *t, const int *mesh, const int *coord);

/* Copy the rank's slice between `local` (t's local shape) and its place in
 * `global` (the global shape), elements of `elem` bytes, one contiguous run
 * of the last dim at a time: to_global true writes global, false reads it. */
void dg_shard_copy(const dg_tensor *t, const int *mesh, const int *coord, void *global, void *local, size_t elem,
                   bool to_global);

/* Is t an expert weight: a parameter whose placement (dg_tensor.place, the
 * builder's annotation) splits a dim over ep? The one test of it: its
 * gradient is reduced over the expert-data-parallel group (EDP), every other
 * parameter's over dp, whatever the EP size (at EP 1 the two groups hold the
 * same ranks). The DP pass's buckets, the verifier's grad-group rule and
 * the EP code ask it. */
bool dg_param_is_expert(const dg_tensor *t);

/* The data axis whose ranks hold copies of parameter t: DG_AXIS_EDP for an
 * expert weight, DG_AXIS_DP otherwise. */
dg_axis dg_param_replica_axis(const dg_tensor *t);

/* How many ranks hold parameter t of g and compute different summands of
 * its gradient: the size of the group its gradient must be summed over
 * (sched/dg_grid.h), from g's mesh as the DP stage records it (mesh[DP] =
 * the CP x EP x DP ranks). A dense parameter: mesh[DP]. An expert weight:
 * mesh[DP] / mesh[EP] (CP x DP), times mesh[TP] when no expert parameter
 * of g is split over tp (ETP 1: the tp ranks serve disjoint tokens of the
 * same experts). Under ETP = TP an expert parameter whole over tp (fc2's
 * bias, added after fc2's all-reduce) has the same gradient on every tp
 * rank, as a dense replicated weight: CP x DP too.
 * 0 when mesh[DP] is not recorded (a graph that did not go through the
 * step pipeline's DP stage): unknown. */
int dg_param_replica_size(const dg_graph *g, const dg_tensor *t);

bool dg_layout_equal(const dg_sharding *a, const dg_sharding *b);
/* No dim split and no partial sum. */
bool dg_layout_is_replicated(const dg_sharding *s);
/* Dim d is split over some axis. */
bool dg_layout_dim_split(const dg_sharding *s, int d);
/* Any dim split, or a partial sum, over a non-data axis. */
bool dg_layout_has_model_axis(const dg_sharding *s, int ndim);
/* Some dim of s (ndim dims) split over axis a. */
bool dg_layout_split_over(const dg_sharding *s, int ndim, dg_axis a);
/* Whether parameter p's gradient through a forward node whose output 0 is
 * laid out `out` (ndim on) is a partial sum over model axis a: the node runs
 * on a slice over a (SP: the tokens) of which p holds all. Such a gradient
 * is all-reduced over a (the pass reads p through a copy_to_group over a),
 * and only such a one (dg_verify_sharding.c, 'grad-group'). */
bool dg_param_grad_partial(const dg_tensor *p, const dg_sharding *out, int on, dg_axis a);
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
