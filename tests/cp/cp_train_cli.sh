#!/bin/bash
# `dagatron train` with context parallelism against the single-rank run on
# the same global batch (issue 14, acceptance 1, dense model): CP=2, CP=4,
# CP=2 x DP=2 with the distributed optimizer, CP=2 with GQA (8 heads, 2
# query groups), CP=2 with learned absolute positions, and the all-to-all
# variant (--cp-comm-type a2a) at CP=2, CP=4 and CP=2 with GQA must log the
# single-rank run's lm loss and grad norm for each of 5 iterations (and so
# must CP=2 and CP=4 with hidden dropout), within
# 1e-5 relative, and end with its parameters (replicated over cp, so the
# checkpoint is one rank's; compared within 1e-5 relative); a CP=2 run
# resumed from the single-rank checkpoint continues as the single rank does.
set -euo pipefail
exe=$1
# The architecture of the TP tests (SwiGLU, RMSNorm, RoPE, no biases, no
# dropout but in the dropout runs below), dense.
ARCH=($(cat "$(dirname "$0")/../common/moe_arch.flags"))
args=("${ARCH[@]}" --mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --seq-length 32 --micro-batch-size 2
      --global-batch-size 8 --num-experts 0 --train-iters 5 --lr 1e-3 --log-interval 1
      --lr-decay-style constant --adam-eps 1e-6)
mha=(--num-attention-heads 4)
# --adam-eps 1e-6 (Megatron's default is 1e-8): an element of GQA's
# linear_v's gradient that cancels to ~4e-8 (the median is ~3e-3) differs by
# a few 1e-9 with the layout's summation order (fp32 rounding), and at eps
# 1e-8 Adam's first step turns that into a 7e-6 move of one parameter, 1.1e-5
# relative L2 of the [16, 64] weight; 1e-6 keeps the comparison about the
# layout's math (as tests/etp/etp_train_cli.sh). The dropout case's
# linear_proj has such an element too.
gqa=(--num-attention-heads 8 --group-query-attention --num-query-groups 2)
learned=(--num-attention-heads 4 --position-embedding-type learned_absolute)
FIELDS="lm loss: [0-9.E+-]+|grad norm: [0-9.]+"
. "$(dirname "$0")/../common/train_equiv.sh" # fail, TMP, run, check
ref=$(run "$TMP/ref" 1 "${mha[@]}")
echo "np 1 (single rank): $ref"
[ -n "$ref" ] || fail "the single-rank run logged nothing"
check 2 "$ref" "$TMP/ref" "${mha[@]}" --context-parallel-size 2
check 4 "$ref" "$TMP/ref" "${mha[@]}" --context-parallel-size 4
check 4 "$ref" "$TMP/ref" "${mha[@]}" --context-parallel-size 2 --use-distributed-optimizer --overlap-param-gather
check 2 "$ref" "$TMP/ref" "${mha[@]}" --context-parallel-size 2 --cp-comm-type a2a
check 4 "$ref" "$TMP/ref" "${mha[@]}" --context-parallel-size 4 --cp-comm-type a2a
# Resuming the single-rank checkpoint at CP=2: parameters and moments are
# replicated over cp, so every rank loads them whole.
cont=(--load "$TMP/ref" --train-iters 7)
ref_cont=$(run "$TMP/ref_cont" 1 "${mha[@]}" "${cont[@]}")
echo "np 1 (single rank, resumed): $ref_cont"
[ -n "$ref_cont" ] || fail "the single-rank resume logged nothing"
check 2 "$ref_cont" "$TMP/ref_cont" "${mha[@]}" "${cont[@]}" --context-parallel-size 2
ref_gqa=$(run "$TMP/ref_gqa" 1 "${gqa[@]}")
echo "np 1 (single rank, GQA): $ref_gqa"
[ -n "$ref_gqa" ] || fail "the single-rank GQA run logged nothing"
check 2 "$ref_gqa" "$TMP/ref_gqa" "${gqa[@]}" --context-parallel-size 2
check 2 "$ref_gqa" "$TMP/ref_gqa" "${gqa[@]}" --context-parallel-size 2 --cp-comm-type a2a
# hidden dropout: each element draws the one rank's mask at its global
# token (chunks r and 2cp-1-r), so the runs agree
drop=(--num-attention-heads 4 --hidden-dropout 0.1)
ref_drop=$(run "$TMP/ref_drop" 1 "${drop[@]}")
echo "np 1 (single rank, dropout): $ref_drop"
[ -n "$ref_drop" ] || fail "the single-rank dropout run logged nothing"
check 2 "$ref_drop" "$TMP/ref_drop" "${drop[@]}" --context-parallel-size 2
check 4 "$ref_drop" "$TMP/ref_drop" "${drop[@]}" --context-parallel-size 4
ref_pos=$(run "$TMP/ref_pos" 1 "${learned[@]}")
echo "np 1 (single rank, learned positions): $ref_pos"
[ -n "$ref_pos" ] || fail "the single-rank learned-positions run logged nothing"
check 2 "$ref_pos" "$TMP/ref_pos" "${learned[@]}" --context-parallel-size 2
echo "OK"
