#!/bin/bash
# `dagatron train` with context parallelism stacked on tensor and expert
# parallelism (issue 14, acceptance 1) against the single-rank run on the
# same global batch. Dense: CP=2 x TP=2 (heads split over tp inside each cp
# rank, the ring over the local heads), with sequence parallelism, with GQA
# (one query group per tp rank), with GQA and SP, with the all-to-all (--cp-comm-type a2a:
# each rank's heads split over cp) and CP=2 x TP=2 x DP=2 with the
# distributed optimizer; CP=2 x PP=2 (1F1B and zero-bubble H1: the CP ring's
# send/recv chained per micro-batch inside the pipeline schedule, a stage's
# activations crossing split over cp). MoE (router and dispatch on each rank's tokens, CP
# folded into the expert grid; the aux loss from tokens per expert summed
# over cp, the z loss a mean over cp): CP=2, CP=2 x EP=2 (allgather and
# alltoall dispatchers), CP=2 x TP=2 (with SP too, p2p and a2a: SP's scatter
# of the MoE layer's output splits each rank's chunks over tp; and with EP=2,
# 8 ranks) and CP=2 x PP=2. Megatron's default dense GPT (LayerNorm, biases, learned positions
# added before SP's scatter, hidden dropout 0.1 drawn on each rank's slice
# of its chunks) at CP=2 x TP=2 x SP, MHA and GQA, p2p and a2a; and CP=2 x
# TP=3 x SP, where a rank's sequence slice straddles its two chunks (issue
# 30: these crashed in the graph passes). Each must log the single-rank
# run's lm loss, grad norm and MoE losses for each of 5 iterations, within
# 1e-5 relative, and end with its parameters (checkpoints hold whole
# tensors; compared within 1e-5 relative).
set -euo pipefail
exe=$1
# "all" (the slow-labelled registration) adds the 6- and 8-rank layouts and
# the a2a and dense GQA variants of CP x TP x SP; the default suite runs
# each fixed case once (MoE, GQA and dense with dropout, p2p) and the dumps
ALL=0; [ "${2:-}" = all ] && ALL=1
ARCH=($(cat "$(dirname "$0")/../common/moe_arch.flags"))
# the vocabulary padded alike at tp 1 and 2 (to 128), so the runs share it
common=(--mock-data --vocab-size 100 --make-vocab-size-divisible-by 64 --num-layers 2 --hidden-size 64
        --seq-length 32 --micro-batch-size 2 --global-batch-size 8 --train-iters 5 --lr 1e-3
        --log-interval 1 --lr-decay-style constant)
args=("${ARCH[@]}" "${common[@]}")
mha=(--num-attention-heads 4 --num-experts 0)
# GQA runs at --adam-eps 1e-6 (Megatron's default is 1e-8): an element of
# linear_v's gradient that cancels to ~4e-8 (the median is ~3e-3) differs by
# a few 1e-9 with the layout's summation order (fp32 rounding), and at eps
# 1e-8 Adam's first step turns that into a 7e-6 move of one parameter, 1.1e-5
# relative L2 of the [16, 64] weight; 1e-6 keeps the comparison about the
# layout's math (as tests/etp/etp_train_cli.sh).
gqa=(--num-attention-heads 8 --group-query-attention --num-query-groups 2 --num-experts 0 --adam-eps 1e-6)
FIELDS="lm loss: [0-9.E+-]+|load_balancing_loss: [0-9.E+-]+|z_loss: [0-9.E+-]+|grad norm: [0-9.]+"
. "$(dirname "$0")/../common/train_equiv.sh" # fail, TMP, run, check
cptp=(--context-parallel-size 2 --tensor-model-parallel-size 2)
# the step graph of dump's tiny MoE model with GQA at CP=2 x TP=2 x SP, for
# each --cp-comm-type, builds (no MPI: the fastest sign of the issue-30 crash)
for ct in p2p a2a; do
    "$exe" dump --world-size 4 "${cptp[@]}" --sequence-parallel --cp-comm-type $ct --num-layers 2 --hidden-size 64 \
        --num-attention-heads 8 --group-query-attention --num-query-groups 4 --seq-length 32 --graph step \
        -o "$TMP/dump_$ct.json" 2>"$TMP/dump.err" || fail "dump at CP x TP x SP ($ct): $(cat "$TMP/dump.err")"
    grep -q '"scatter_to_group"' "$TMP/dump_$ct.json" || fail "dump ($ct): no SP scatter in the MoE layer"
done
ref=$(run "$TMP/ref" 1 "${mha[@]}")
echo "np 1 (single rank): $ref"
[ -n "$ref" ] || fail "the single-rank run logged nothing"
check 4 "$ref" "$TMP/ref" "${mha[@]}" "${cptp[@]}"
check 4 "$ref" "$TMP/ref" "${mha[@]}" "${cptp[@]}" --sequence-parallel
check 4 "$ref" "$TMP/ref" "${mha[@]}" "${cptp[@]}" --cp-comm-type a2a
check 8 "$ref" "$TMP/ref" "${mha[@]}" "${cptp[@]}" --use-distributed-optimizer
check 4 "$ref" "$TMP/ref" "${mha[@]}" --context-parallel-size 2 --pipeline-model-parallel-size 2
check 4 "$ref" "$TMP/ref" "${mha[@]}" --context-parallel-size 2 --pipeline-model-parallel-size 2 \
    --pipeline-schedule zero-bubble-h1
ref_gqa=$(run "$TMP/ref_gqa" 1 "${gqa[@]}")
echo "np 1 (single rank, GQA): $ref_gqa"
[ -n "$ref_gqa" ] || fail "the single-rank GQA run logged nothing"
check 4 "$ref_gqa" "$TMP/ref_gqa" "${gqa[@]}" "${cptp[@]}"
check 4 "$ref_gqa" "$TMP/ref_gqa" "${gqa[@]}" "${cptp[@]}" --sequence-parallel
moe=(--num-attention-heads 4 --num-experts 4)
ref_moe=$(run "$TMP/ref_moe" 1 "${moe[@]}")
echo "np 1 (single rank, MoE): $ref_moe"
grep -q "load_balancing_loss: .*z_loss: " <<<"$ref_moe" || fail "the single-rank MoE run logged no MoE losses"
check 2 "$ref_moe" "$TMP/ref_moe" "${moe[@]}" --context-parallel-size 2
check 4 "$ref_moe" "$TMP/ref_moe" "${moe[@]}" --context-parallel-size 2 --expert-model-parallel-size 2
check 4 "$ref_moe" "$TMP/ref_moe" "${moe[@]}" --context-parallel-size 2 --expert-model-parallel-size 2 \
    --moe-token-dispatcher-type alltoall
check 4 "$ref_moe" "$TMP/ref_moe" "${moe[@]}" "${cptp[@]}"
check 4 "$ref_moe" "$TMP/ref_moe" "${moe[@]}" "${cptp[@]}" --sequence-parallel
if [ $ALL = 1 ]; then
check 4 "$ref_moe" "$TMP/ref_moe" "${moe[@]}" "${cptp[@]}" --sequence-parallel --cp-comm-type a2a
check 8 "$ref_moe" "$TMP/ref_moe" "${moe[@]}" "${cptp[@]}" --sequence-parallel --expert-model-parallel-size 2 \
    --moe-token-dispatcher-type alltoall
fi
check 4 "$ref_moe" "$TMP/ref_moe" "${moe[@]}" --context-parallel-size 2 --pipeline-model-parallel-size 2
# Megatron's default dense GPT. The key bias's gradient is zero in exact
# arithmetic (softmax is invariant to it), so Adam would steer it by
# rounding noise that differs with the layout: a large epsilon keeps that
# noise from being normalised up to a step, and tensors of norm below 1e-3
# (the key bias) compare absolutely (as tests/tp/tp_sp_train_cli.sh).
args=("${common[@]}")
PARAMS_ATOL=1e-3
dense=(--num-experts 0 --num-attention-heads 4 --hidden-dropout 0.1 --adam-eps 1)
dense_gqa=(--num-experts 0 --num-attention-heads 8 --group-query-attention --num-query-groups 2 --hidden-dropout 0.1
           --adam-eps 1)
ref_dense=$(run "$TMP/ref_dense" 1 "${dense[@]}")
echo "np 1 (single rank, dense GPT): $ref_dense"
[ -n "$ref_dense" ] || fail "the single-rank dense run logged nothing"
check 4 "$ref_dense" "$TMP/ref_dense" "${dense[@]}" "${cptp[@]}" --sequence-parallel
[ $ALL = 0 ] && { echo "OK"; exit 0; }
check 4 "$ref_dense" "$TMP/ref_dense" "${dense[@]}" "${cptp[@]}" --sequence-parallel --cp-comm-type a2a
ref_dense_gqa=$(run "$TMP/ref_dense_gqa" 1 "${dense_gqa[@]}")
echo "np 1 (single rank, dense GPT, GQA): $ref_dense_gqa"
[ -n "$ref_dense_gqa" ] || fail "the single-rank dense GQA run logged nothing"
check 4 "$ref_dense_gqa" "$TMP/ref_dense_gqa" "${dense_gqa[@]}" "${cptp[@]}" --sequence-parallel
# TP=3: each rank's slice of its 24 tokens (two chunks of 12) is 8, so tp
# rank 1's straddles the chunks; vocabulary 101 + EOD pads alike at tp 1 and 3
args=(--mock-data --vocab-size 101 --make-vocab-size-divisible-by 2 --num-layers 2 --hidden-size 48
      --seq-length 48 --micro-batch-size 2 --global-batch-size 4 --train-iters 3 --lr 1e-3 --log-interval 1
      --lr-decay-style constant)
tp3=(--num-experts 0 --num-attention-heads 6 --hidden-dropout 0.3 --adam-eps 1)
ref_tp3=$(run "$TMP/ref_tp3" 1 "${tp3[@]}")
echo "np 1 (single rank, dense GPT, 6 heads): $ref_tp3"
[ -n "$ref_tp3" ] || fail "the single-rank 6-head run logged nothing"
check 6 "$ref_tp3" "$TMP/ref_tp3" "${tp3[@]}" --context-parallel-size 2 --tensor-model-parallel-size 3 \
    --sequence-parallel
echo "OK"
