#!/bin/bash
# CP x TP x SP with a one-sequence micro-batch (issue 30, item 4): the MoE
# layer's flatten [1, S, H] -> [S, H] keeps SP's tp split of the rank's
# chunks on the token rows, and CP's relabel of tokens as data refused that
# layout ("after cp: node N 'cp_relabel' ...: a collective is missing before
# it", exit 1), so every MoE model at --micro-batch-size 1 under CP x TP x SP
# crashed in the graph passes, neither trained nor refused. Here:
#  1. the step graph builds for the issue's shape (CP=2 x TP=8 x SP, GQA,
#     2 layers, 16 ranks) in `simulate` and in `dump` for a tp rank > 0,
#     MoE and dense;
#  2. `dagatron train` of the tiny MoE GQA model at micro-batch 1, at
#     CP=2 x TP=2 x SP (p2p and a2a), x EP=2 (8 ranks, alltoall
#     dispatcher) and x PP=2 (8 ranks), logs the single-rank run's lm
#     loss, grad norm and MoE losses for each of 4 iterations within 1e-5
#     relative and ends with its parameters (within 1e-5 relative).
set -euo pipefail
exe=$1
ARCH=($(cat "$(dirname "$0")/../common/moe_arch.flags"))
FIELDS="lm loss: [0-9.E+-]+|load_balancing_loss: [0-9.E+-]+|z_loss: [0-9.E+-]+|grad norm: [0-9.]+"
. "$(dirname "$0")/../common/train_equiv.sh" # fail, TMP, run, check

big=(--num-layers 2 --hidden-size 1024 --num-attention-heads 16 --group-query-attention --num-query-groups 8
     --seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 16 --mock-data
     --vocab-size 32000 --context-parallel-size 2 --tensor-model-parallel-size 8 --sequence-parallel)
for ne in 8 0; do
    "$exe" simulate "${ARCH[@]}" "${big[@]}" --num-experts $ne --world-size 16 --device-profile h100 \
        >"$TMP/sim.out" 2>&1 || fail "simulate CP=2 x TP=8 x SP, mbs 1, $ne experts: $(tail -1 "$TMP/sim.out")"
    grep -q "simulator: built" "$TMP/sim.out" || fail "simulate ($ne experts) printed no summary"
    "$exe" dump "${ARCH[@]}" "${big[@]}" --num-experts $ne --world-size 16 --rank 3 --graph step \
        -o "$TMP/dump.json" 2>"$TMP/dump.err" || fail "dump CP=2 x TP=8 x SP, mbs 1, $ne experts: $(cat "$TMP/dump.err")"
done

args=("${ARCH[@]}" --mock-data --vocab-size 100 --make-vocab-size-divisible-by 64 --num-layers 2 --hidden-size 64
      --seq-length 32 --micro-batch-size 1 --global-batch-size 4 --train-iters 4 --lr 1e-3 --log-interval 1
      --lr-decay-style constant)
# GQA at --adam-eps 1e-6, as cp_mixed_train_cli.sh says why
moe=(--num-attention-heads 8 --group-query-attention --num-query-groups 4 --num-experts 4 --adam-eps 1e-6)
ref=$(run "$TMP/ref" 1 "${moe[@]}")
echo "np 1 (single rank): $ref"
grep -q "load_balancing_loss: .*z_loss: " <<<"$ref" || fail "the single-rank run logged no MoE losses"
cptp=(--context-parallel-size 2 --tensor-model-parallel-size 2 --sequence-parallel)
check 4 "$ref" "$TMP/ref" "${moe[@]}" "${cptp[@]}"
check 4 "$ref" "$TMP/ref" "${moe[@]}" "${cptp[@]}" --cp-comm-type a2a
check 8 "$ref" "$TMP/ref" "${moe[@]}" "${cptp[@]}" --expert-model-parallel-size 2 \
    --moe-token-dispatcher-type alltoall
check 8 "$ref" "$TMP/ref" "${moe[@]}" "${cptp[@]}" --pipeline-model-parallel-size 2
echo "OK"
