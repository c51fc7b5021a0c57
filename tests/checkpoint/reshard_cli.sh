#!/usr/bin/env bash
# reshard_cli.sh — issue 17, acceptance 1: a checkpoint saved under one
# layout loads under another, and the next iteration's lm loss equals the
# original run's own next iteration within 1e-6 (relative; the log prints 7
# significant digits), PP and CP included. Each case: the original layout trains 6 iterations,
# saving at 5 and 6; its tracker is put back on 5; the new layout resumes
# from iteration 5 and logs iteration 6. Also: every rank wrote a file and
# each tensor's stored slices tile it once (replicas written once).
# Usage: reshard_cli.sh DAGATRON
set -u
source "$(dirname "$0")/cli_common.sh" "$1"
# --make-vocab-size-divisible-by 32: the vocabulary pads to 32 x tp (Megatron's
# rule), 128 rows at tp 1, 2 and 4, so the layouts hold the same model
BASE=("${ARCH[@]}" --mock-data --vocab-size 100 --make-vocab-size-divisible-by 32 --num-layers 2 --hidden-size 64 --seq-length 32
      --micro-batch-size 2 --global-batch-size 8 --log-interval 1 --lr 3e-3 --lr-decay-style constant
      --eval-iters 0 --compute-threads 1 --train-iters 6)
MOE=(--num-attention-heads 4 --group-query-attention --num-query-groups 2 --num-experts 4 --moe-router-topk 2)
DENSE=(--num-attention-heads 4 --num-experts 0)
n=0
loss_at() { grep -oE "iteration +$2/.*lm loss: [0-9.E+-]+" "$1" | grep -oE "lm loss: [0-9.E+-]+" | awk '{print $3}'; }
# case NAME NP_A NP_B MIN_FILES "FLAGS_A" "FLAGS_B"
case_() {
  local name=$1 npa=$2 npb=$3 files=$4 fa=$5 fb=$6
  n=$((n + 1))
  local a="$TMP/a$n" b="$TMP/b$n"
  run "$npa" "$a.log" $fa --save "$a" --save-interval 5 || return
  "$PY" "$HERE/ckpt_tiles.py" "$a" "$files" || { echo "FAIL: $name: the saved checkpoint"; fail=1; }
  printf 5 >"$a/latest_checkpointed_iteration.txt"
  run "$npb" "$b.log" $fb --load "$a" --save "$b" || return
  grep -q "loaded checkpoint from $a at iteration 5" "$b.log" || { echo "FAIL: $name: did not resume at 5"; fail=1; }
  local want got
  want=$(loss_at "$a.log" 6); got=$(loss_at "$b.log" 6)
  if [ -n "$want" ] && [ -n "$got" ] &&
     awk -v a="$want" -v b="$got" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-6 * a) }'; then
    echo "ok: $name: iteration 6 lm loss $got, the original run's $want"
  else
    echo "FAIL: $name: iteration 6 lm loss '$got' after loading, the original run logged '$want'"; fail=1
  fi
}
case_ "EP=2 x DP=2 -> one rank" 4 1 4 "${MOE[*]} --expert-model-parallel-size 2" "${MOE[*]}"
case_ "one rank -> EP=4" 1 4 1 "${MOE[*]}" "${MOE[*]} --expert-model-parallel-size 4"
case_ "DP=2 distributed optimizer -> DP=4 distributed optimizer" 2 4 2 \
  "${MOE[*]} --use-distributed-optimizer" "${MOE[*]} --use-distributed-optimizer --ddp-bucket-size 7777"
case_ "DP=2 distributed optimizer -> one rank" 2 1 2 "${MOE[*]} --use-distributed-optimizer" "${MOE[*]}"
case_ "TP=2 -> TP=4" 2 4 2 "${DENSE[*]} --tensor-model-parallel-size 2" "${DENSE[*]} --tensor-model-parallel-size 4"
case_ "TP=4 -> TP=2 x DP=2 (async save)" 4 4 4 "${DENSE[*]} --tensor-model-parallel-size 4 --async-save" \
  "${DENSE[*]} --tensor-model-parallel-size 2"
# pipeline parallelism: a stage writes its layers' tensors, the tied
# embedding once (tests/checkpoint/pp_cli.sh has more)
case_ "PP=2 x EP=2 (async save) -> one rank" 4 1 4 \
  "${MOE[*]} --pipeline-model-parallel-size 2 --expert-model-parallel-size 2 --async-save" "${MOE[*]}"
case_ "PP=2 x TP=2 -> TP=2" 4 2 4 "${DENSE[*]} --pipeline-model-parallel-size 2 --tensor-model-parallel-size 2" \
  "${DENSE[*]} --tensor-model-parallel-size 2"
# context parallelism: parameters are replicated over cp, so a CP run's
# checkpoint is a TP/EP/DP layout's; the sequence split is runtime only
case_ "CP=2 x TP=2 -> one rank" 4 1 2 "${DENSE[*]} --context-parallel-size 2 --tensor-model-parallel-size 2" \
  "${DENSE[*]}"
case_ "one rank -> CP=2 x EP=2" 1 4 1 "${MOE[*]}" "${MOE[*]} --context-parallel-size 2 --expert-model-parallel-size 2"
exit $fail
