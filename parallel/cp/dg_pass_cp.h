/* dg_pass_cp.h — context parallelism as a graph pass.
 *
 * The sequence of every sample is cut into 2 cp chunks of c = S / (2 cp)
 * tokens; CP rank r holds chunks r and 2 cp - 1 - r (Megatron's causal load
 * balance: an early chunk, which sees few keys, paired with a late one,
 * which sees many), so its local sequence is 2 c tokens:
 *
 *   local token s   ->  global position  r c + s            (s < c)
 *                                        (2 cp - 1 - r) c + s - c   (s >= c)
 *
 * The pass re-emits the graph (dg_reemit.h):
 *   - each input [B, S, ...] read per token (tokens, targets, loss mask)
 *     becomes [B, 2c, ...], laid out split[1] = cp: a dim split over cp
 *     means this rank's two chunks (graph/dg_layout.h,
 *     dg_layout_cp_position), so the trainer fills them through the
 *     input's layout (dg_shard_global_index);
 *   - the sharding rules carry the split through the token-wise ops
 *     (linears, norms, element-wise, reshapes rewrite their dims);
 *   - the ops that see positions or the whole sequence (their traits:
 *     DG_CP_TRAITS) are rewritten through the pass's table
 *     (dg_cp_rewrites.h) with its options (dg_pass_cp_opts); an op with
 *     such a trait and no entry is refused:
 *       attention      ring attention (dg_op_ring_attn.h): block
 *                      attention of the local queries against the K/V chunk
 *                      in hand, the next chunk sent and received around the
 *                      cp ring beside it, an online-softmax merge by lse;
 *                      or, with comm_type a2a, all-to-all between sequence
 *                      and heads (dg_op_cp_a2a.h);
 *       rope, pos_embed_add  positions from each chunk's global offset, a
 *                      runtime tensor (cp_positions of the "cp_rank" input);
 *       softmax_xent   the loss as a token sum and a token count, each
 *                      all-reduced over cp, then divided: the loss of the
 *                      whole sequence, never a mean of means;
 *       vocab_xent     the same for TP's vocab-parallel loss (the pass runs
 *                      after TP's: heads and vocabulary already split);
 *       reshape        the MoE layer's token flatten and unflatten: its
 *                      tokens become data (cp_relabel, CP folded into the
 *                      expert grid), router and dispatch run on them;
 *       moe_aux_loss, moe_z_loss  statistics reduced over cp: the tokens
 *                      per expert all-reduced, each rank's term summed.
 * Every rank of the ring gets the same graph: its place is the "cp_rank"
 * input (dg_mesh_coord_input), which the trainer fills once.
 *
 * Gradients: each rank's loss is the global one, so its gradient is its
 * tokens' share of the global gradient; the DP pass reduces dense gradients
 * over DG_AXIS_DP, which the grid maps to the DP x CP group, and the
 * trainer divides by DP x EP only (not by CP).
 *
 * Point-to-point order: a recv blocks the comm stream, so the ring's sends
 * and recvs of one micro-batch run in id order on every rank (each send
 * before its recv, K before V): dg_pass_cp_order adds those ordering edges
 * to the step graph (schedule stage).
 */
#ifndef DG_PASS_CP_H
#define DG_PASS_CP_H

#include "dg_graph.h"

typedef enum dg_cp_comm { DG_CP_COMM_P2P = 0, DG_CP_COMM_A2A } dg_cp_comm;

typedef struct dg_pass_cp_opts {
    int cp_size;        /* --context-parallel-size (>= 1) */
    int comm_type;      /* --cp-comm-type: dg_cp_comm */
    int64_t seq_length; /* --seq-length: the inputs [B, S, ...] of this S are read per token */
} dg_pass_cp_opts;

/* Run the pass on src (cp_size 1: a plain copy). *out gets a new graph,
 * tmap[t] the id in *out of src's tensor t. DG_EINPUT (one line naming the
 * flag) when the sequence does not split into 2 cp chunks. */
int dg_pass_cp(const dg_graph *src, const dg_pass_cp_opts *o, dg_graph **out, int *tmap, dg_err *err);

/* Bytes of the forward tensors attention's backward reads (attention_bwd's
 * or cp_attn_block_bwd's inputs made in the forward: q, k, v, o, lse),
 * each counted once: what attention holds from forward to backward on
 * this rank. Ring attention keeps only this rank's chunks (nothing it
 * received), so at cp ranks it is 1/cp of one rank's. */
int64_t dg_attention_saved_bytes(const dg_graph *g);

/* The step graph's ordering edges for the ring (see above). */
int dg_pass_cp_order(dg_graph *g, dg_err *err);

#endif /* DG_PASS_CP_H */
