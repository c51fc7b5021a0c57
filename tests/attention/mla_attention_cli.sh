#!/bin/bash
# Multi-latent attention in `dagatron train` (issue 29): DeepSeek's MLA
# (--multi-latent-attention with --q-lora-rank, --kv-lora-rank, --qk-head-dim,
# --qk-pos-emb-head-dim, --v-head-dim; the latent norms of --qk-layernorm)
# with YaRN (--rotary-scaling-factor, --mscale, --mscale-all-dim) on the MoE
# model:
#  - the flags change the model;
#  - TP=2 (heads split: up projections column-parallel, down projections and
#    latent norms replicated, the shared RoPE key's gradient all-reduced),
#    TP=2 with SP, CP=2 (the ring carries the zero-padded v), EP=2, PP=2 and
#    DP=2 with the distributed optimizer match the single-rank run over 5
#    iterations: losses, grad norms and final parameters within 1e-5;
#  - --recompute-modules mla_up_proj (the up projections and RoPE) and
#    core_attn change no number: the same losses and grad norms, bit for bit;
#  - `simulate` counts the model FLOPs by Megatron's MLA formula;
#  - generate refuses MLA in one line (no KV cache for it yet);
#  - a checkpoint records them: resuming without --multi-latent-attention is
#    one line, exit 2; --v-head-dim above the q/k head size and GQA too.
# The model itself against PyTorch: tests/reference (test_ref_moe_mla_*).
set -euo pipefail
exe=$1
here=$(dirname "$0")
ARCH=($(cat "$here/../common/moe_arch.flags"))
args=("${ARCH[@]}" --mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --num-attention-heads 4
      --num-experts 4 --moe-router-topk 2 --seq-length 32
      --micro-batch-size 2 --global-batch-size 8 --train-iters 5 --lr 1e-3 --log-interval 1 --eval-iters 0
      --make-vocab-size-divisible-by 32)
mla=(--multi-latent-attention --q-lora-rank 24 --kv-lora-rank 16 --qk-head-dim 8 --qk-pos-emb-head-dim 8
     --v-head-dim 12 --qk-layernorm --rotary-scaling-factor 40 --mscale 0.707 --mscale-all-dim 0.707)
FIELDS="lm loss: [0-9.E+-]+|grad norm: [0-9.]+"
source "$here/../common/train_equiv.sh"

want=$(run "$TMP/ref" 1 "${mla[@]}")
echo "np 1 ${mla[*]}: $want"
[ -n "$want" ] || fail "the single-rank run logged nothing"
plain=$(run "$TMP/plain" 1)
[ "$want" != "$plain" ] || fail "--multi-latent-attention changed nothing"
rc=$(run "$TMP/rc" 1 "${mla[@]}" --recompute-granularity selective --recompute-modules mla_up_proj core_attn)
[ "$rc" = "$want" ] || fail "--recompute-modules mla_up_proj core_attn changed the run: $rc"
plan=$($DG_MPIRUN -np 1 "$exe" train "${args[@]}" "${mla[@]}" --train-iters 1 --recompute-granularity selective \
       --recompute-modules mla_up_proj 2>&1 | grep -i "recompute" | head -1)
echo "$plan" | grep -q "mla_up_proj" || fail "no plan line naming mla_up_proj: '$plan'"
check 2 "$want" "$TMP/ref" "${mla[@]}" --tensor-model-parallel-size 2
check 2 "$want" "$TMP/ref" "${mla[@]}" --tensor-model-parallel-size 2 --sequence-parallel
check 2 "$want" "$TMP/ref" "${mla[@]}" --context-parallel-size 2
check 2 "$want" "$TMP/ref" "${mla[@]}" --expert-model-parallel-size 2
check 2 "$want" "$TMP/ref" "${mla[@]}" --pipeline-model-parallel-size 2
check 2 "$want" "$TMP/ref" "${mla[@]}" --use-distributed-optimizer

# simulate's model FLOPs: Megatron's num_floating_point_operations with its
# MLA branch, per token: 2 layers x (attention: 6 x projections + 6 S x core;
# top-2 SwiGLU experts of 128: 6 H x 2 x 128 x 3) + logits 6 H V, V = 128
# (100 + 1 padded to 32), times 8 samples of 32 tokens
want_flops=$(awk 'BEGIN { H = 64; A = 4; S = 32; Q = 16; Dv = 12;
  proj = 24 * (H + A * Q + 1) + 16 * (H + A * (8 + Dv) + 1) + H * 8 + A * Dv * H;
  attn = 6 * proj + 6 * S * (A * Q / 2 + A * Dv / 2);
  printf "%.3e", 8 * S * (2 * (attn + 6 * H * 2 * 128 * 3) + 6 * H * 128) }')
got_flops=$("$exe" simulate "${args[@]}" "${mla[@]}" 2>&1 | sed -n 's/.*model FLOPs\/step *\([0-9.e+]*\).*/\1/p')
[ "$got_flops" = "$want_flops" ] || fail "simulate's model FLOPs $got_flops, Megatron's MLA formula $want_flops"
echo "simulate: model FLOPs/step $got_flops (Megatron's MLA formula $want_flops)"

source "$here/../common/refuse.sh"
refuse() { dg_refuse "$1" $DG_MPIRUN -np 1 "$exe" train "${args[@]}" "${@:2}"; }
refuse "--multi-latent-attention" "${mla[@]:1}" --load "$TMP/ref" --train-iters 6
refuse "--v-head-dim 24" "${mla[@]}" --v-head-dim 24
refuse "excludes --group-query-attention" "${mla[@]}" --group-query-attention --num-query-groups 2
refuse "--rope-type yarn" --rope-type yarn
# decoding has no MLA KV cache: one error line, exit 2 (after generate's note on the mock data's ids)
rc=0
"$exe" generate --load "$TMP/ref" --prompt "5 17 3" --max-new-tokens 2 >"$TMP/gen.out" 2>"$TMP/gen.err" || rc=$?
[ "$rc" = 2 ] && [ "$(grep -vc 'note:' "$TMP/gen.err")" = 1 ] &&
  grep -q "^dagatron: --multi-latent-attention: not supported by decoding" "$TMP/gen.err" ||
  fail "generate on an MLA checkpoint: exit $rc, $(cat "$TMP/gen.err")"
echo "OK"
