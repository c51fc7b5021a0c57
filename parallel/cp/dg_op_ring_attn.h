/* dg_op_ring_attn.h — ring attention for context parallelism: attention's
 * rewrite under the CP pass (dg_cp_rewrites.c, dg_pass_cp.h), and the
 * ops it is built of.
 *
 * On CP rank r of cp, with local q [B, 2c, Hq, D] and k, v [B, 2c, Hkv, D]
 * (this rank's chunks r and 2cp-1-r), the lowering emits
 *
 *   o, lse = cp_attn_block(q, k, v, cp_rank; step 0)        the diagonal
 *   for step s = 1 .. cp-1:
 *     send(k_{s-1}, +1), k_s = recv(-1); the same for v
 *     o_s, lse_s = cp_attn_block(q, k_s, v_s, cp_rank; step s)
 *     o, lse = lse_merge(o, lse, o_s, lse_s)
 *   o, lse = cp_ring_attn_out(o, lse, q, k, v, cp_rank)
 *
 * so rank r holds rank r-s's K/V at step s. The send/recv of step s+1 need
 * only k_s, v_s, so the comm stream moves the next chunk while the compute
 * stream runs block s. Under GQA the grouped K/V travel (Hkv heads), never
 * the repeated ones.
 *
 * The backward is cp_ring_attn_out's adjoint (Megatron's scheme): the
 * gradient flows to q, k, v only, never through the merges, so nothing a
 * step received or computed is kept for the backward (the saved tensors are
 * this rank's q, k, v and the final o, lse: 1/cp of one rank's). The K/V
 * travel the ring again; each block's dq, dk, dv come from the final o and
 * lse (cp_attn_block_bwd); dK and dV travel the ring beside their K/V,
 * each rank adding its share, and a last hop takes each sum home.
 *
 *   cp_attn_block(q, k, v, cp_rank i32 [1]) -> o [B, 2c, Hq, D], lse [B, Hq, 2c]
 *     attrs: i[0] = cp, i[1] = step, f[0] = scale, i[2] = window (0: none).
 *     The mask is chosen at run time from cp_rank (kernels/cpu/dg_cpu_ring_attn.h:
 *     diagonal, lower, upper; with a window, by the chunks' places), so
 *     every rank runs the same graph; a query that sees
 *     no key of the block gets o = 0, lse = -inf. Its own adjoint (from the
 *     block's o, lse) makes the chain differentiable step by step too.
 *   cp_attn_block_bwd(q, k, v, cp_rank, o, do, lse [, dlse]) -> dq, dk, dv
 *     the block's part of the gradients, given the (o, lse) of all the
 *     keys the queries see (or of the block alone: the same formula).
 *   lse_merge(o1, l1, o2, l2) -> o, l      the online-softmax merge
 *   lse_merge_bwd(o1, l1, o2, l2, o, l, do [, dl]) -> do1, dl1, do2, dl2
 *   cp_ring_attn_out(o, lse, q, k, v, cp_rank) -> o, lse (copies)
 *     attrs: i[0] = cp, i[1] = window, f[0] = scale. Its adjoint is the
 *     backward ring.
 */
#ifndef DG_OP_RING_ATTN_H
#define DG_OP_RING_ATTN_H

#include "dg_op.h"
#include "dg_op_attention.h" /* dg_attn_opts */

extern const dg_op_def dg_op_cp_attn_block;
extern const dg_op_def dg_op_cp_attn_block_bwd;
extern const dg_op_def dg_op_lse_merge;
extern const dg_op_def dg_op_lse_merge_bwd;
extern const dg_op_def dg_op_cp_ring_attn_out;

/* The ring of one attention node: o (and *lse_out) from local q, k, v with
 * the graph's "cp_rank" input; cp == 1 is one diagonal block. From o:
 * scale; window > 0: each query sees the `window` keys up to its own
 * (dg_op_attention.h's attrs.i[1]; the blocks then run per chunk pair,
 * kernels/cpu/dg_cpu_ring_attn.h); dropout > 0 with its key and site: each
 * block draws the whole mask's part at its chunks' global places (the
 * blocks' attrs f[1] = p, i[3] = site; cp_ring_attn_out's f[1], i[2]), the
 * rank input then {cp_rank, key} (dg_op_attn_key.h). */
int dg_ring_attention(dg_graph *g, int q, int k, int v, int cp, const dg_attn_opts *o, int *lse_out);

#endif /* DG_OP_RING_ATTN_H */
