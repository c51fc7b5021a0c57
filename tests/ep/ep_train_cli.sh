#!/bin/bash
# `dagatron train` with expert parallelism against the single-rank run on
# the same global batch (issue 7, acceptance 1): EP ranks are data-parallel
# for the dense part (Megatron's expert-DP folding), so EP=2 on 2 ranks, and
# EP=4 and EP=2 x DP=2 on 4 ranks, for every dispatcher and with the overlap
# chunks on, and EP=2 x DP=2 with the distributed optimizer (whose gradient
# norm sums the expert shards over EDP x EP), must log the single-rank run's
# lm loss, load balancing loss and grad norm for each of 5 iterations, within
# 1e-5 relative, and end with its parameters (compared in the final
# checkpoints, 1e-5 relative). And EP sizes Megatron refuses are one line
# naming the flag, exit 2: experts not a multiple of EP, EP on a dense model.
set -euo pipefail
exe=$1
ARCH=($(cat "$DG_SRC/tests/common/moe_arch.flags")) # the MoE architecture these tests were written for
args=("${ARCH[@]}" --mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --num-attention-heads 4
      --seq-length 32 --micro-batch-size 2 --global-batch-size 8 --num-experts 4
      --moe-router-topk 2 --moe-ffn-hidden-size 96 --train-iters 5 --lr 1e-3 --log-interval 1
      --lr-decay-style constant)
FIELDS="lm loss: [0-9.E+-]+|load_balancing_loss: [0-9.E+-]+|grad norm: [0-9.]+"
. "$(dirname "$0")/../common/train_equiv.sh" # run, check
. "$(dirname "$0")/../common/refuse.sh" # dg_refuse
dg_refuse "--num-experts 3: expected a multiple of --expert-model-parallel-size 2" \
  $DG_MPIRUN -np 2 "$exe" train "${args[@]}" --num-experts 3 --expert-model-parallel-size 2
dg_refuse "--expert-model-parallel-size 2 needs routed experts" \
  $DG_MPIRUN -np 2 "$exe" train "${args[@]}" --num-experts 0 --expert-model-parallel-size 2
ref=$(run "$TMP/ref" 1)
echo "np 1 (single rank): $ref"
[ -n "$ref" ] || fail "the single-rank run logged nothing"
check 2 "$ref" "$TMP/ref" --expert-model-parallel-size 2
check 2 "$ref" "$TMP/ref" --expert-model-parallel-size 2 --moe-a2a-overlap-chunks 2
check 2 "$ref" "$TMP/ref" --expert-model-parallel-size 2 --moe-token-dispatcher-type allgather
check 4 "$ref" "$TMP/ref" --expert-model-parallel-size 4
check 4 "$ref" "$TMP/ref" --expert-model-parallel-size 2
check 4 "$ref" "$TMP/ref" --expert-model-parallel-size 2 --use-distributed-optimizer --overlap-param-gather
echo "OK"
