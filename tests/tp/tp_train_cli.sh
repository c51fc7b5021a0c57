#!/bin/bash
# `dagatron train` with tensor parallelism against the single-rank run on the
# same global batch (issue 12, acceptance 1, dense model): TP=2, TP=4,
# TP=2 x DP=2 with the distributed optimizer (whose gradient norm sums the
# tp-split weights' shards over tp x dp and the replicated ones over dp
# only), and TP=2 with GQA (8 heads, 2 query groups) must log the
# single-rank run's lm loss and grad norm for each of 5 iterations, within
# 1e-5 relative, and end with its parameters (the checkpoints hold whole
# tensors, gathered over tp; compared within 1e-5 relative); and a TP=2 run
# resumed from the single-rank checkpoint continues as the single rank does.
set -euo pipefail
exe=$1
# The architecture these tests were written for (SwiGLU, RMSNorm, RoPE, no
# biases, no dropout), dense: a key bias's gradient is zero in exact
# arithmetic, so Adam would steer it by rounding noise that differs with the
# layout.
ARCH=($(cat "$(dirname "$0")/../common/moe_arch.flags"))
common=("${ARCH[@]}" --mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --seq-length 32 --micro-batch-size 2
        --global-batch-size 8 --num-experts 0 --train-iters 5 --lr 1e-3 --log-interval 1
        --lr-decay-style constant)
mha=(--num-attention-heads 4)
gqa=(--num-attention-heads 8 --group-query-attention --num-query-groups 2)
FIELDS="lm loss: [0-9.E+-]+|grad norm: [0-9.]+"
args=("${common[@]}")
. "$(dirname "$0")/../common/train_equiv.sh" # run, check
ref=$(run "$TMP/ref" 1 "${mha[@]}")
echo "np 1 (single rank): $ref"
[ -n "$ref" ] || fail "the single-rank run logged nothing"
check 2 "$ref" "$TMP/ref" "${mha[@]}" --tensor-model-parallel-size 2
check 4 "$ref" "$TMP/ref" "${mha[@]}" --tensor-model-parallel-size 4
check 4 "$ref" "$TMP/ref" "${mha[@]}" --tensor-model-parallel-size 2 --use-distributed-optimizer --overlap-param-gather
# Resuming the single-rank checkpoint (whole tensors) at TP=2 keeps each
# rank's shards of it (weights and moments): 2 more iterations match the
# single rank's resume.
cont=(--load "$TMP/ref" --train-iters 7)
ref_cont=$(run "$TMP/ref_cont" 1 "${mha[@]}" "${cont[@]}")
echo "np 1 (single rank, resumed): $ref_cont"
[ -n "$ref_cont" ] || fail "the single-rank resume logged nothing"
check 2 "$ref_cont" "$TMP/ref_cont" "${mha[@]}" "${cont[@]}" --tensor-model-parallel-size 2
ref_gqa=$(run "$TMP/ref_gqa" 1 "${gqa[@]}")
echo "np 1 (single rank, GQA): $ref_gqa"
[ -n "$ref_gqa" ] || fail "the single-rank GQA run logged nothing"
check 2 "$ref_gqa" "$TMP/ref_gqa" "${gqa[@]}" --tensor-model-parallel-size 2
echo "OK"
