#!/bin/bash
# `dagatron train` with MoE under tensor parallelism (issue 12, acceptance 1:
# TP=2 x EP=2 with ETP=1 and with ETP=2) against the single-rank run on the
# same global batch: the lm loss, load balancing loss and grad norm of each
# of 5 iterations within 1e-5 relative, and the final parameters (whole
# tensors in the checkpoints) within 1e-5 relative. ETP=2 (Megatron's
# default, = TP) splits each expert's fc1/fc2 over tp; ETP=1 keeps experts
# whole and gives each tp rank half of the tokens, whose expert gradients
# then reduce over tp x dp (sched/dg_grid.h). Also TP=2 alone with each ETP,
# the allgather dispatcher under ETP=1, and TP=2 x DP=2 with ETP=1 and the
# distributed optimizer (whose gradient norm must not take edp x ep for the
# data-parallel group when edp spans tp), the overlap chunks under ETP=2 and
# capacity mode under ETP=1, and each ETP with --sequence-parallel. And a TP=2 x EP=2, ETP=2 run
# resumed from the single-rank checkpoint (each rank takes its ep x tp
# slice of each expert) continues as the single rank does.
# --adam-eps 1e-6 (Megatron's default is 1e-8): a few gradient elements are
# zero in exact arithmetic and rounding noise of a few 1e-9 there, which
# differs with the summation order of any layout, becomes a full-size Adam
# step at eps 1e-8 (seen: one element of a [64, 64] weight, 1.06e-5
# relative L2 at TP=2); 1e-6 keeps the comparison about the layout's math.
set -euo pipefail
exe=$1
ARCH=($(cat "$(dirname "$0")/../common/moe_arch.flags")) # the MoE architecture these tests were written for
args=("${ARCH[@]}" --mock-data --vocab-size 100 --make-vocab-size-divisible-by 32 --num-layers 2 --hidden-size 64 --num-attention-heads 4
      --seq-length 32 --micro-batch-size 2 --global-batch-size 8 --num-experts 4
      --moe-router-topk 2 --moe-ffn-hidden-size 96 --train-iters 5 --lr 1e-3 --log-interval 1
      --lr-decay-style constant --adam-eps 1e-6)
FIELDS="lm loss: [0-9.E+-]+|load_balancing_loss: [0-9.E+-]+|grad norm: [0-9.]+"
. "$(dirname "$0")/../common/train_equiv.sh" # run, check
ref=$(run "$TMP/ref" 1)
echo "np 1 (single rank): $ref"
[ -n "$ref" ] || fail "the single-rank run logged nothing"
tp2=(--tensor-model-parallel-size 2)
check 4 "$ref" "$TMP/ref" "${tp2[@]}" --expert-model-parallel-size 2 --expert-tensor-parallel-size 2
check 4 "$ref" "$TMP/ref" "${tp2[@]}" --expert-model-parallel-size 2 --expert-tensor-parallel-size 1
check 2 "$ref" "$TMP/ref" "${tp2[@]}"
check 2 "$ref" "$TMP/ref" "${tp2[@]}" --expert-tensor-parallel-size 1
# with --sequence-parallel the MoE layer needs whole tokens: the TP pass
# all-gathers them, and that gather's adjoint keeps the slice (whole_grad),
# since every tp rank computes the same whole gradient there
check 4 "$ref" "$TMP/ref" "${tp2[@]}" --sequence-parallel --expert-model-parallel-size 2
check 2 "$ref" "$TMP/ref" "${tp2[@]}" --sequence-parallel --expert-tensor-parallel-size 1
check 4 "$ref" "$TMP/ref" "${tp2[@]}" --expert-model-parallel-size 2 --expert-tensor-parallel-size 1 \
    --moe-token-dispatcher-type allgather
check 4 "$ref" "$TMP/ref" "${tp2[@]}" --expert-tensor-parallel-size 1 --use-distributed-optimizer
check 4 "$ref" "$TMP/ref" "${tp2[@]}" --expert-model-parallel-size 2 --moe-a2a-overlap-chunks 2
# capacity mode: the router drops slots over the whole micro-batch before
# ETP 1 slices the tokens
cap=(--moe-expert-capacity-factor 1.0)
ref_cap=$(run "$TMP/ref_cap" 1 "${cap[@]}")
echo "np 1 (single rank, capacity 1.0): $ref_cap"
[ -n "$ref_cap" ] || fail "the single-rank capacity run logged nothing"
check 4 "$ref_cap" "$TMP/ref_cap" "${cap[@]}" "${tp2[@]}" --expert-model-parallel-size 2 --expert-tensor-parallel-size 1
cont=(--load "$TMP/ref" --train-iters 7)
ref_cont=$(run "$TMP/ref_cont" 1 "${cont[@]}")
echo "np 1 (single rank, resumed): $ref_cont"
[ -n "$ref_cont" ] || fail "the single-rank resume logged nothing"
check 4 "$ref_cont" "$TMP/ref_cont" "${cont[@]}" "${tp2[@]}" --expert-model-parallel-size 2
echo "OK"
