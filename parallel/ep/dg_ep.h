/* dg_ep.h — expert parallelism: the MoE block's experts split over EP ranks.
 *
 * With --expert-model-parallel-size P, each rank of an EP group holds
 * G = E/P of the E experts (rank r: global experts r*G .. r*G+G-1, Megatron's
 * contiguous layout) and processes its own micro-batch: the non-expert part
 * of the model is data-parallel over the EP ranks (Megatron's expert-DP
 * folding). dg_ep_experts() lowers "tokens -> routed experts -> weighted sum"
 * into graph nodes; the router, its losses and the parameters stay with the
 * model builder (moe/dg_model.c), so the single-rank math is untouched. In
 * particular the load-balancing and z losses are computed on the rank's own
 * tokens, as Megatron does (no all-reduce of the counts over EP): an EP run
 * on P micro-batches equals the single-rank run on the same P micro-batches.
 *
 * alltoall dispatcher (--moe-token-dispatcher-type alltoall, Megatron's
 * MoEAlltoAllTokenDispatcher), per chunk of tokens:
 *   permute by global expert            moe_permute: rows grouped by expert,
 *                                       hence by destination rank
 *   exchange per-expert counts          all_to_all of i32 [E] (split/concat 0)
 *                                       -> recv counts [P, G] (rank, expert);
 *                                       one exchange for all chunks (their
 *                                       counts packed by moe_ep_transpose)
 *   dispatch                            all_to_all_v (graph/dg_collective_v.h)
 *   sort chunks (rank, e) -> (e, rank)  moe_ep_sort_chunks (skipped if G == 1)
 *   expert MLP                          grouped_gemm fc1 [+ grouped_bias_add b1],
 *                                       the activation (swiglu, gelu, glu),
 *                                       grouped_gemm fc2 [+ grouped_bias_add b2]
 *   unsort, combine                     moe_ep_sort_chunks inverse, all_to_all_v back
 *   unpermute with probs                moe_unpermute: the weighted sum
 * Autodiff derives the backward (reverse all-to-alls, sorts) from the ops'
 * adjoints; nothing here is hand-written for the backward.
 *
 * allgather dispatcher (Megatron's MoEAllGatherTokenDispatcher): all-gather
 * tokens, probs and indices over EP; keep the slots of this rank's experts
 * (moe_ep_local_indices with the rank from the i32 input "ep_rank", see
 * dg_ep_rank_input); permute, expert MLP, unpermute into a partial sum over
 * all P*T tokens; reduce-scatter it back to this rank's T tokens.
 *
 * Dropless and capacity modes: the router decides (capacity factor > 0
 * marks dropped slots -1, which permute skips); EP only sizes its buffers.
 * Static bound of the dispatch receive buffer (rows, per chunk of Tc
 * tokens), unless opts.recv_rows sets one:
 *   dropless   P * Tc * min(k, G)   every source rank's every token picks
 *                                   min(k, G) of this rank's experts
 *   capacity   min(that, P * G * min(cap, Tc)), cap = Megatron's capacity
 *              of the whole micro-batch (dg_moe_capacity)
 * A run that exceeds a bound fails with the node's name, never truncates.
 * The dropless bound is what a static graph must assume; it is up to
 * min(k, G) * P / k times the balanced load (Tc*k rows), and the fc1 output
 * [bound, 2F] scales with it: large dropless configurations should set a
 * capacity factor or opts.recv_rows. The allgather dispatcher's buffers
 * are P*Tc tokens (P*Tc*k permuted rows), as in Megatron.
 *
 * Overlap (opts.chunks = C, --moe-a2a-overlap-chunks; 1 = off): the tokens
 * are split into C equal chunks (C divides T, C <= DG_EP_MAX_CHUNKS) after
 * the router, and each chunk gets its own permute / dispatch / experts /
 * combine. The chunks are independent in the graph, so the scheduler runs
 * chunk i's all-to-all on the comm stream while chunk i-1's grouped GEMMs
 * run on the compute stream, forward and backward: planned by the graph,
 * not by a hand-written loop. Results equal the unchunked block up to the
 * summation order of the expert weight gradients (one sum per chunk).
 *
 * Parameters: expert weights keep their global names
 * (decoder.layers.L.mlp.experts.linear_fc1.weight) with the local shape
 * [G, ...] and sharding split[0] = DG_AXIS_EP, so a checkpoint can reshard
 * (rank r holds rows r*G .. r*G+G-1 of the global tensor). Their gradients
 * are complete sums over all EP ranks' tokens (the all-to-all brought them
 * in) and must be reduced over the expert-data-parallel group only; every
 * other parameter's over the full data-parallel group (DP x CP x EP when EP
 * folds into DP). dg_param_is_expert() (graph/dg_layout.h) tells the two apart.
 *
 * P = 1 emits no communication: with chunks = 1 the graph is exactly the
 * single-rank block (permute, grouped GEMMs, unpermute), so the model
 * builder may call dg_ep_experts() unconditionally.
 */
#ifndef DG_EP_H
#define DG_EP_H

#include "dg_ep_sort.h"
#include "dg_moe_experts.h"
#include "dg_op.h"

typedef enum dg_ep_dispatcher {
    DG_EP_DISPATCH_ALLTOALL = 0, /* --moe-token-dispatcher-type alltoall (default) */
    DG_EP_DISPATCH_ALLGATHER = 1 /* --moe-token-dispatcher-type allgather */
} dg_ep_dispatcher;

typedef struct dg_ep_opts {
    int ep_size;                 /* --expert-model-parallel-size, >= 1, divides E */
    dg_ep_dispatcher dispatcher; /* --moe-token-dispatcher-type */
    int chunks;                  /* --moe-a2a-overlap-chunks: 1 = no overlap */
    int64_t recv_rows;           /* dispatch receive bound per chunk; 0: the worst case */
} dg_ep_opts;

/* ep_size 1, alltoall, 1 chunk, worst-case bound. */
dg_ep_opts dg_ep_opts_default(void);

/* "alltoall" / "allgather" -> *out. Returns DG_OK or DG_EINPUT naming the flag. */
int dg_ep_parse_dispatcher(const char *s, dg_ep_dispatcher *out, dg_err *err);

/* Check o against E experts and T tokens per micro-batch: ep_size divides
 * E, chunks in 1..DG_EP_MAX_CHUNKS and divides T. DG_OK or DG_EINPUT naming
 * the flags. */
int dg_ep_opts_check(const dg_ep_opts *o, int64_t num_experts, int64_t tokens, dg_err *err);

/* An expert weight: the local slice [E/ep_size, d1, d2] of the global
 * [E, d1, d2] tensor `name`, with split[0] = DG_AXIS_EP when ep_size > 1.
 * Returns the parameter id or -1. */
int dg_ep_expert_param(dg_graph *g, const char *name, int64_t num_experts, int ep_size,
                       int64_t d1, int64_t d2);

/* The graph's i32 [1] input "ep_rank" (created on first use): the allgather
 * dispatcher reads this rank's index in its EP group from it; the caller
 * fills it like the tokens. Returns its id or -1. */
int dg_ep_rank_input(dg_graph *g);

/* The "ep_rank" input if the graph has one (allgather dispatcher with
 * ep_size > 1), else -1: what a trainer looks up to fill it. */
int dg_ep_find_rank_input(const dg_graph *g);

typedef struct dg_ep_experts_args {
    int x;              /* f32 [T, H]: the tokens */
    int probs;          /* f32 [T, k]: router probs */
    int indices;        /* i32 [T, k]: global expert per slot, -1 dropped */
    int w1;             /* f32 [G, 2F, H]: local fc1 (gate rows, then up rows) */
    int w2;             /* f32 [G, H, F]: local fc2 */
    int num_experts;    /* E, global */
    double capacity_factor; /* --moe-expert-capacity-factor (sizes the buffers); <= 0 dropless */
    /* the expert MLP's activation and biases (b1 [G, W F], b2 [G, H], local
     * like the weights; fc1 [G, F, H] under GeLU); NULL: SwiGLU, no biases */
    const dg_moe_expert_mlp *mlp;
} dg_ep_experts_args;

/* The routed experts' output y [T, H] = sum_j probs[t, j] * expert_j(x[t])
 * over this rank's tokens, with the experts spread over the EP group as
 * above. Returns y's id, or -1 after an error (g->status, g->err). */
int dg_ep_experts(dg_graph *g, const dg_ep_opts *o, const dg_ep_experts_args *a);

#endif /* DG_EP_H */
