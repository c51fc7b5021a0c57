#!/bin/bash
# `dagatron train --attention-backend unfused|local` (Megatron's unfused
# attention: the S x S scores, softmax, attention dropout and the product
# with V as nodes; ops/dg_op_attn_unfused.h):
#  - without dropout it trains as the fused attention does (losses, grad
#    norms and final parameters within 1e-5), GQA included;
#  - with --attention-dropout 0.1 (and Megatron's default --hidden-dropout
#    0.1) every layout draws the single rank's masks: TP=2 without SP (the
#    chain on each rank's heads, its dropout with the tp coordinate) and
#    with SP, PP=2, DP=2 with the distributed optimizer, and EP=2 on the MoE
#    model match the single-rank run within 1e-5;
#  - selective recompute (core_attn: the chain and its dropout) gives the
#    same bits as no recompute;
#  - the unfused backend with CP, and --use-flash-attn with it are one line
#    each, exit 2. (The fused attention's own dropout: attn_dropout_cli.sh.)
set -euo pipefail
exe=$1
here=$(dirname "$0")
ARCH=($(cat "$here/../common/moe_arch.flags"))
base=(--mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --seq-length 32 --micro-batch-size 2
      --global-batch-size 8 --train-iters 4 --lr 1e-3 --log-interval 1 --lr-decay-style constant --eval-iters 0
      --make-vocab-size-divisible-by 32)
FIELDS="lm loss: [0-9.E+-]+|grad norm: [0-9.]+"
# Megatron's dense GPT (GeLU, LayerNorm, learned positions, biases); the key
# bias's gradient is zero in exact arithmetic, so a large Adam epsilon keeps
# its rounding noise from being normalised into a step, and it is compared
# within 1e-8 absolute, not relative (as tp_sp_train_cli.sh)
args=("${base[@]}" --num-experts 0 --num-attention-heads 4 --adam-eps 1)
PARAMS_ATOL=1e-3
source "$here/../common/train_equiv.sh"

# unfused without dropout = fused
want=$(run "$TMP/fused" 1 --hidden-dropout 0 --attention-dropout 0)
echo "np 1 fused: $want"
[ -n "$want" ] || fail "the fused run logged nothing"
check 1 "$want" "$TMP/fused" --hidden-dropout 0 --attention-dropout 0 --attention-backend unfused
gqa=("${ARCH[@]}" --num-experts 0 --num-attention-heads 8 --group-query-attention --num-query-groups 2)
want=$(run "$TMP/fused_gqa" 1 "${gqa[@]}")
check 1 "$want" "$TMP/fused_gqa" "${gqa[@]}" --attention-backend local

# attention dropout under every layout
drop=(--attention-backend local --attention-dropout 0.1 --hidden-dropout 0.1)
want=$(run "$TMP/ref" 1 "${drop[@]}")
echo "np 1 ${drop[*]}: $want"
[ -n "$want" ] || fail "the single-rank run with attention dropout logged nothing"
nodrop=$(run "$TMP/nodrop" 1 --attention-backend local --attention-dropout 0 --hidden-dropout 0.1)
[ "$want" != "$nodrop" ] || fail "--attention-dropout 0.1 changed nothing"
check 2 "$want" "$TMP/ref" "${drop[@]}" --tensor-model-parallel-size 2
check 2 "$want" "$TMP/ref" "${drop[@]}" --tensor-model-parallel-size 2 --sequence-parallel
check 2 "$want" "$TMP/ref" "${drop[@]}" --pipeline-model-parallel-size 2
check 2 "$want" "$TMP/ref" "${drop[@]}" --use-distributed-optimizer
moe=("${ARCH[@]}" --num-experts 4 --num-attention-heads 4 --moe-router-topk 2 --attention-backend unfused
     --attention-dropout 0.1)
want=$(run "$TMP/ref_moe" 1 "${moe[@]}")
check 2 "$want" "$TMP/ref_moe" "${moe[@]}" --expert-model-parallel-size 2

# selective recompute of core attention: the same bits
plain=$(run "$TMP/plain" 1 "${drop[@]}")
rec=$(run "$TMP/rec" 1 "${drop[@]}" --recompute-activations)
echo "selective recompute: $rec"
[ "$plain" = "$rec" ] || fail "selective recompute changed the log: '$rec' vs '$plain'"

source "$(dirname "$0")/../common/refuse.sh"
refuse() { dg_refuse "$1" $DG_MPIRUN -np 2 "$exe" train "${args[@]}" "${@:2}"; }
refuse "--attention-backend unfused: --context-parallel-size 2 runs the fused attention" \
    --attention-backend unfused --context-parallel-size 2
refuse "--use-flash-attn contradicts --attention-backend local" --attention-backend local --use-flash-attn
echo "OK"
