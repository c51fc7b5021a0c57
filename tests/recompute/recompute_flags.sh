#!/usr/bin/env bash
# recompute_flags.sh — Megatron's consistency rules for the --recompute-*
# flags are bad input: exit 2 with one line naming the flag, before any work.
set -u
BIN=$DG_BUILD/dagatron
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
fail=0
ARGS=(--mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32
      --micro-batch-size 2 --train-iters 1 --eval-iters 0)
refused() { # expected-text flags...
  local want=$1; shift
  "$BIN" train "${ARGS[@]}" "$@" >"$TMP/out" 2>&1; local rc=$?
  local lines; lines=$(grep -c . "$TMP/out")
  if [ $rc = 2 ] && [ "$lines" = 1 ] && grep -qF -- "$want" "$TMP/out"; then echo "ok: $* -> $(cat "$TMP/out")"
  else echo "FAIL: $*: exit $rc, expected 2 and one line with '$want':"; cat "$TMP/out"; fail=1; fi
}
refused "--recompute-granularity full needs --recompute-method" --recompute-granularity full --recompute-num-layers 1
refused "--recompute-num-layers between 1 and --num-layers 2" --recompute-granularity full --recompute-method uniform
refused "--recompute-num-layers between 1 and --num-layers 2" --recompute-granularity full --recompute-method block --recompute-num-layers 3
refused "--recompute-method uniform: only with --recompute-granularity full" --recompute-activations --recompute-method uniform
refused "--recompute-num-layers 1: only with --recompute-granularity full" --recompute-granularity selective --recompute-num-layers 1
refused "--recompute-modules: only with --recompute-granularity selective" --recompute-modules core_attn
refused "--recompute-modules: unknown module 'attn'" --recompute-granularity selective --recompute-modules core_attn attn
refused "--recompute-memory-budget chooses what to recompute itself" --recompute-activations --recompute-memory-budget 10
refused "--recompute-granularity" --recompute-granularity partial
exit $fail
