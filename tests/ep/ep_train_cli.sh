#!/bin/bash
# `dagatron train` with expert parallelism against the same run without it:
# EP ranks are data-parallel for the dense part (Megatron's expert-DP
# folding), so EP=2 on 2 ranks must log the losses and grad norms of DP=2 on
# 2 ranks, and EP=4 / EP=2 x DP=2 on 4 ranks those of DP=4, for every
# dispatcher and with the overlap chunks on: every logged lm loss, load
# balancing loss and grad norm within 1e-5 relative (issue 7's tolerance).
set -euo pipefail
exe=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
args=(--mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --num-attention-heads 4
      --seq-length 32 --micro-batch-size 2 --global-batch-size 8 --num-experts 4
      --moe-router-topk 2 --moe-ffn-hidden-size 96 --train-iters 3 --lr 1e-3 --log-interval 1
      --lr-decay-style constant)
# lm loss, load balancing loss and grad norm of every logged iteration
run() {
    local np=$1
    shift
    $DG_MPIRUN -np "$np" "$exe" train "${args[@]}" "$@" 2>&1 |
        grep -oE "lm loss: [0-9.E+-]+|load balancing loss: [0-9.E+-]+|grad norm: [0-9.]+" | paste -sd' '
}
check() {
    local np=$1 want=$2
    shift 2
    local got
    got=$(run "$np" "$@")
    echo "np $np $*: $got"
    [ -n "$got" ] || fail "np $np $*: no log lines"
    # the same fields in the same order, each value within 1e-5 relative
    awk -v a="$got" -v b="$want" 'BEGIN {
        n = split(a, x, " "); m = split(b, y, " ");
        if (n != m) exit 1;
        for (i = 1; i <= n; i++) {
            if (x[i] ~ /^[0-9.E+-]+$/) {
                d = x[i] - y[i]; if (d < 0) d = -d;
                r = y[i] < 0 ? -y[i] : y[i];
                if (d > 1e-5 * r) exit 1;
            } else if (x[i] != y[i]) exit 1;
        }
    }' || fail "np $np $*: differs from the run without EP"
}
ref2=$(run 2 --expert-model-parallel-size 1)
echo "np 2 (DP=2): $ref2"
[ -n "$ref2" ] || fail "the DP=2 run logged nothing"
check 2 "$ref2" --expert-model-parallel-size 2
check 2 "$ref2" --expert-model-parallel-size 2 --moe-a2a-overlap-chunks 2
check 2 "$ref2" --expert-model-parallel-size 2 --moe-token-dispatcher-type allgather
ref4=$(run 4 --expert-model-parallel-size 1)
echo "np 4 (DP=4): $ref4"
check 4 "$ref4" --expert-model-parallel-size 4
check 4 "$ref4" --expert-model-parallel-size 2
echo "OK"
