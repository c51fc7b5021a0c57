#!/usr/bin/env bash
# sim_cli.sh — `dagatron simulate` through the CLI: a train command line
# simulates as it is and prints the table; bad input exits 2 with one line.
set -uo pipefail
D="$DG_BUILD/dagatron"
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
fail=0
ARGS=(--num-layers 2 --swiglu --disable-bias-linear --mock-data --vocab-size 64 --expert-model-parallel-size 2 --num-experts 4 --train-iters 10)
if ! "$D" simulate "${ARGS[@]}" --world-size 4 --pipeline-model-parallel-size 2 --trace "$TMP/t.json" \
     > "$TMP/out" 2> "$TMP/err"; then
  echo "simulate failed:"; cat "$TMP/out" "$TMP/err"; fail=1
fi
for w in "step time" "MFU" "exposed comm" "pipeline bubble" "planned MiB"; do
  grep -q "$w" "$TMP/out" || { echo "no '$w' in the table"; cat "$TMP/out"; fail=1; }
done
[ "$(grep -c '^  [01]  ' "$TMP/out")" = 2 ] || { echo "expected one row per stage"; cat "$TMP/out"; fail=1; }
[ -s "$TMP/t.json" ] || { echo "no trace written"; fail=1; }
bad() { # args... : exit 2, exactly one line on stderr naming $WANT
  "$D" simulate "$@" > "$TMP/o" 2> "$TMP/e"; rc=$?
  if [ $rc != 2 ] || [ "$(wc -l < "$TMP/e")" != 1 ] || ! grep -q -- "$WANT" "$TMP/e"; then
    echo "simulate $*: rc $rc, stderr:"; cat "$TMP/e"; fail=1
  fi
}
WANT=--bogus bad --bogus
WANT=nosuch bad "${ARGS[@]}" --device-profile nosuch
WANT=--emulate-link bad "${ARGS[@]}" --emulate-link 0,10
WANT="world size 3" bad "${ARGS[@]}" --world-size 3
WANT=--calibrate-from bad "${ARGS[@]}" --calibrate-from "$TMP/none.json"
WANT=--calibrate-from bad "${ARGS[@]}" --calibrate --calibrate-from "$TMP/none.json"
exit $fail
