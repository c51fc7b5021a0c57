/* dg_upcycle.h — --moe-use-upcycling and --moe-upcycling-granularity: the
 * first run of an MoE model starts from a dense model, as Megatron-LM's
 * setup_model_and_optimizer and megatron/core/transformer/moe/upcycling_utils.py
 * define it.
 *
 * The dense model is the run's model without experts, its MLPs
 * --ffn-hidden-size x G wide (G: --moe-upcycling-granularity), as Megatron
 * builds it. Its parameters come from the dense checkpoint in --load, or,
 * with no checkpoint there (no --load, or a --load that is the empty --save
 * directory), from its own random init (Megatron's load_checkpoint warns
 * and starts from random too); checkpoints reshard, so any layout of the
 * dense run loads under any layout of the MoE run. Then, for every
 * parameter this rank holds:
 *   - a tensor of the same name in the dense model (embeddings, attention,
 *     norms, the MLPs of dense layers) is copied;
 *   - each MoE layer's experts are the dense MLP cut into G slices of the
 *     FFN: expert e holds slice e % G (SwiGLU's gate and linear halves
 *     sliced alike), fc1 and fc2 times s = a^(1/3) for a GLU, a^(1/2)
 *     otherwise, with a = E G / topk under --moe-router-pre-softmax and G
 *     without; fc1's bias is sliced and scaled the same, fc2's bias copied
 *     whole into every expert;
 *   - the router keeps the MoE model's own init, but expert e takes row
 *     e / G of it, so each group of G experts (the slices of one dense
 *     MLP) is scored alike and chosen together;
 *   - the shared experts keep their own init (Megatron's upcycling does not
 *     touch them).
 * With G = 1 and softmax routing after top-k (probabilities summing to 1 over
 * the chosen copies) the MoE model computes the dense model's output.
 *
 * The trainer then saves the upcycled model to --save at iteration 1 (with
 * fresh optimizer state and no samples consumed, so a restart from it is
 * the run that goes on) and trains from there, as Megatron does.
 */
#ifndef DG_UPCYCLE_H
#define DG_UPCYCLE_H

#include "dg_graph.h"
#include "dg_train_config.h"

/* The flags, from the config alone (dg_train_config_finish_run): upcycling
 * needs routed experts and --save, G >= 1 divides --num-experts, the experts
 * are --ffn-hidden-size wide (Megatron's granularity is the dense FFN over
 * the expert FFN), G > 1 has no dense layers (their MLPs could not take the
 * wider dense FFN), and the MLP is one Megatron's upcycling scales (GeLU or
 * SwiGLU, not quick GeGLU). DG_EINPUT naming the flags. */
int dg_upcycle_check_flags(const dg_train_config *c, dg_err *err);

/* Before any work: --save must not hold a checkpoint (Megatron asserts it:
 * upcycling is for the first run only; later runs drop the flag). */
int dg_upcycle_check_save(const dg_train_config *c, dg_err *err);

/* The dense model that c's MoE model is upcycled from. */
void dg_upcycle_dense_config(const dg_train_config *c, dg_model_config *dense);

/* Whether the dense parameters come from a checkpoint in --load (1) or from
 * the dense model's random init (0). DG_EINPUT as dg_ckpt_plan_load. */
int dg_upcycle_from_load(const dg_train_config *c, int *from_load, dg_err *err);

/* Overwrite the n_params parameters params[] of g (this rank's step graph,
 * at ptrs[id], already holding the MoE model's init) with the upcycled
 * dense model. coord: this rank's place on the mesh. DG_EINPUT when the
 * dense checkpoint is not the dense model of this run (one line naming
 * the checkpoint, the field and the flag). Not collective. */
int dg_upcycle(const dg_train_config *c, const dg_graph *g, const int *params, int n_params, void *const *ptrs,
               const int *coord, dg_err *err);

#endif /* DG_UPCYCLE_H */
