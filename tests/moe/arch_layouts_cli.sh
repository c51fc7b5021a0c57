#!/bin/bash
# arch_layouts_cli.sh DAGATRON ARCH — issue 29, acceptance 3: the whole of
# one architecture users train now, shrunk, in `dagatron train`, under every
# parallel layout against the single-rank run (losses, MTP losses, grad
# norms over 5 iterations and the final parameters within 1e-5):
# TP=2 with SP, CP=2 (DeepSeek-V3's per-sequence aux loss from each
# sequence's counts summed over the context ranks), EP=2, PP=2 and DP=2
# with the distributed optimizer.
#   deepseek-v3  MLA with YaRN and the latent norms, a dense first layer
#                (--moe-layer-freq list), sigmoid routing with the expert
#                bias, group-limited top-k and its scaling factor, the
#                per-sequence aux loss, a shared expert, one MTP module
#   gpt-oss      GQA with biases, sliding windows on every other layer,
#                learnable softmax sinks, YaRN (--enable-gpt-oss), quick
#                GeGLU experts with the linear offset and clamp, biased experts
# (Qwen3-MoE's whole model is tests/attention/qwen3_attention_cli.sh.)
set -euo pipefail
exe=$1
arch=$2
here=$(dirname "$0")
common=(--mock-data --vocab-size 100 --seq-length 32 --micro-batch-size 2 --global-batch-size 8 --train-iters 5
        --lr 1e-3 --log-interval 1 --eval-iters 0 --make-vocab-size-divisible-by 32 --hidden-dropout 0
        --lr-decay-style cosine --min-lr 1e-4 --adam-eps 1e-4)
# An expert weight whose gradient is about 0 in a step is where Adam turns
# rounding into differences above 1e-5; --adam-eps 1e-4 keeps such a
# gradient from being normalised into a full step (and each architecture's
# seed avoids the worst of them). Attention dropout is Megatron's default 0.1.
case "$arch" in
deepseek-v3)
    args=("${common[@]}" --seed 5 --num-layers 4 --hidden-size 64 --ffn-hidden-size 96 --num-attention-heads 4
          --normalization RMSNorm --norm-epsilon 1e-6 --swiglu --disable-bias-linear --untie-embeddings-and-output-weights
          --position-embedding-type rope
          --multi-latent-attention --q-lora-rank 24 --kv-lora-rank 16 --qk-head-dim 8 --qk-pos-emb-head-dim 8
          --v-head-dim 12 --qk-layernorm --rotary-scaling-factor 40 --mscale 1.0 --mscale-all-dim 1.0
          --num-experts 8 --moe-layer-freq "([0]*1+[1]*3)" --moe-ffn-hidden-size 32
          --moe-shared-expert-intermediate-size 32 --moe-router-load-balancing-type seq_aux_loss
          --moe-aux-loss-coeff 1e-2 --moe-router-topk 2 --moe-router-num-groups 4 --moe-router-group-topk 2
          --moe-router-topk-scaling-factor 2.5 --moe-router-score-function sigmoid
          --moe-router-enable-expert-bias --moe-router-bias-update-rate 1e-2 --mtp-num-layers 1)
    ;;
gpt-oss)
    args=("${common[@]}" --seed 3 --num-layers 2 --hidden-size 64 --num-attention-heads 8 --group-query-attention
          --num-query-groups 2 --normalization RMSNorm --untie-embeddings-and-output-weights
          --position-embedding-type rope --window-size 5,0 --window-attn-skip-freq 2 --softmax-type learnable
          --quick-geglu --glu-linear-offset 1.0 --activation-func-clamp-value 7.0
          --num-experts 4 --moe-router-topk 2 --moe-ffn-hidden-size 64 --moe-aux-loss-coeff 1e-3
          --moe-z-loss-coeff 1e-3 --enable-gpt-oss)
    ;;
*)
    echo "FAIL: unknown architecture '$arch'" >&2
    exit 1
    ;;
esac
FIELDS="lm loss: [0-9.E+-]+|load_balancing_loss: [0-9.E+-]+|mtp_1 loss: [0-9.E+-]+|grad norm: [0-9.]+"
source "$here/../common/train_equiv.sh"

want=$(run "$TMP/ref" 1)
echo "np 1 $arch: $want"
[ "$(echo "$want" | grep -o "lm loss" | wc -l)" = 5 ] || fail "the single-rank run did not log 5 iterations: $want"
check 2 "$want" "$TMP/ref" --tensor-model-parallel-size 2 --sequence-parallel
check 2 "$want" "$TMP/ref" --context-parallel-size 2
check 2 "$want" "$TMP/ref" --expert-model-parallel-size 2
check 2 "$want" "$TMP/ref" --pipeline-model-parallel-size 2
check 2 "$want" "$TMP/ref" --use-distributed-optimizer
echo "OK"
