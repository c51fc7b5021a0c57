#!/bin/bash
# The MoE expert MLP variants in `dagatron train` (issue 29):
#  - Megatron's defaults (no --swiglu, no --disable-bias-linear): GeLU
#    experts with linear_fc1 / linear_fc2 biases [E, F] / [E, H];
#  - gpt-oss's expert MLP: --quick-geglu --glu-linear-offset
#    --activation-func-clamp-value, with biases (the clamp small enough to
#    bite at this init);
# each against the single-rank run over 5 iterations: EP=2, TP=2 with SP
# (expert tensor parallelism: fc1 and its bias split over tp, fc2's bias
# whole after the all-reduce), TP=2 with --expert-tensor-parallel-size 1,
# PP=2 and DP=2 with the distributed optimizer: losses, grad norms and
# final parameters within 1e-5. The variants change the model (the runs
# differ from SwiGLU without biases), and the refusals are one line.
# The math against PyTorch: tests/reference (test_ref_moe_gelu_bias_*,
# test_ref_moe_quick_geglu_*).
set -euo pipefail
exe=$1
here=$(dirname "$0")
args=(--num-experts 4 --moe-router-topk 2 --moe-aux-loss-coeff 1e-2 --moe-z-loss-coeff 1e-3 --normalization RMSNorm
      --position-embedding-type rope --lr-decay-style cosine --min-lr 1e-4 --hidden-dropout 0 --attention-dropout 0 --mock-data
      --vocab-size 100 --num-layers 2 --hidden-size 64 --num-attention-heads 4 --group-query-attention
      --num-query-groups 2 --ffn-hidden-size 128 --moe-ffn-hidden-size 48 --seq-length 32 --micro-batch-size 2 --global-batch-size 8
      --train-iters 5 --lr 1e-2 --log-interval 1 --eval-iters 0 --make-vocab-size-divisible-by 32)
FIELDS="lm loss: [0-9.E+-]+|grad norm: [0-9.]+"
# linear_k's bias: softmax ignores it, so its gradient is rounding noise;
# a large Adam epsilon keeps that noise from being normalised into a step,
# and it is compared absolutely below this norm (as attn_unfused_train_cli.sh)
args+=(--adam-eps 1)
PARAMS_ATOL=1e-3
source "$here/../common/train_equiv.sh"

plain=$(run "$TMP/plain" 1 --swiglu --disable-bias-linear)
[ -n "$plain" ] || fail "the SwiGLU run logged nothing"
n=0
for variant in "" "--quick-geglu --glu-linear-offset 1.0 --activation-func-clamp-value 0.1"; do
    n=$((n + 1))
    v=($variant)
    want=$(run "$TMP/ref$n" 1 ${v[@]+"${v[@]}"})
    echo "np 1 ${v[*]:-gelu, biases}: $want"
    [ -n "$want" ] || fail "the single-rank run logged nothing"
    [ "$want" != "$plain" ] || fail "${v[*]:-GeLU and biases}: the same numbers as SwiGLU without biases"
    check 2 "$want" "$TMP/ref$n" ${v[@]+"${v[@]}"} --expert-model-parallel-size 2
    check 2 "$want" "$TMP/ref$n" ${v[@]+"${v[@]}"} --tensor-model-parallel-size 2 --sequence-parallel
    check 2 "$want" "$TMP/ref$n" ${v[@]+"${v[@]}"} --tensor-model-parallel-size 2 --expert-tensor-parallel-size 1
    check 2 "$want" "$TMP/ref$n" ${v[@]+"${v[@]}"} --pipeline-model-parallel-size 2
    check 2 "$want" "$TMP/ref$n" ${v[@]+"${v[@]}"} --use-distributed-optimizer
done
# the clamp bites: without it the quick GeGLU run differs
noclamp=$(run "$TMP/noclamp" 1 --quick-geglu --glu-linear-offset 1.0)
[ "$noclamp" != "$want" ] || fail "--activation-func-clamp-value 0.1 changed nothing"

# simulate's model FLOPs follow Megatron's formula, whose gated multiplier
# (3/2) is keyed on --swiglu alone: quick GeGLU counts as GeLU there
flops() { "$exe" simulate "${args[@]}" "$@" 2>&1 | sed -n 's/.*model FLOPs\/step *\([0-9.e+]*\).*/\1/p'; }
f_gelu=$(flops) f_qg=$(flops --quick-geglu) f_swiglu=$(flops --swiglu)
[ -n "$f_gelu" ] && [ "$f_qg" = "$f_gelu" ] && [ "$f_swiglu" != "$f_gelu" ] ||
  fail "model FLOPs: GeLU $f_gelu, quick GeGLU $f_qg (Megatron's formula: the same), SwiGLU $f_swiglu"

source "$here/../common/refuse.sh"
refuse() { dg_refuse "$1" $DG_MPIRUN -np 1 "$exe" train "${args[@]}" "${@:2}"; }
refuse "--quick-geglu and --swiglu exclude each other" --quick-geglu --swiglu
refuse "--glu-linear-offset 1: only with --quick-geglu" --swiglu --glu-linear-offset 1
refuse "shared expert takes no biases" --moe-shared-expert-intermediate-size 32
refuse "quick_geglu = 1, this run has 0 (--quick-geglu)" --load "$TMP/ref2" --train-iters 6 --swiglu
echo "OK"
