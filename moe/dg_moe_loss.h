/* dg_moe_loss.h — the router's auxiliary losses: load balancing and z-loss.
 *
 * Load balancing (Switch Transformer / GShard form, Megatron's
 * switch_load_balancing_loss_func, --moe-router-load-balancing-type aux_loss):
 *
 *     aux = coeff * E / (k * T^2) * sum_e P_e * f_e
 *     P_e = sum_t score[t, e]   over all E experts (not only the selected):
 *           softmax(logits_t), or for the sigmoid score function
 *           sigmoid(logits_t) / (sum_e sigmoid(logits_t,e) + 1e-20)
 *           (Megatron's compute_routing_scores_for_aux_loss)
 *     f_e = number of (token, slot) pairs routed to e: a constant, so the
 *           gradient flows through P only
 *
 * f comes from the optional second input:
 *   - absent (routing = -1): the top-k of each token's aux scores above,
 *     exactly Megatron's compute_routing_scores_for_aux_loss, which ignores
 *     group limits, expert bias and capacity. Use this to match Megatron in
 *     every router mode.
 *   - i32 indices [T, k] (entries -1 are not counted), or
 *   - i32 per-expert counts [E], e.g. the router's tokens_per_expert output
 *     (before capacity dropping). Without groups or expert bias both give
 *     the same f as the absent form.
 * T is the local token count (no SP/CP all-reduce here).
 *
 * Sequence-level variant (--moe-router-load-balancing-type seq_aux_loss):
 * the T tokens are B sequences of S = T/B; P and f are taken per sequence
 * and the loss is their average:
 *     seq_aux = coeff * E / (k * S^2) / B * sum_b sum_e P_be * f_be
 * Token t belongs to sequence t % B when the tokens are in [S, B] order
 * (seq_major, Megatron's layout, where it reshapes [S*B, E] to [S, B*E]),
 * or t / S in [B, S] order. B = 1 is the plain loss above. The routing
 * input must then be indices [T, k], absent (counts [E] have no
 * sequences), or, with the attr seq_counts, i32 counts per sequence [B, E]
 * (what CP's rewrite sums over the context ranks: each holds part of every
 * sequence, dg_moe_seq_counts gives its part of Megatron's own counts).
 *
 * z-loss (ST-MoE, Megatron's z_loss_func, --moe-z-loss-coeff):
 *
 *     z = coeff * mean_t logsumexp(logits_t)^2
 *
 * Both return f32 scalars. Megatron also scales these losses' gradients by
 * the main loss's backward scale (MoEAuxLossAutoScaler); that belongs to the
 * model builder, which adds them into the total loss.
 *
 * Attr slots:
 *   "moe_aux_loss", "moe_aux_loss_grad": i[0] topk, i[1] score function
 *       (dg_moe_score_fn), i[2] num_seqs (0 or 1: whole batch), i[3]
 *       seq_major, i[4] seq_counts (routing is counts [B, E]), f[0] coeff
 *   "moe_seq_counts": i[0..3] as the aux loss's
 *   "moe_z_loss", "moe_z_loss_grad": f[0] coeff
 * Inputs: "moe_aux_loss" (logits [, routing]), "moe_z_loss" (logits).
 * Backward ops take (dloss scalar, logits [, routing]) and give dlogits [T, E].
 */
#ifndef DG_MOE_LOSS_H
#define DG_MOE_LOSS_H

#include "dg_cpu_moe.h"
#include "dg_op.h"

extern const dg_op_def dg_op_moe_aux_loss;
extern const dg_op_def dg_op_moe_aux_loss_grad;
extern const dg_op_def dg_op_moe_z_loss;
extern const dg_op_def dg_op_moe_z_loss_grad;
extern const dg_op_def dg_op_moe_seq_counts;

/* Load-balancing loss of logits [T, E] given `routing`: i32 indices [T, k],
 * i32 counts [E], or -1 (Megatron's own top-k of the aux scores). Returns
 * the scalar's id, or -1 after a builder error. */
int dg_moe_aux_loss(dg_graph *g, int logits, int routing, int topk, dg_moe_score_fn score,
                    double coeff);

/* The sequence-level loss over num_seqs sequences, tokens in [S, B]
 * order when seq_major, else [B, S]. Returns the scalar's id, or -1. */
int dg_moe_seq_aux_loss(dg_graph *g, int logits, int routing, int topk, dg_moe_score_fn score,
                        double coeff, int64_t num_seqs, int seq_major);

/* The sequence-level loss given counts [num_seqs, E] (i32) in place of a
 * routing input (the attr seq_counts). Returns the scalar's id, or -1. */
int dg_moe_seq_aux_loss_counts(dg_graph *g, int logits, int counts, int topk, dg_moe_score_fn score,
                               double coeff, int64_t num_seqs, int seq_major);

/* Megatron's own counts per sequence: i32 [num_seqs, E], each token's top k
 * of its aux scores counted in its sequence (no gradient). */
int dg_moe_seq_counts(dg_graph *g, int logits, int topk, dg_moe_score_fn score, int64_t num_seqs, int seq_major);

/* z-loss of logits [T, E]. Returns the scalar's id, or -1. */
int dg_moe_z_loss(dg_graph *g, int logits, double coeff);

#endif /* DG_MOE_LOSS_H */
