/* dg_mem_estimate.h — will a training run fit in this rank's memory?
 *
 * The memory a run needs is known before it allocates anything big: the
 * flags give the parameters, gradients, optimizer state, the step graph's
 * size and the data's sample indices; the plan (sched/dg_sched.h) gives the
 * activation arena and every persistent buffer exactly. The trainer checks
 * three times, each before the allocations it covers:
 *   1. from the flags, before the data is opened (its indices grow with
 *      --global-batch-size x --train-iters), with the vocabulary the flags
 *      give (0 when the tokenizer will tell);
 *   2. from the flags again once the vocabulary is known, before the step
 *      graph is built (it grows with the micro-batches per step);
 *   3. from the plan, before the runtime allocates it.
 * 1 and 2 are lower bounds (a run they refuse cannot fit); 3 is what the
 * runtime and the optimizer will allocate. A run that does not fit is bad
 * input: one line, "memory: needs X GB, this rank has Y GB (...)".
 */
#ifndef DG_MEM_ESTIMATE_H
#define DG_MEM_ESTIMATE_H

#include "dg_pass_dp.h"
#include "dg_sched.h"
#include "dg_train_config.h"

/* Bytes one rank needs, by part (doubles: absurd sizes must not overflow). */
typedef struct dg_mem_need {
    double params, grads, optimizer; /* fp32 weights; gradients and their buckets; master + moments */
    double activations;              /* one micro-batch's (at least its logits and a hidden state a layer) */
    double inputs;                   /* tokens, targets and loss mask of every micro-batch, the batch buffer */
    double graph;                    /* nodes and tensors of the step graph and its plan */
    double data;                     /* the data's sample indices (dg_feed_open) */
} dg_mem_need;

double dg_mem_need_total(const dg_mem_need *n);

/* Checks 1 and 2: a lower bound from the flags. vocab: the vocabulary before
 * or after padding, 0 if not known yet; data_size: data shards; with_data:
 * count the sample indices (the data is not open yet). */
void dg_mem_estimate_config(const dg_train_config *c, int64_t vocab, int data_size, int with_data,
                            dg_mem_need *n);

/* Check 3: what dg_runtime_bind (arena + persistent tensors), dg_dist_init
 * (per bucket: accumulator, master weights, moments; the all-gather buffer
 * with the distributed optimizer) and the trainer's batch buffer allocate. */
void dg_mem_estimate_plan(const dg_sched_plan *p, const dg_dp_buckets *b, const dg_train_config *c,
                          dg_mem_need *n);

/* DG_OK when n fits dg_mem_available_bytes(ranks_on_node), else DG_EINPUT:
 * "memory: needs X GB, this rank has Y GB (parameters ..., ...)". */
int dg_mem_need_check(const dg_mem_need *n, int ranks_on_node, dg_err *err);

#endif /* DG_MEM_ESTIMATE_H */
