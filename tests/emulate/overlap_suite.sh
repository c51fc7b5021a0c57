#!/usr/bin/env bash
# overlap_suite.sh (label slow) — bench/bench_overlap_suite.sh --quick runs
# every row (dp zero ep ep1 mb tp cp pp), each prints its on/off figures,
# the training rows end with bitwise equal losses on vs off and print the
# simulator's prediction, and the summary has a line per row. No timing
# threshold: the box is shared.
set -u
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
DG_BUILD=$DG_BUILD DG_MPIRUN=$DG_MPIRUN bash "$(dirname "$0")/../../bench/bench_overlap_suite.sh" --quick >"$TMP/out" 2>&1
rc=$?
fail=0
[ $rc -eq 0 ] || { echo "FAIL: the suite exited $rc"; fail=1; }
for row in dp zero ep mb tp cp pp; do
  grep -qE "bench_overlap: $row losses on vs off: (bitwise equal|equal within)" "$TMP/out" || { echo "FAIL: $row: no equal-losses line"; fail=1; }
  grep -q "bench_overlap: $row predicted: step time on/off" "$TMP/out" || { echo "FAIL: $row: no predicted line"; fail=1; }
  grep -qE "^$row +step time on/off = [0-9.]+" "$TMP/out" || { echo "FAIL: $row: no summary line"; fail=1; }
done
grep -qE "^ep1 +step time on/off = [0-9.]+" "$TMP/out" || { echo "FAIL: ep1: no summary line"; fail=1; }
[ $fail -eq 0 ] && echo "ok: every row of the overlap suite ran:" && grep -A20 '^== summary' "$TMP/out"
[ $fail -eq 0 ] || cat "$TMP/out"
exit $fail
