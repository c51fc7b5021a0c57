#!/bin/bash
# `dagatron train` with tensor parallelism against the single-rank run on the
# same global batch (issue 12, acceptance 1, dense model): TP=2, TP=4,
# TP=2 x DP=2 with the distributed optimizer (whose gradient norm sums the
# tp-split weights' shards over tp x dp and the replicated ones over dp
# only), and TP=2 with GQA (8 heads, 2 query groups) must log the
# single-rank run's lm loss and grad norm for each of 5 iterations, within
# 1e-5 relative, and end with its parameters (the checkpoints hold whole
# tensors, gathered over tp; compared within 1e-5 relative); and a TP=2 run
# resumed from the single-rank checkpoint continues as the single rank does.
# The vocabulary is split over tp (vocab-parallel embedding and cross
# entropy, tied and untied): 98 ids (--vocab-size 97 and the end of
# document) padded as Megatron pads, to a multiple of
# --make-vocab-size-divisible-by x tp (32 x 1, 32 x 2, 32 x 4: 128 rows in
# every run), so a wrong slice offset or a missing reduction over tp
# changes the loss. `dagatron generate` runs on the TP=2 checkpoint.
set -euo pipefail
exe=$1
# The architecture these tests were written for (SwiGLU, RMSNorm, RoPE, no
# biases, no dropout), dense: a key bias's gradient is zero in exact
# arithmetic, so Adam would steer it by rounding noise that differs with the
# layout.
ARCH=($(cat "$(dirname "$0")/../common/moe_arch.flags"))
common=("${ARCH[@]}" --mock-data --vocab-size 97 --num-layers 2 --hidden-size 64 --seq-length 32 --micro-batch-size 2
        --global-batch-size 8 --num-experts 0 --train-iters 5 --lr 1e-3 --log-interval 1
        --lr-decay-style constant --make-vocab-size-divisible-by 32)
mha=(--num-attention-heads 4)
gqa=(--num-attention-heads 8 --group-query-attention --num-query-groups 2)
FIELDS="lm loss: [0-9.E+-]+|grad norm: [0-9.]+"
args=("${common[@]}")
. "$(dirname "$0")/../common/train_equiv.sh" # run, check
ref=$(run "$TMP/ref" 1 "${mha[@]}")
echo "np 1 (single rank): $ref"
[ -n "$ref" ] || fail "the single-rank run logged nothing"
check 2 "$ref" "$TMP/ref" "${mha[@]}" --tensor-model-parallel-size 2
check 4 "$ref" "$TMP/ref" "${mha[@]}" --tensor-model-parallel-size 4
check 4 "$ref" "$TMP/ref" "${mha[@]}" --tensor-model-parallel-size 2 --use-distributed-optimizer --overlap-param-gather
# Resuming the single-rank checkpoint (whole tensors) at TP=2 keeps each
# rank's shards of it (weights and moments): 2 more iterations match the
# single rank's resume.
cont=(--load "$TMP/ref" --train-iters 7)
ref_cont=$(run "$TMP/ref_cont" 1 "${mha[@]}" "${cont[@]}")
echo "np 1 (single rank, resumed): $ref_cont"
[ -n "$ref_cont" ] || fail "the single-rank resume logged nothing"
check 2 "$ref_cont" "$TMP/ref_cont" "${mha[@]}" "${cont[@]}" --tensor-model-parallel-size 2
# A vocabulary padded for another tp (128 rows saved, 256 at tp 2 with
# --make-vocab-size-divisible-by 128) is one line naming the padding, exit 2.
set +e
$DG_MPIRUN -np 2 "$exe" train "${common[@]}" "${mha[@]}" "${cont[@]}" --tensor-model-parallel-size 2 \
    --make-vocab-size-divisible-by 128 >/dev/null 2>"$TMP/pad.err"
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "resume with another vocab padding: exit $rc, expected 2"
grep -q "vocab_size = 128, this run has 256 (--vocab-size (padded to a multiple of --make-vocab-size-divisible-by x tp))" \
    "$TMP/pad.err" || fail "resume with another vocab padding: $(cat "$TMP/pad.err")"
ref_untied=$(run "$TMP/ref_untied" 1 "${mha[@]}" --untie-embeddings-and-output-weights)
echo "np 1 (single rank, untied): $ref_untied"
[ -n "$ref_untied" ] || fail "the single-rank untied run logged nothing"
check 2 "$ref_untied" "$TMP/ref_untied" "${mha[@]}" --untie-embeddings-and-output-weights --tensor-model-parallel-size 2
# `dagatron generate` (one rank) reads the TP=2 checkpoint's gathered vocab
# tables: its greedy ids are the single-rank checkpoint's
gen() { "$exe" generate --load "$1" --prompt "5 17 3" --max-new-tokens 8 --greedy 2>/dev/null; }
g_ref=$(gen "$TMP/ref_untied") || fail "generate from the single-rank checkpoint"
g_tp=$(gen "$TMP/ck$n_check") || fail "generate from the TP=2 checkpoint"
echo "generate: single rank '$g_ref', TP=2 '$g_tp'"
[ -n "$g_tp" ] && [ "$g_tp" = "$g_ref" ] || fail "generate from the TP=2 checkpoint: '$g_tp', single rank '$g_ref'"
ref_gqa=$(run "$TMP/ref_gqa" 1 "${gqa[@]}")
echo "np 1 (single rank, GQA): $ref_gqa"
[ -n "$ref_gqa" ] || fail "the single-rank GQA run logged nothing"
check 2 "$ref_gqa" "$TMP/ref_gqa" "${gqa[@]}" --tensor-model-parallel-size 2
echo "OK"
