#!/usr/bin/env bash
# bf16_layouts.sh — every parallel layout against one rank under --bf16
# (issue 27, acceptance 1), and TP+SP (fp16 partial sums) and CP's ring
# (fp16 K/V between ranks) under --fp16 too. (PP x TP in bf16 is
# tests/pp/pp_train_cli.sh's.) Each layout trains 5
# iterations on the same global batch as the single-rank 16-bit run; its lm
# loss and grad norm at every iteration must stay within TOL (relative) of
# the single rank's.
#
# Why not 1e-5 as in fp32: a layout computes the same f32 arithmetic on the
# same 16-bit values, but rounds to bf16 at other points. A row-parallel
# linear's partial sums are rounded to bf16 on each rank and then summed
# (in f32, rounded again), a pipeline stage boundary or a CP chunk changes
# nothing, DP averages gradients in another order (f32). One bf16 rounding
# is up to 2^-9 = 0.2% relative; the log's loss averages thousands of such
# values, so it moves by a few 1e-4, and Adam turns the resulting gradient
# differences into parameter differences of the same relative size. TOL =
# 5e-3 is 2.5 bf16 roundings of one value: 5x what a layout's rounding
# order moved the log here (at most 9e-4, EP x TP x SP), and smaller than a
# layout bug moves it (a wrong shard, a missed reduction or an unscaled
# gradient changes the loss by more than 5% by the second step; a ring
# that received CP's K/V as f32 moved the grad norm by 3.4e-2). The run
# also reports the bf16-vs-fp32 gap of the single rank, the scale of bf16's
# own rounding, beside each layout's gap.
set -euo pipefail
exe=$DG_BUILD/dagatron
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
TOL=${TOL:-5e-3}
ARCH=($(cat "$DG_SRC/tests/common/moe_arch.flags"))
base=("${ARCH[@]}" --mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --seq-length 32 --micro-batch-size 2
      --global-batch-size 8 --train-iters 5 --lr 1e-3 --log-interval 1 --lr-decay-style constant --adam-eps 1e-6
      --num-attention-heads 4 --eval-iters 0 --make-vocab-size-divisible-by 32)
dense=(--num-experts 0)
moe=(--num-experts 4 --moe-router-topk 2 --moe-aux-loss-coeff 1e-2)
run() { # NP FLAGS... -> the log's lm loss and grad norm values, one line
    local np=$1
    shift
    $DG_MPIRUN -np "$np" "$exe" train "${base[@]}" "$@" 2>"$TMP/err" | grep -oE "lm loss: [0-9.E+-]+|grad norm: [0-9.]+" |
        awk '{print $NF}' | paste -sd' ' || true
}
gap() { # A B -> the largest relative difference, or "bad" when the counts differ
    python3 -c "import sys
a, b = sys.argv[1].split(), sys.argv[2].split()
print('bad' if len(a) != len(b) or len(a) != 10 else max(abs(float(x) - float(y)) / abs(float(y)) for x, y in zip(a, b)))" "$1" "$2"
}
fail=0
for model in dense moe fp16; do
    m=(); [ $model = moe ] && m=("${moe[@]}") || m=("${dense[@]}")
    p16=(--bf16); [ $model = fp16 ] && p16=(--fp16 --loss-scale 1024)
    ref=$(run 1 "${m[@]}" "${p16[@]}")
    [ -n "$ref" ] || { echo "FAIL: $model: the single-rank ${p16[*]} run logged nothing"; cat "$TMP/err"; exit 1; }
    fp32=$(run 1 "${m[@]}")
    echo "$model, one rank: ${p16[*]} vs fp32 gap $(gap "$ref" "$fp32") (16 bits' own rounding)"
    if [ $model = fp16 ]; then
        layouts=("2 --tensor-model-parallel-size 2 --sequence-parallel"
                 "2 --context-parallel-size 2")
    elif [ $model = dense ]; then
        layouts=("2 --tensor-model-parallel-size 2 --sequence-parallel"
                 "2 --tensor-model-parallel-size 2 --sequence-parallel --tp-comm-overlap"
                 "2 --pipeline-model-parallel-size 2"
                 "2 --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather"
                 "2 --use-distributed-optimizer --grad-reduce-in-bf16"
                 "2 --context-parallel-size 2 --cp-comm-type a2a"
                 "2 --context-parallel-size 2")
    else
        layouts=("2 --expert-model-parallel-size 2"
                 "2 --expert-model-parallel-size 2 --moe-a2a-overlap-chunks 2"
                 "4 --expert-model-parallel-size 2 --tensor-model-parallel-size 2 --sequence-parallel")
    fi
    for l in "${layouts[@]}"; do
        read -r np flags <<<"$l"
        got=$(run "$np" "${m[@]}" "${p16[@]}" $flags)
        g=$(gap "$got" "$ref")
        echo "$model, np $np $flags: gap $g"
        if [ "$g" = bad ] || python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) > float(sys.argv[2]) else 1)" "$g" "$TOL"; then
            echo "FAIL: $model, np $np $flags: differs from the single-rank ${p16[*]} run by more than $TOL: $got vs $ref"
            cat "$TMP/err"
            fail=1
        fi
    done
done
exit $fail
