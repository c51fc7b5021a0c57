#!/bin/bash
# Attention dropout inside the fused attention in `dagatron train` (issue
# 29): --attention-dropout defaults to 0.1, as Megatron, and the fused op
# (what runs by default) draws it, counter-based, at each probability's
# global (sample, head, query, key):
#  - the default draws dropout: its training losses equal
#    --attention-dropout 0.1's and differ from --attention-dropout 0's, while
#    evaluation draws none (with --lr 0 the weights stay put, so the
#    validation losses of the two are equal);
#  - the fused op draws the unfused chain's mask (--attention-backend
#    unfused): the same losses within 1e-5;
#  - activation recompute (selective, full) redraws the same masks: the
#    same losses as without;
#  - TP=2 with SP (heads split: the key carries the rank's first head),
#    CP=2 with the ring (each block draws at its chunks' places) and with
#    all-to-all (its share of the heads), PP=2, and DP=2 with the
#    distributed optimizer match the single rank within 1e-5 over 5
#    iterations (losses, grad norms, final parameters); so does the ring
#    with a sliding window and learnable sinks, and TP=2 with SP x CP=2
#    all-to-all on 4 ranks.
#  - with --multi-latent-attention the default draws it too: the unfused
#    chain's mask, TP=2 with SP and CP=2 as the single rank.
# The op against the unfused chain, finite differences and the keep rate:
# test_attn_dropout.
set -euo pipefail
exe=$1
here=$(dirname "$0")
common=(--mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --num-attention-heads 4
        --group-query-attention --num-query-groups 2 --seq-length 32 --micro-batch-size 2 --global-batch-size 8
        --train-iters 5 --lr 1e-3 --log-interval 1 --eval-iters 0 --make-vocab-size-divisible-by 32)
# the dense GPT model of Megatron's defaults (GeLU, LayerNorm, biases); the
# key bias's gradient is zero in exact arithmetic, so a large epsilon and an
# absolute comparison of tiny tensors keep rounding noise out (as
# attn_variants_cli.sh)
args=("${common[@]}" --hidden-dropout 0 --adam-eps 1)
PARAMS_ATOL=1e-3
FIELDS="lm loss: [0-9.E+-]+|grad norm: [0-9.]+"
source "$here/../common/train_equiv.sh"

want=$(run "$TMP/ref" 1 --attention-dropout 0.1)
echo "np 1 --attention-dropout 0.1: $want"
[ -n "$want" ] || fail "the single-rank run logged nothing"
[ "$(run "$TMP/def" 1)" = "$want" ] || fail "the default differs from --attention-dropout 0.1"
[ "$(run "$TMP/none" 1 --attention-dropout 0)" != "$want" ] || fail "--attention-dropout 0.1 changed nothing"
unfused=$(run "$TMP/unf" 1 --attention-backend unfused)
awk -v a="$unfused" -v b="$want" -f "$here/../common/logs_close.awk" ||
    fail "the fused op's dropout differs from the unfused chain's: $unfused"
[ "$(run "$TMP/sel" 1 --recompute-granularity selective)" = "$want" ] ||
    fail "selective recompute drew other masks"
[ "$(run "$TMP/full" 1 --recompute-granularity full --recompute-method uniform --recompute-num-layers 1)" = "$want" ] ||
    fail "full recompute drew other masks"

# evaluation draws no dropout: with the weights fixed (--lr 0) the
# validation losses of the default and of --attention-dropout 0 agree, the
# training losses not
evalf=(--lr 0 --train-iters 2 --eval-interval 2 --eval-iters 2)
FIELDS="lm loss: [0-9.E+-]+"
train_d=$(run "$TMP/e1" 1 "${evalf[@]}")
train_0=$(run "$TMP/e0" 1 "${evalf[@]}" --attention-dropout 0)
[ "$train_d" != "$train_0" ] || fail "with --lr 0 the default's training losses equal --attention-dropout 0's"
FIELDS="lm loss value: [0-9.E+-]+"
val_d=$(run "$TMP/e1" 1 "${evalf[@]}")
val_0=$(run "$TMP/e0" 1 "${evalf[@]}" --attention-dropout 0)
echo "validation: default $val_d; --attention-dropout 0 $val_0"
[ -n "$val_d" ] && [ "$val_d" = "$val_0" ] || fail "evaluation drew attention dropout"
FIELDS="lm loss: [0-9.E+-]+|grad norm: [0-9.]+"

check 2 "$want" "$TMP/ref" --attention-dropout 0.1 --tensor-model-parallel-size 2 --sequence-parallel
check 2 "$want" "$TMP/ref" --attention-dropout 0.1 --context-parallel-size 2
check 2 "$want" "$TMP/ref" --attention-dropout 0.1 --context-parallel-size 2 --cp-comm-type a2a
check 2 "$want" "$TMP/ref" --attention-dropout 0.1 --pipeline-model-parallel-size 2
check 2 "$want" "$TMP/ref" --attention-dropout 0.1 --use-distributed-optimizer
# the ring's blocks of chunk pairs (a window) and the sinks folded after it
var=(--attention-dropout 0.1 --window-size 7,0 --softmax-type learnable)
want_var=$(run "$TMP/refv" 1 "${var[@]}")
check 2 "$want_var" "$TMP/refv" "${var[@]}" --context-parallel-size 2
# TP and CP's all-to-all together: the key's first head is the tp rank's
# offset plus the cp rank's share of that rank's heads
wide=(--attention-dropout 0.1 --num-attention-heads 8 --num-query-groups 4)
want_wide=$(run "$TMP/refw" 1 "${wide[@]}")
check 4 "$want_wide" "$TMP/refw" "${wide[@]}" --tensor-model-parallel-size 2 --sequence-parallel \
    --context-parallel-size 2 --cp-comm-type a2a

# multi-latent attention draws it in its fused op too (v zero-padded to the
# q/k head size: dropout acts on the probabilities alone): the unfused
# chain's mask, and TP=2 with SP and CP=2 match the single rank
args=(--mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32
      --micro-batch-size 2 --global-batch-size 8 --train-iters 5 --lr 1e-3 --log-interval 1 --eval-iters 0
      --make-vocab-size-divisible-by 32 --hidden-dropout 0 --position-embedding-type rope --normalization RMSNorm
      --swiglu --disable-bias-linear --multi-latent-attention --q-lora-rank 24 --kv-lora-rank 16 --qk-head-dim 8
      --qk-pos-emb-head-dim 8 --v-head-dim 12)
PARAMS_ATOL=
want_mla=$(run "$TMP/refm" 1)
echo "np 1 MLA, default dropout: $want_mla"
[ "$(run "$TMP/m0" 1 --attention-dropout 0)" != "$want_mla" ] || fail "MLA: the default dropout changed nothing"
unfused_mla=$(run "$TMP/mu" 1 --attention-backend unfused)
awk -v a="$unfused_mla" -v b="$want_mla" -f "$here/../common/logs_close.awk" ||
    fail "MLA: the fused op's dropout differs from the unfused chain's: $unfused_mla"
check 2 "$want_mla" "$TMP/refm" --tensor-model-parallel-size 2 --sequence-parallel
check 2 "$want_mla" "$TMP/refm" --context-parallel-size 2
echo "OK"
