#!/bin/bash
# Qwen3-MoE's attention in `dagatron train` (issue 29): --kv-channels (heads
# of their own size, not --hidden-size / --num-attention-heads) and
# --qk-layernorm (a norm of --normalization's kind over each head's
# queries and keys, before RoPE) on the MoE model (GQA, RMSNorm, SwiGLU):
#  - the flags change the model (the head size and the norms' weights);
#  - TP=2 (the norms' weights read on each rank's heads: their gradient is
#    all-reduced over tp), TP=2 with SP, CP=2, EP=2, PP=2 and DP=2 with the
#    distributed optimizer match the single-rank run over 5 iterations:
#    losses, grad norms and final parameters within 1e-5;
#  - a checkpoint records them: resuming without --kv-channels is one line,
#    exit 2; an odd head size under RoPE too.
# The model itself against PyTorch: tests/reference (test_ref_moe_qwen3_*).
set -euo pipefail
exe=$1
here=$(dirname "$0")
ARCH=($(cat "$here/../common/moe_arch.flags"))
args=("${ARCH[@]}" --mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --num-attention-heads 4
      --group-query-attention --num-query-groups 2 --num-experts 4 --moe-router-topk 2 --seq-length 32
      --micro-batch-size 2 --global-batch-size 8 --train-iters 5 --lr 1e-3 --log-interval 1 --eval-iters 0
      --make-vocab-size-divisible-by 32)
qwen3=(--kv-channels 24 --qk-layernorm)
FIELDS="lm loss: [0-9.E+-]+|grad norm: [0-9.]+"
source "$here/../common/train_equiv.sh"

want=$(run "$TMP/ref" 1 "${qwen3[@]}")
echo "np 1 ${qwen3[*]}: $want"
[ -n "$want" ] || fail "the single-rank run logged nothing"
plain=$(run "$TMP/plain" 1)
[ "$want" != "$plain" ] || fail "--kv-channels 24 --qk-layernorm changed nothing"
check 2 "$want" "$TMP/ref" "${qwen3[@]}" --tensor-model-parallel-size 2
check 2 "$want" "$TMP/ref" "${qwen3[@]}" --tensor-model-parallel-size 2 --sequence-parallel
check 2 "$want" "$TMP/ref" "${qwen3[@]}" --context-parallel-size 2
check 2 "$want" "$TMP/ref" "${qwen3[@]}" --expert-model-parallel-size 2
check 2 "$want" "$TMP/ref" "${qwen3[@]}" --pipeline-model-parallel-size 2
check 2 "$want" "$TMP/ref" "${qwen3[@]}" --use-distributed-optimizer

source "$here/../common/refuse.sh"
refuse() { dg_refuse "$1" $DG_MPIRUN -np 1 "$exe" train "${args[@]}" "${@:2}"; }
refuse "--kv-channels" --load "$TMP/ref" --train-iters 6
refuse "is odd; RoPE needs it even" --kv-channels 15
echo "OK"
