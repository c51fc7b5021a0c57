#!/bin/bash
# Context parallelism's refusals (issue 14, acceptance 4): a sequence length
# not divisible by 2 x cp, an unbuilt --cp-comm-type, CP with TP and CP with
# experts each exit 2 with one line naming the flags, before any work; under
# mpirun every rank ends with exit 2 and the line is printed once.
set -euo pipefail
exe=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
base=(--mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --micro-batch-size 2 --train-iters 1
      --num-experts 0 --num-attention-heads 4)
# refuse WANT LAUNCH... -- FLAGS...
refuse() {
    local want=$1
    shift
    set +e
    "$@" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    set -e
    [ "$rc" -eq 2 ] || fail "$*: exit $rc, expected 2"
    local lines
    lines=$(grep -c '^dagatron' "$TMP/err" || true)
    [ "$lines" -eq 1 ] || fail "$*: expected one line, got: $(cat "$TMP/err")"
    grep -qF -- "$want" "$TMP/err" || fail "$*: '$(cat "$TMP/err")' lacks '$want'"
    ! grep -q "iteration " "$TMP/out" || fail "$*: trained before refusing"
}
refuse "--seq-length 30: must be divisible by 2 x --context-parallel-size = 4" \
    "$exe" train "${base[@]}" --seq-length 30 --context-parallel-size 2
refuse "--seq-length 30: must be divisible by 2 x --context-parallel-size = 4" \
    $DG_MPIRUN -np 2 "$exe" train "${base[@]}" --seq-length 30 --context-parallel-size 2
refuse "--seq-length 36: must be divisible by 2 x --context-parallel-size = 8" \
    $DG_MPIRUN -np 4 "$exe" train "${base[@]}" --seq-length 36 --context-parallel-size 4
refuse "--cp-comm-type a2a: not built yet" \
    "$exe" train "${base[@]}" --seq-length 32 --context-parallel-size 2 --cp-comm-type a2a
refuse "--context-parallel-size 2 with --tensor-model-parallel-size 2: not supported yet" \
    "$exe" train "${base[@]}" --seq-length 32 --context-parallel-size 2 --tensor-model-parallel-size 2
refuse "--context-parallel-size 2 with --num-experts 4: MoE under CP is not built yet" \
    "$exe" train "${base[@]}" --seq-length 32 --context-parallel-size 2 --num-experts 4
# a bad choice is the flag parser's one line
refuse "--cp-comm-type" "$exe" train "${base[@]}" --seq-length 32 --cp-comm-type ring
echo "OK"
