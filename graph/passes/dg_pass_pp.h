/* dg_pass_pp.h — pipeline parallelism as a graph pass.
 *
 * The PP pass runs in the parallel-passes stage, after TP and EP, on the
 * forward graph of one micro-batch (identical on every pipeline rank):
 *
 * 1. Stages. Each node is stamped with its pipeline stage: a node of
 *    decoder layer l goes to the stage that holds l (Megatron's split:
 *    num_layers / pp per stage, or --decoder-first-pipeline-num-layers /
 *    --decoder-last-pipeline-num-layers on the first / last stage and the
 *    rest split evenly over the middle ones); a node outside the layers
 *    goes to the first stage when nothing it reads comes from a layer (the
 *    embedding, its positions and dropout) and to the last stage otherwise
 *    (the final norm, the output layer, the loss and the loss sums). Data
 *    therefore only flows from a stage to the same or a later one.
 * 2. Cut. The rank's graph keeps only its stage's nodes and the leaves they
 *    read. A tensor made on stage a and read on stage b > a becomes a pair
 *    of collectives over DG_AXIS_PP: a send (peer +(b-a)) at the end of the
 *    producer's stage and a recv (peer -(b-a)) on the reader's, whose
 *    output stands for the tensor there (requires_grad as the original).
 *    Both carry a tag slot (attrs.i[DG_COLL_TAG]) made from the tensor's id
 *    in the pass's input, which is the same graph on every rank, so the
 *    two sides agree on it without talking; the comm backend adds the
 *    micro-batch and the direction (sched/dg_comm.c).
 * 3. Backward (dg_pass_pp_autodiff, run by the autodiff stage in place of
 *    dg_autodiff): each sent tensor that requires a gradient is seeded with
 *    a recv of its gradient from the reader's stage (send's adjoint), the
 *    loss (last stage only) with one, and each received tensor's gradient
 *    is sent back (recv's adjoint; zeros when nothing here reaches the
 *    loss, so the sender is never left waiting).
 *
 * With virtual stages (dg_pp_chunks > 1) the same holds per virtual
 * stage: node.stage is the node's virtual stage (rank + p * local chunk),
 * the rank's graph holds all its chunks, a tensor crossing from chunk a to
 * a later chunk b on another rank is one send/recv pair (peer: the rank
 * distance mod p), and one between two chunks of the same rank stays a
 * plain edge. The tag slot names the tensor, hence its chunk.
 *
 * Tied embeddings (the output layer reading the word embedding) put one
 * parameter on the first and the last stage: each keeps a copy, and
 * dg_pass_pp_tied sums their gradients between the two (Megatron's
 * embedding group all-reduce, as a send/recv pair each way).
 *
 * The schedule (dg_pass_pp_sched.h) orders each rank's forward and
 * backward blocks of all micro-batches.
 */
#ifndef DG_PASS_PP_H
#define DG_PASS_PP_H

#include "dg_autodiff.h"
#include "dg_graph.h"

/* How the pipeline orders micro-batches (--pipeline-schedule). */
typedef enum dg_pp_schedule {
    DG_PP_1F1B = 0,    /* warmup forwards, one forward one backward, cooldown (PipeDream-Flush) */
    DG_PP_FWD_BWD = 1, /* every forward, then every backward (GPipe): the memory baseline */
    DG_PP_ZB_H1 = 2,   /* 1F1B with each backward split: input gradients (B), then weight gradients (W) */
    DG_PP_SCHEDULE_COUNT
} dg_pp_schedule;

/* "1f1b", "all-forward-all-backward", "zero-bubble-h1". */
const char *dg_pp_schedule_name(dg_pp_schedule s);
/* Name -> schedule; DG_EINPUT naming --pipeline-schedule and the names. */
int dg_pp_schedule_parse(const char *name, dg_pp_schedule *out, dg_err *err);

typedef struct dg_pp_opts {
    int size;         /* --pipeline-model-parallel-size; <= 1: no PP */
    int rank;         /* this rank's stage, 0 .. size-1 */
    int num_layers;   /* --num-layers */
    int first_layers; /* --decoder-first-pipeline-num-layers; < 0: even split */
    int last_layers;  /* --decoder-last-pipeline-num-layers; < 0: even split */
    dg_pp_schedule schedule;
    int virtual_stages; /* interleaved 1F1B: model chunks per rank (Megatron's virtual stages); <= 1: none */
} dg_pp_opts;

/* The split is possible: DG_OK, or DG_EINPUT with one line naming the flag
 * (layers not divisible without the uneven flags, uneven layers that do
 * not add up or leave a stage with none). */
int dg_pp_check(const dg_pp_opts *o, dg_err *err);

/* Layers held by stage s, and the first of them. */
int dg_pp_stage_layers(const dg_pp_opts *o, int s, int *first);

/* The stage that holds decoder layer l (dg_pp_check passed). */
int dg_pp_stage_of_layer(const dg_pp_opts *o, int l);

/* Virtual stages (interleaved 1F1B, Megatron's model chunks): with v =
 * o->virtual_stages > 1 the layers are cut into p v equal chunks, chunk c
 * (the virtual stage) living on rank c mod p as that rank's local chunk
 * c / p; so rank r holds chunks r, r + p, r + 2p, ... and activations flow
 * rank r -> r + 1, the last rank handing chunk c to rank 0's chunk c + 1.
 * The embedding is on virtual stage 0, the output layer and the loss on
 * the last one. Without virtual stages the virtual stage is the stage.
 * dg_pp_chunks: v (1 without). */
int dg_pp_chunks(const dg_pp_opts *o);
/* The virtual stage that holds decoder layer l. */
int dg_pp_vstage_of_layer(const dg_pp_opts *o, int l);

/* Enum slot of the tag in a PP send/recv's attributes (0: no tag). */
enum { DG_COLL_TAG = 8 };

/* One stage boundary on this rank: tensor t of the stage graph, sent to or
 * received from the stage `peer` places away, and its tag slot. */
typedef struct dg_pp_bound {
    int t, peer, slot;
} dg_pp_bound;

/* A parameter this stage and another both read (the word embedding, tied
 * to the output layer): each holds a copy, and their gradients are summed
 * between the two (dg_pass_pp_tied). */
typedef struct dg_pp_shared {
    char name[DG_NAME_LEN];
    int peer, slot;
} dg_pp_shared;

typedef struct dg_pp_bounds {
    int n_in, n_out;
    dg_pp_bound *in;  /* received tensors (their recv's output) */
    dg_pp_bound *out; /* sent tensors */
    int n_shared;
    dg_pp_shared *shared;
    int n_skip;
    int *skip;        /* dg_pass_pp_tied: the copies the gradient norm leaves out */
} dg_pp_bounds;

void dg_pp_bounds_free(dg_pp_bounds *b);

/* Stamp stages on src's nodes and cut out this rank's stage (see above).
 * *out: the stage graph (new); tmap[t] (src->n_tensors ints): src tensor t
 * in it, -1 when this stage does not hold it; *b: its boundaries. */
int dg_pass_pp(const dg_graph *src, const dg_pp_opts *o, dg_graph **out, int *tmap, dg_pp_bounds *b,
               dg_err *err);

/* The backward of a stage graph (3. above). loss: the scaled loss on the
 * last stage, -1 on the others. */
int dg_pass_pp_autodiff(dg_graph *g, const dg_pp_bounds *b, int loss, const dg_autodiff_ops *ops,
                        dg_err *err);

/* Tied parameters (Megatron's embedding group), on the step graph after
 * the micro-batches' gradients are summed: each stage sends its gradient
 * of the shared parameter to the other, receives the other's, and both
 * make the parameter's gradient first stage's + last stage's (the same
 * bits on both, so both copies take the same update). The copy on the
 * later stage goes to b->skip: the gradient norm counts it once, on the
 * earlier stage. */
int dg_pass_pp_tied(dg_graph *g, dg_pp_bounds *b, const dg_autodiff_ops *ops, dg_err *err);

#endif /* DG_PASS_PP_H */
