#!/bin/bash
# The fused attention's variants in `dagatron train` (issue 29): sliding
# windows (--window-size 7,0 with --window-attn-skip-freq 2: layer 1 of 2
# windowed, layer 2 full) and learnable softmax sinks (--softmax-type
# learnable: a sink logit per head, self_attention.core_attention.softmax_offset).
#  - each flag changes the run (the window alone, the sinks alone);
#  - the MoE model (moe_arch.flags) with both: TP=2, TP=2 with SP, EP=2,
#    PP=2 and DP=2 with the distributed optimizer match the single rank over
#    5 iterations (losses, grad norms, final parameters incl. the sinks,
#    which TP splits by heads, within 1e-5); the dense GPT model (Megatron's
#    defaults: GeLU, LayerNorm, biases) with TP=2 and PP=2 likewise;
#  - CP=2 on the dense model: p2p's ring and all-to-all with the window and
#    learnable sinks (the ring's blocks place each chunk pair in the window;
#    the sink joins the merged log-sum-exp once: ops/dg_op_attn_sink.h),
#    all-to-all with the window and the off-by-one sink, the ring with the
#    sinks alone — each against its own single-rank run;
#  - the combinations not built are one line, exit 2: the unfused backend,
#    --device cuda;
#    bad values too; a checkpoint records them (resuming without is
#    refused), and `dagatron convert --to hf` refuses them (the one HF class
#    with windows and sinks, gpt-oss, has quick GeGLU experts).
# The op itself against a reference and finite differences: test_attn_variants.
set -euo pipefail
exe=$1
here=$(dirname "$0")
ARCH=($(cat "$here/../common/moe_arch.flags"))
common=(--mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --num-attention-heads 4
        --group-query-attention --num-query-groups 2 --seq-length 32 --micro-batch-size 2 --global-batch-size 8
        --train-iters 5 --lr 1e-3 --log-interval 1 --eval-iters 0 --make-vocab-size-divisible-by 32)
args=("${ARCH[@]}" "${common[@]}" --num-experts 4 --moe-router-topk 2)
window=(--window-size 7,0 --window-attn-skip-freq 2)
sinks=(--softmax-type learnable)
FIELDS="lm loss: [0-9.E+-]+|grad norm: [0-9.]+"
source "$here/../common/train_equiv.sh"

want=$(run "$TMP/ref" 1 "${window[@]}" "${sinks[@]}")
echo "np 1 ${window[*]} ${sinks[*]}: $want"
[ -n "$want" ] || fail "the single-rank run logged nothing"
plain=$(run "$TMP/plain" 1)
only_window=$(run "$TMP/w" 1 "${window[@]}")
only_sinks=$(run "$TMP/s" 1 "${sinks[@]}")
[ "$only_window" != "$plain" ] || fail "--window-size 7,0 changed nothing"
[ "$only_sinks" != "$plain" ] || fail "--softmax-type learnable changed nothing"
[ "$want" != "$only_window" ] || fail "the sinks changed nothing with a window"
full_freq=$(run "$TMP/f" 1 --window-size 7,0 --window-attn-skip-freq 1)
[ "$full_freq" = "$plain" ] || fail "--window-attn-skip-freq 1 (every layer full) differs from no window"
list=$(run "$TMP/l" 1 --window-size 7,0 --window-attn-skip-freq "([1]*1+[0]*1)")
[ "$list" = "$only_window" ] || fail "the list [1, 0] differs from --window-attn-skip-freq 2"
grep -q '"softmax_offset"\|softmax_offset' -r "$TMP/ref" || fail "the checkpoint has no softmax_offset"

check 2 "$want" "$TMP/ref" "${window[@]}" "${sinks[@]}" --tensor-model-parallel-size 2
check 2 "$want" "$TMP/ref" "${window[@]}" "${sinks[@]}" --tensor-model-parallel-size 2 --sequence-parallel
check 2 "$want" "$TMP/ref" "${window[@]}" "${sinks[@]}" --expert-model-parallel-size 2
check 2 "$want" "$TMP/ref" "${window[@]}" "${sinks[@]}" --pipeline-model-parallel-size 2
check 2 "$want" "$TMP/ref" "${window[@]}" "${sinks[@]}" --use-distributed-optimizer

# the dense GPT model of Megatron's defaults. The key bias's gradient is
# zero in exact arithmetic (softmax is invariant to it), so Adam would steer
# it by rounding noise that differs with the layout: a large epsilon keeps
# that noise from being normalised up to a step, and tensors of norm below
# 1e-3 (the key bias) compare absolutely (as attn_unfused_train_cli.sh)
args=("${common[@]}" --hidden-dropout 0 --attention-dropout 0 --adam-eps 1)
PARAMS_ATOL=1e-3
want_dense=$(run "$TMP/refd" 1 "${window[@]}" "${sinks[@]}")
check 2 "$want_dense" "$TMP/refd" "${window[@]}" "${sinks[@]}" --tensor-model-parallel-size 2 --sequence-parallel
check 2 "$want_dense" "$TMP/refd" "${window[@]}" "${sinks[@]}" --pipeline-model-parallel-size 2
check 2 "$want_dense" "$TMP/refd" "${window[@]}" "${sinks[@]}" --context-parallel-size 2 --cp-comm-type a2a
check 2 "$want_dense" "$TMP/refd" "${window[@]}" "${sinks[@]}" --context-parallel-size 2
want_dsinks=$(run "$TMP/refds" 1 "${sinks[@]}")
check 2 "$want_dsinks" "$TMP/refds" "${sinks[@]}" --context-parallel-size 2
# CP=2 all-to-all: the window and the zero sink (on the dense model, as
# the CP checks above: the MoE model's top-2 routing has near ties that
# CP's other summation order may flip, whatever the attention)
cpv=("${window[@]}" --softmax-type off-by-one)
want_cp=$(run "$TMP/refcp" 1 "${cpv[@]}")
[ "$want_cp" != "$(run "$TMP/refcw" 1 "${window[@]}")" ] || fail "--softmax-type off-by-one changed nothing"
check 2 "$want_cp" "$TMP/refcp" "${cpv[@]}" --context-parallel-size 2 --cp-comm-type a2a

source "$here/../common/refuse.sh"
args=("${ARCH[@]}" "${common[@]}" --num-experts 4 --moe-router-topk 2)
refuse() { dg_refuse "$1" $DG_MPIRUN -np "$2" "$exe" train "${args[@]}" "${@:3}"; }
refuse "--attention-backend unfused/local with --window-size" 1 "${window[@]}" --attention-backend unfused
refuse "--device cuda with --softmax-type" 1 "${sinks[@]}" --device cuda
refuse "the right window must be 0" 1 --window-size 7,3
refuse "expected two integers" 1 --window-size 7
refuse "--window-attn-skip-freq: the list has 3 entries" 1 --window-size 7,0 --window-attn-skip-freq "[1,0,1]"
refuse "--softmax-type" 1 --load "$TMP/ref" --train-iters 6 "${window[@]}"
# only gpt-oss's Hugging Face class has a window or sinks, and its experts
# are quick GeGLU: these SwiGLU models' exports are refused
dg_refuse "it has no sliding window" "$exe" convert --load "$TMP/w" --to hf "$TMP/hf"
[ ! -e "$TMP/hf" ] || fail "the refused export left $TMP/hf"
dg_refuse "as GptOssForCausalLM, its experts are quick GeGLU" "$exe" convert --load "$TMP/s" --to hf "$TMP/hf"
echo "OK"
