#!/bin/bash
# Multi-token prediction in `dagatron train` (issue 29): --mtp-num-layers and
# --mtp-loss-scaling-factor, DeepSeek-V3's sequential MTP modules
# (moe/dg_model_mtp.h) on the MoE model:
#  - the log line carries "mtp_1 loss" and "mtp_2 loss" after the MoE
#    losses, each module's cross entropy (about ln V at the start), and the
#    lm loss of the first iteration is the run without MTP's (the modules
#    come after the decoder and the same init stream);
#  - --mtp-loss-scaling-factor 0 (and no MoE losses, which the modules' MoE
#    layer adds as Megatron's does) trains the decoder as the run without
#    MTP (same lm losses and grad norms, bit for bit: the modules' gradients
#    are all zero), and a nonzero factor changes the training;
#  - TP=2, TP=2 with SP, CP=2, EP=2, PP=2 (the modules on the last stage,
#    the word embedding read there too) and DP=2 with the distributed
#    optimizer match the single-rank run over 5 iterations: losses, grad
#    norms and final parameters within 1e-5;
#  - the MTP modules' MoE layer takes an expert bias, saved under its
#    Megatron name;
#  - `simulate` counts Megatron's MTP FLOPs;
#  - refusals: learned absolute positions, more modules than the sequence.
# The model itself against PyTorch: tests/reference (test_ref_moe_mtp).
set -euo pipefail
exe=$1
here=$(dirname "$0")
ARCH=($(cat "$here/../common/moe_arch.flags"))
args=("${ARCH[@]}" --mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --num-attention-heads 4
      --num-experts 4 --moe-router-topk 2 --seq-length 32
      --micro-batch-size 2 --global-batch-size 8 --train-iters 5 --lr 1e-3 --log-interval 1 --eval-iters 0
      --make-vocab-size-divisible-by 32 --seed 3)
# (seed 3: the default seed leaves one eh_proj weight whose gradient is
# about 0 in a step, where Adam turns rounding into a 2.5e-5 difference)
mtp=(--mtp-num-layers 2 --mtp-loss-scaling-factor 0.3)
FIELDS="lm loss: [0-9.E+-]+|mtp_[12] loss: [0-9.E+-]+|grad norm: [0-9.]+"
source "$here/../common/train_equiv.sh"

want=$(run "$TMP/ref" 1 "${mtp[@]}")
echo "np 1 ${mtp[*]}: $want"
echo "$want" | grep -q "mtp_1 loss: .* mtp_2 loss: " || fail "no mtp_1 / mtp_2 loss in the log: $want"
first=$(echo "$want" | grep -oE "mtp_1 loss: [0-9.E+-]+" | head -1 | awk '{print $3}')
awk -v x="$first" 'BEGIN { exit !(x > 4.0 && x < 5.5) }' || fail "mtp_1 loss $first at the start: expected about ln 128"
plain=$(run "$TMP/plain" 1 | grep -oE "lm loss: [0-9.E+-]+|grad norm: [0-9.]+" | paste -sd' ')
lm1=$(echo "$want" | grep -oE "lm loss: [0-9.E+-]+" | head -1)
[ "$lm1" = "$(echo "$plain" | grep -oE "lm loss: [0-9.E+-]+" | head -1)" ] ||
  fail "the first lm loss differs from the run without MTP: $lm1 vs $plain"
nomoe=(--moe-aux-loss-coeff 0 --moe-z-loss-coeff 0)
plain0=$(run "$TMP/plain0" 1 "${nomoe[@]}" | grep -oE "lm loss: [0-9.E+-]+|grad norm: [0-9.]+" | paste -sd' ')
zero=$(run "$TMP/zero" 1 "${nomoe[@]}" --mtp-num-layers 2 --mtp-loss-scaling-factor 0 |
       grep -oE "lm loss: [0-9.E+-]+|grad norm: [0-9.]+" | paste -sd' ')
[ "$zero" = "$plain0" ] || fail "--mtp-loss-scaling-factor 0 changed the decoder's training: $zero vs $plain"
[ "$(echo "$want" | grep -oE "lm loss: [0-9.E+-]+|grad norm: [0-9.]+" | paste -sd' ')" != "$plain" ] ||
  fail "the MTP loss changed nothing in the training"

check 2 "$want" "$TMP/ref" "${mtp[@]}" --tensor-model-parallel-size 2
check 2 "$want" "$TMP/ref" "${mtp[@]}" --tensor-model-parallel-size 2 --sequence-parallel
check 2 "$want" "$TMP/ref" "${mtp[@]}" --context-parallel-size 2
check 2 "$want" "$TMP/ref" "${mtp[@]}" --expert-model-parallel-size 2
check 2 "$want" "$TMP/ref" "${mtp[@]}" --pipeline-model-parallel-size 2
check 2 "$want" "$TMP/ref" "${mtp[@]}" --use-distributed-optimizer

# the expert bias of the MTP module's MoE layer, under its Megatron name
eb=(--moe-router-score-function sigmoid --moe-router-enable-expert-bias --moe-router-bias-update-rate 1e-2)
run "$TMP/eb" 1 --mtp-num-layers 1 "${eb[@]}" --train-iters 2 >/dev/null
"${DG_REF_PYTHON:-/usr/bin/python3}" - "$TMP/eb" <<'PY' || fail "no MTP expert bias in the checkpoint"
import glob, json, sys, os
names = set()
for f in glob.glob(os.path.join(sys.argv[1], "**", "*.json"), recursive=True):
    names |= set(json.dumps(json.load(open(f))).replace('"', " ").split())
sys.exit(0 if "mtp.layers.0.transformer_layer.mlp.router.expert_bias" in names else 1)
PY

# simulate's model FLOPs: Megatron's num_floating_point_operations with
# 2 MTP modules: 4 layers of top-2 SwiGLU experts of 128 (the last layer's
# kind), the modules' norms and eh_proj, and 3 logits; GQA-free attention
want_flops=$(awk 'BEGIN { H = 64; S = 32; V = 128; M = 2; L = 4;
  per = 12 * L * H * H * (1 + 1 + S / H + 128 / H * 2 * 1.5) + 6 * (1 + M) * H * V + 6 * M * (3 * H + 2 * H * H);
  printf "%.3e", 8 * S * per }')
got_flops=$("$exe" simulate "${args[@]}" "${mtp[@]}" 2>&1 | sed -n 's/.*model FLOPs\/step *\([0-9.e+]*\).*/\1/p')
[ "$got_flops" = "$want_flops" ] || fail "simulate's model FLOPs $got_flops, Megatron's MTP formula $want_flops"
echo "simulate: model FLOPs/step $got_flops (Megatron's formula with MTP $want_flops)"

source "$here/../common/refuse.sh"
refuse() { dg_refuse "$1" $DG_MPIRUN -np 1 "$exe" train "${args[@]}" "${@:2}"; }
refuse "--position-embedding-type learned_absolute" "${mtp[@]}" --position-embedding-type learned_absolute
refuse "--mtp-num-layers" --mtp-num-layers 9
refuse "--mtp-num-layers" --mtp-num-layers 1 --load "$TMP/ref" --train-iters 6
echo "OK"
