/* dg_pass_dp.h — data parallelism as a graph pass: bucketed gradient
 * reduction on the comm stream.
 *
 * Runs after autodiff on the step graph (all micro-batches). Every parameter's
 * gradient (the tensor autodiff left in its `grad`) is assigned to a bucket;
 * each bucket gets two nodes:
 *
 *   pack      (compute stream) copies the bucket's gradients, in bucket
 *             order, into one flat f32 tensor [padded] (zero padding);
 *   collective (comm stream) all_reduce of it (Megatron's DDP), or, for the
 *             distributed optimizer, reduce_scatter along dim 0, so rank r of
 *             the group keeps block r of the bucket's sum: [padded / group].
 *
 * The collective's output (`reduced`) is the bucket's summed gradient; the
 * trainer reads it after the step (list it in dg_sched_opts.keep), divides by
 * the number of data shards, and runs the optimizer. (The step graph holds
 * every micro-batch and its loss is their mean, so the gradients are already
 * averaged over micro-batches and each bucket is reduced once per step.)
 *
 * Buckets, like Megatron's: parameters are taken in the order their
 * gradients become final in backward (the position of the gradient's
 * producer in the topological order; over a group of two or more, first
 * the depth of the producer, the most nodes on a data path to it, since the
 * topological order alone may list a weight gradient of layer 0 before one
 * of layer 3 and overlapped collectives run in bucket order; the same
 * buckets with and without overlap), and a bucket is closed once it holds
 * bucket_elems elements or more (so a parameter larger than the bucket size
 * gets a bucket of its own), or DG_DP_MAX_PARAMS parameters. A pack node
 * reads each gradient directly; since a node has at most DG_MAX_INPUTS
 * inputs, a bucket of more parameters is packed in two levels (segments of
 * DG_MAX_INPUTS gradients, then the segments: one extra copy).
 * Dense and expert parameters never share a bucket: expert parameters (a
 * dimension split over DG_AXIS_EP) reduce over DG_AXIS_EDP, the ranks that
 * hold the same experts; the rest over DG_AXIS_DP (dg_grid.h maps it to
 * the DP x CP group). Dense weights split over tp (dg_pass_tp.h) and dense
 * ones replicated over it do not share a bucket either: the gradient norm
 * sums a bucket's squares over the ranks its pieces differ on (tp for the
 * split ones, none for the replicated ones: dg_pass_optim.h), so each
 * bucket must be one or the other; expert parameters likewise (under
 * ETP = TP the weights are split over tp, fc2's bias is not). With the distributed optimizer each bucket is padded
 * to a multiple of its group size so it splits into equal shards.
 *
 * Overlap (--overlap-grad-reduce): with `overlap` the scheduler's policy
 * (sched/dg_prio.h) runs a pack, and the gradients only it reads, as soon as
 * they can run (compute that feeds communication goes first), so the
 * collective starts on the comm stream while backward goes on. The pass
 * adds one ordering edge from each bucket's collective to the next's: the
 * comm stream runs its tasks in the plan's order, and a plan whose cost
 * model misjudges compute (this machine's cores are not the model's) could
 * otherwise put a bucket whose gradients are final late (the embedding's)
 * ahead of ones long ready, and the comm stream would sit idle waiting for
 * it. Bucket order is the order gradients become final, as Megatron's. Without it, ordering edges
 * (dg_graph_add_order) make the first bucket's pack wait for every node that
 * ended the graph before the pass, and each later bucket's pack wait for the
 * previous one: all collectives then run after backward, in bucket order, as
 * Megatron reduces after backward. Either way only when nodes run changes,
 * never what they compute, so both give bitwise identical gradients.
 *
 * Parameter gather (--overlap-param-gather, with the distributed optimizer):
 * each bucket also gets a leaf tensor `master` [shard] (role OPTIMIZER: this
 * rank's fp32 master weights of the bucket, which the optimizer updates
 * between steps), an all_gather of it over the bucket's group (forward phase)
 * and one unpack node per parameter that copies the parameter's
 * slice of the gathered bucket into the parameter itself. The unpack node
 * becomes the parameter's producer, so every node reading the parameter waits
 * for its bucket's gather and nothing else does: the gathers run on the comm
 * stream under the forward pass, and a layer's compute starts as soon as its
 * own bucket has arrived (Megatron's overlap of the param all-gather with the
 * next forward). The step graph holds every micro-batch and they share the
 * parameters, so each bucket is gathered once per step, under the first
 * micro-batch's forward, as its gradients are reduced once.
 *
 * graph/ knows no compute op, so the pack and unpack ops are handed in
 * (ops/dg_op_dp_pack.h defines them, train/ hands them in: dg_dist_pack_op(),
 * dg_dist_unpack_op()). pack: inputs
 * are the gradients, attrs.i[0] = padded length, output f32 [padded].
 * unpack: input the gathered bucket, attrs.i[0] = element offset, i[1] = ndim,
 * i[2..5] = shape; output the parameter.
 */
#ifndef DG_PASS_DP_H
#define DG_PASS_DP_H

#include "dg_graph.h"
#include "dg_op.h"

#define DG_DP_MAX_PARAMS (DG_MAX_INPUTS * DG_MAX_INPUTS) /* parameters per bucket */

typedef struct dg_dp_opts {
    int64_t bucket_elems;  /* close a bucket at this many elements (>= 1) */
    int overlap;           /* --overlap-grad-reduce */
    int reduce_scatter;    /* --use-distributed-optimizer */
    int dp_size;           /* ranks of the DG_AXIS_DP group (dense gradients) */
    int edp_size;          /* ranks of the DG_AXIS_EDP group (expert gradients) */
    const dg_op_def *pack; /* the flat-copy op (see above) */
    int layout_only;       /* 1: lay the buckets out but add no node (a world of
                            * one: nothing to reduce; the trainer then reads the
                            * gradients themselves, and packed = reduced = -1) */
    int param_gather;      /* --overlap-param-gather (needs reduce_scatter) */
    const dg_op_def *unpack; /* the slice-copy op (param_gather only) */
    /* --grad-reduce-in-bf16: the bucket is cast to bf16 before its
     * collective and back to f32 after it (Megatron's bf16 reduction, half
     * the traffic); `cast` is the cast op (ops/dg_op_cast.h). NULL: the
     * reduction is in f32 (--accumulate-allreduce-grads-in-fp32). */
    const dg_op_def *cast;
} dg_dp_opts;

/* The parameters of a bucket, in pack order. */
typedef struct dg_dp_bucket {
    dg_axis axis;      /* DG_AXIS_DP or DG_AXIS_EDP */
    int group_size;    /* ranks the bucket is reduced over */
    int n_params;
    int params[DG_DP_MAX_PARAMS];     /* parameter tensor ids */
    int64_t offset[DG_DP_MAX_PARAMS]; /* element offset of each in the bucket */
    int64_t numel;     /* sum of the parameters' elements */
    int64_t padded;    /* numel rounded up to a multiple of group_size (reduce-scatter), else numel */
    int64_t shard;     /* elements each rank keeps: padded / group_size, or padded */
    int packed;        /* tensor: the flat bucket [padded] */
    int reduced;       /* tensor: the collective's output [shard] (f32: after the cast back) */
    int pack_node, comm_node;
    int master;        /* param_gather: leaf [shard], this rank's master weights; else -1 */
    int gathered;      /* param_gather: the all_gather's output [padded]; else -1 */
    int gather_node;   /* param_gather: the all_gather node; else -1 */
    int norm_skip;     /* the gradient norm leaves it out (dg_dp_opts.norm_skip) */
} dg_dp_bucket;

typedef struct dg_dp_buckets {
    int n;
    dg_dp_bucket *b;   /* in the order their collectives become ready */
    int reduce_scatter;
} dg_dp_buckets;

/* Run the pass on g (after autodiff). Fills *out (free with
 * dg_dp_buckets_free). Returns DG_OK, or an error when a parameter has no
 * gradient, is not f32, or the builder fails (g->err). */
int dg_pass_dp(dg_graph *g, const dg_dp_opts *o, dg_dp_buckets *out, dg_err *err);
/* The same, where the parameters norm_skip[0 .. n_norm_skip) have their
 * gradient counted by the norm on another pipeline stage (the last
 * stage's copy of a tied embedding, graph/passes/dg_pass_pp.h): each gets
 * a bucket of its own, marked norm_skip. */
int dg_pass_dp_skip(dg_graph *g, const dg_dp_opts *o, const int *norm_skip, int n_norm_skip, dg_dp_buckets *out,
                    dg_err *err);
void dg_dp_buckets_free(dg_dp_buckets *b);

#endif /* DG_PASS_DP_H */
