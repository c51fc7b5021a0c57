#!/usr/bin/env bash
# recompute_trace.sh — issue 15, acceptance 4: the trace of a step with
# full and with selective recompute shows each recompute node after the
# forward and immediately before the backward that reads it
# (recompute_trace_check.py, against the step graph dumped with the same flags).
set -u
BIN=$DG_BUILD/dagatron
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
fail=0
ARGS=(--mock-data --vocab-size 100 --make-vocab-size-divisible-by 1 --num-layers 3 --hidden-size 64
      --num-attention-heads 4 --group-query-attention --num-query-groups 2 --seq-length 32 --swiglu
      --normalization RMSNorm --position-embedding-type rope --disable-bias-linear --hidden-dropout 0.1 --attention-dropout 0.1
      --num-experts 4 --moe-router-topk 2 --moe-ffn-hidden-size 48 --moe-layer-freq "([0]*1+[1]*2)"
      --micro-batch-size 2 --global-batch-size 4 --lr-warmup-iters 0 --untie-embeddings-and-output-weights
      --moe-aux-loss-coeff 1e-2 --moe-z-loss-coeff 1e-3 --ffn-hidden-size 128)
check() { # name group flags...
  local name=$1 group=$2; shift 2
  "$BIN" train "${ARGS[@]}" --train-iters 2 --eval-iters 0 --compute-threads 2 --trace "$TMP/t.json" "$@" \
    >"$TMP/train.log" 2>&1 || { echo "FAIL: $name: train exited $?"; cat "$TMP/train.log"; fail=1; return; }
  "$BIN" dump --graph step "${ARGS[@]}" "$@" -o "$TMP/step.json" >"$TMP/dump.log" 2>&1 \
    || { echo "FAIL: $name: dump exited $?"; cat "$TMP/dump.log"; fail=1; return; }
  echo -n "$name: "
  python3 "$DG_SRC/tests/recompute/recompute_trace_check.py" "$TMP/t.json" "$TMP/step.json" "$group" || fail=1
}
check "full uniform 1" 1 --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
check "full uniform 3" 3 --recompute-granularity full --recompute-method uniform --recompute-num-layers 3
check "selective" 1 --recompute-granularity selective --recompute-modules core_attn layernorm moe_act mlp
exit $fail
