#!/bin/bash
# --calculate-per-token-loss (issue 29), Megatron's meaning: each
# micro-batch adds its summed token losses and its MoE losses (aux, z)
# unscaled, and the global batch's sum is divided by its N tokens. With
# every token counted (dagatron's loss mask is all ones) a micro-batch's
# token sum over N is its mean over (micro-batches x data shards), the
# default weight, while the MoE losses weigh 1/N instead of
# 1/(micro-batches x data shards): 1/(B S) of the default. So:
#  - the flag changes an MoE run, and the run equals the default one with
#    --moe-aux-loss-coeff and --moe-z-loss-coeff divided by B S (lm loss,
#    grad norm, final parameters within 1e-5);
#  - TP=2 with SP, CP=2, EP=2, PP=2 and DP=2 with the distributed optimizer
#    match the single-rank run over 5 iterations.
set -euo pipefail
exe=$1
here=$(dirname "$0")
ARCH=($(cat "$here/../common/moe_arch.flags"))
# B S = 2 x 32 = 64 tokens per micro-batch; 4 micro-batches of 2 per step
args=("${ARCH[@]}" --mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --num-attention-heads 4
      --group-query-attention --num-query-groups 2 --num-experts 4 --moe-router-topk 2 --seq-length 32
      --micro-batch-size 2 --global-batch-size 8 --train-iters 5 --lr 1e-3 --log-interval 1 --eval-iters 0
      --make-vocab-size-divisible-by 32 --moe-aux-loss-coeff 1.0 --moe-z-loss-coeff 0.5)
FIELDS="lm loss: [0-9.E+-]+|grad norm: [0-9.]+"
source "$here/../common/train_equiv.sh"

want=$(run "$TMP/ref" 1 --calculate-per-token-loss)
echo "np 1 --calculate-per-token-loss: $want"
[ -n "$want" ] || fail "the single-rank run logged nothing"
plain=$(run "$TMP/plain" 1)
[ "$want" != "$plain" ] || fail "--calculate-per-token-loss changed nothing"
# the same run by the default normalisation with the MoE coefficients over B S = 64
check 1 "$want" "$TMP/ref" --moe-aux-loss-coeff 0.015625 --moe-z-loss-coeff 0.0078125
check 2 "$want" "$TMP/ref" --calculate-per-token-loss --tensor-model-parallel-size 2 --sequence-parallel
check 2 "$want" "$TMP/ref" --calculate-per-token-loss --context-parallel-size 2
check 2 "$want" "$TMP/ref" --calculate-per-token-loss --expert-model-parallel-size 2
check 2 "$want" "$TMP/ref" --calculate-per-token-loss --pipeline-model-parallel-size 2
check 2 "$want" "$TMP/ref" --calculate-per-token-loss --use-distributed-optimizer
echo "OK"
