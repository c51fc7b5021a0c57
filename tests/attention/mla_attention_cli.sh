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
check 2 "$want" "$TMP/ref" "${mla[@]}" --tensor-model-parallel-size 2
check 2 "$want" "$TMP/ref" "${mla[@]}" --tensor-model-parallel-size 2 --sequence-parallel
check 2 "$want" "$TMP/ref" "${mla[@]}" --context-parallel-size 2
check 2 "$want" "$TMP/ref" "${mla[@]}" --expert-model-parallel-size 2
check 2 "$want" "$TMP/ref" "${mla[@]}" --pipeline-model-parallel-size 2
check 2 "$want" "$TMP/ref" "${mla[@]}" --use-distributed-optimizer

source "$here/../common/refuse.sh"
refuse() { dg_refuse "$1" $DG_MPIRUN -np 1 "$exe" train "${args[@]}" "${@:2}"; }
refuse "--multi-latent-attention" "${mla[@]:1}" --load "$TMP/ref" --train-iters 6
refuse "--v-head-dim 24" "${mla[@]}" --v-head-dim 24
refuse "excludes --group-query-attention" "${mla[@]}" --group-query-attention --num-query-groups 2
refuse "--rope-type yarn" --rope-type yarn
echo "OK"
