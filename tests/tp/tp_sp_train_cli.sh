#!/bin/bash
# `dagatron train` with sequence parallelism against the single-rank run on
# the same global batch (issue 12, acceptance 1, SP half): TP=2 with SP,
# TP=2 with SP and GQA (8 heads, 2 query groups), TP=2 x DP=2 with SP and
# the distributed optimizer, TP=2 with SP and --tp-comm-overlap (MHA, GQA,
# dense), and TP=2 with SP on
# Megatron's default dense GPT (LayerNorm weights and biases and
# row-parallel biases, replicated over tp under the sequence split: their
# gradients all-reduced over tp; the learned position table, added before
# the split: its gradient whole on every rank; dropout 0.1) must log the single-rank run's lm loss and
# grad norm for each of 5 iterations, within 1e-5 relative, and end with its
# parameters (within 1e-5 relative; a tensor of norm below 1e-3, the key
# bias, within 1e-8 absolute). Also (acceptance 3, SP half): the
# activation peak the memory planner reports per rank is lower with SP than
# without at the same TP; and --sequence-parallel with a sequence length tp
# does not divide is one line, exit 2, as are --tp-comm-overlap without SP
# and with a sequence that does not split into its chunks.
set -euo pipefail
exe=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
here=$(dirname "$0")
ARCH=($(cat "$here/../common/moe_arch.flags"))
common=(--mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --seq-length 32 --micro-batch-size 2
        --global-batch-size 8 --num-experts 0 --train-iters 5 --lr 1e-3 --log-interval 1 --lr-decay-style constant
        --make-vocab-size-divisible-by 32)
mha=("${ARCH[@]}" --num-experts 0 --num-attention-heads 4)
# GQA runs at --adam-eps 1e-6 (Megatron's default is 1e-8): an element of
# linear_v's gradient that cancels to ~4e-8 (the median is ~3e-3) differs by
# a few 1e-9 with the layout's summation order (fp32 rounding), and at eps
# 1e-8 Adam's first step turns that into a 7e-6 move of one parameter, 1.1e-5
# relative L2 of the [16, 64] weight; 1e-6 keeps the comparison about the
# layout's math (as tests/etp/etp_train_cli.sh).
gqa=("${ARCH[@]}" --num-experts 0 --num-attention-heads 8 --group-query-attention --num-query-groups 2 --adam-eps 1e-6)
# Megatron's defaults (GeLU, LayerNorm, learned positions, biases) with
# dropout, which under SP runs on each rank's slice of the sequence and must
# draw the single rank's mask there. The key bias's gradient is zero in exact arithmetic (softmax is
# invariant to it), so Adam would steer it by rounding noise that differs
# with the layout: a large epsilon keeps such noise from being normalised
# up to a full step.
dense=(--num-attention-heads 4 --hidden-dropout 0.1 --adam-eps 1)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# run CKPT_DIR NP FLAGS...: lm loss and grad norm of every logged iteration
run() {
    local ck=$1 np=$2
    shift 2
    $DG_MPIRUN -np "$np" "$exe" train "$@" "${common[@]}" --save "$ck" 2>&1 |
        grep -oE "lm loss: [0-9.E+-]+|grad norm: [0-9.]+" | paste -sd' '
}
n_check=0
# check NAME NP "PARALLEL FLAGS" FLAGS...: the single-rank run, then TP=2
# with SP and the parallel flags on NP ranks
check() {
    local name=$1 np=$2 extra=$3
    shift 3
    local want got
    want=$(run "$TMP/ref_$name" 1 "$@")
    echo "np 1 $name: $want"
    [ -n "$want" ] || fail "$name: the single-rank run logged nothing"
    got=$(run "$TMP/sp_$name" "$np" --tensor-model-parallel-size 2 --sequence-parallel $extra "$@")
    echo "np $np $name --tensor-model-parallel-size 2 --sequence-parallel $extra: $got"
    [ -n "$got" ] || fail "$name: the SP run logged nothing"
    awk -v a="$got" -v b="$want" -f "$here/../common/logs_close.awk" ||
        fail "$name: TP=2 with SP differs from the single-rank run"
    "${DG_REF_PYTHON:-/usr/bin/python3}" "$here/../ep/ckpt_params_close.py" "$TMP/sp_$name" "$TMP/ref_$name" 1e-5 1e-3 ||
        fail "$name: TP=2 with SP ends with other parameters than the single-rank run"
}
check mha 2 "" "${mha[@]}"
check gqa 2 "" "${gqa[@]}"
check dense 2 "" "${dense[@]}"
# TP=2 x DP=2: the norm weights' gradients, all-reduced over tp, then
# reduce-scattered over dp by the distributed optimizer
check mha_dp 4 --use-distributed-optimizer "${mha[@]}"
# --tp-comm-overlap: the linears in chunks of the sequence, each chunk's
# all-gather or reduce-scatter beside another chunk's GEMM
check mha_overlap 2 --tp-comm-overlap "${mha[@]}"
check gqa_overlap 2 --tp-comm-overlap "${gqa[@]}"
check dense_overlap 2 --tp-comm-overlap "${dense[@]}"
# The planned activation peak per rank (the memory planner's line), TP=2
# with and without SP.
# The whole log is read before it is searched: a grep that stops at its first
# match would close the pipe on a run still writing, and under pipefail the
# run's SIGPIPE would end this script without a word.
peak() {
    local log
    log=$($DG_MPIRUN -np 2 "$exe" train "${dense[@]}" "${common[@]}" --train-iters 1 --tensor-model-parallel-size 2 "$@" 2>&1)
    printf '%s\n' "$log" | grep -oE "planned peak [0-9.]+ MiB \([0-9]+ bytes\)" | sed -n '1s/.*(\([0-9]*\) bytes)/\1/p'
}
no_sp=$(peak)
sp=$(peak --sequence-parallel)
echo "planned activation peak per rank at TP=2: $no_sp bytes without SP, $sp bytes with SP"
[ -n "$no_sp" ] && [ -n "$sp" ] || fail "no planned peak in the log"
[ "$sp" -lt "$no_sp" ] || fail "SP does not lower the planned activation peak ($sp >= $no_sp bytes)"
# refusals: one line, exit 2
source "$(dirname "$0")/../common/refuse.sh"
refuse() { dg_refuse "$1" $DG_MPIRUN -np 2 "$exe" train "${common[@]}" "${dense[@]}" "${@:2}"; }
refuse "--sequence-parallel: --tensor-model-parallel-size 2 does not divide --seq-length 31" \
    --tensor-model-parallel-size 2 --sequence-parallel --seq-length 31
refuse "--tp-comm-overlap needs --sequence-parallel" --tensor-model-parallel-size 2 --tp-comm-overlap
refuse "--tp-comm-overlap: --seq-length 34 is not 2 chunks per rank of --tensor-model-parallel-size 2" \
    --tensor-model-parallel-size 2 --sequence-parallel --tp-comm-overlap --seq-length 34
echo "OK"
