#!/bin/bash
# YaRN on ordinary attention in `dagatron train` (issue 29): Megatron's
# --position-embedding-type yarn (GPTModel's YarnRotaryEmbedding with
# --rotary-scaling-factor, --yarn-original-max-position-embeddings,
# --yarn-beta-fast/-slow, --[no-]yarn-correction-range-round-to-int, cos and
# sin times the concentration factor of --mscale / --mscale-all-dim), and
# --enable-gpt-oss, which sets gpt-oss's values as Megatron's ModelOpt
# builder does, on gpt-oss's attention (window, learnable sinks):
#  - --enable-gpt-oss is those flags spelt out, bit for bit; the YaRN, and
#    the unrounded correction range, change the numbers;
#  - TP=2 (with and without SP), EP=2, CP=2, PP=2 and DP=2 with the
#    distributed optimizer match the single-rank run over 5 iterations
#    within 1e-5;
#  - the checkpoint records it: resuming without it is one line, exit 2;
#    --rotary-percent below 1, --enable-gpt-oss with MLA, both rounding
#    flags and generate are refused in one line.
# The model against PyTorch: tests/reference (test_ref_moe_gptoss_yarn); the
# rope's values: test_yarn_rope_torch.
set -euo pipefail
exe=$1
here=$(dirname "$0")
ARCH=($(cat "$here/../common/moe_arch.flags"))
args=("${ARCH[@]}" --mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --num-attention-heads 4
      --num-experts 4 --moe-router-topk 2 --seq-length 32
      --micro-batch-size 2 --global-batch-size 8 --train-iters 5 --lr 1e-3 --log-interval 1 --eval-iters 0
      --make-vocab-size-divisible-by 32 --window-size 7,0 --window-attn-skip-freq 2 --softmax-type learnable)
oss=(--enable-gpt-oss)
spelt=(--position-embedding-type yarn --rotary-scaling-factor 32 --yarn-original-max-position-embeddings 131072
       --yarn-beta-fast 32 --yarn-beta-slow 1 --mscale 1 --mscale-all-dim 0 --no-yarn-correction-range-round-to-int)
FIELDS="lm loss: [0-9.E+-]+|grad norm: [0-9.]+"
source "$here/../common/train_equiv.sh"

want=$(run "$TMP/ref" 1 "${oss[@]}")
echo "np 1 ${oss[*]}: $want"
[ -n "$want" ] || fail "the single-rank run logged nothing"
plain=$(run "$TMP/plain" 1)
[ "$want" != "$plain" ] || fail "--enable-gpt-oss changed nothing"
same=$(run "$TMP/spelt" 1 "${spelt[@]}")
[ "$same" = "$want" ] || fail "--enable-gpt-oss differs from ${spelt[*]}: $same"
# 64 original positions put the correction range's upper end at 2.02 of the
# 8 pairs: rounding it up to 3 changes pairs 1 and 2 visibly
r64=(--position-embedding-type yarn --rotary-scaling-factor 32 --yarn-original-max-position-embeddings 64)
rounded=$(run "$TMP/rounded" 1 "${r64[@]}")
unrounded=$(run "$TMP/unrounded" 1 "${r64[@]}" --no-yarn-correction-range-round-to-int)
[ "$rounded" != "$unrounded" ] || fail "--no-yarn-correction-range-round-to-int changed nothing"
[ "$rounded" != "$want" ] || fail "--yarn-original-max-position-embeddings changed nothing"
check 2 "$want" "$TMP/ref" "${oss[@]}" --tensor-model-parallel-size 2
check 2 "$want" "$TMP/ref" "${oss[@]}" --tensor-model-parallel-size 2 --sequence-parallel
check 2 "$want" "$TMP/ref" "${oss[@]}" --expert-model-parallel-size 2
check 2 "$want" "$TMP/ref" "${oss[@]}" --context-parallel-size 2
check 2 "$want" "$TMP/ref" "${oss[@]}" --pipeline-model-parallel-size 2
check 2 "$want" "$TMP/ref" "${oss[@]}" --use-distributed-optimizer

source "$here/../common/refuse.sh"
refuse() { dg_refuse "$1" $DG_MPIRUN -np 1 "$exe" train "${args[@]}" "${@:2}"; }
refuse "--position-embedding-type yarn" --load "$TMP/ref" --train-iters 6
refuse "--rotary-percent 0.5" --position-embedding-type yarn --rotary-percent 0.5
refuse "--enable-gpt-oss with --multi-latent-attention" "${oss[@]}" --multi-latent-attention --kv-lora-rank 16 \
  --qk-head-dim 8 --qk-pos-emb-head-dim 8 --v-head-dim 12
refuse "exclude each other" --position-embedding-type yarn --yarn-correction-range-round-to-int \
  --no-yarn-correction-range-round-to-int
rc=0
"$exe" generate --load "$TMP/ref" --prompt "5 17 3" --max-new-tokens 2 >"$TMP/gen.out" 2>"$TMP/gen.err" || rc=$?
[ "$rc" = 2 ] && [ "$(grep -vc 'note:' "$TMP/gen.err")" = 1 ] &&
  grep -q "^dagatron: .*yarn: not supported by decoding" "$TMP/gen.err" ||
  fail "generate on a YaRN checkpoint: exit $rc, $(cat "$TMP/gen.err")"
echo "OK"
