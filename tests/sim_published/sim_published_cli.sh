#!/usr/bin/env bash
# sim_published_cli.sh — `dagatron simulate --table published --row 22B`
# prints the table's header (predicted and published MFU side by side) and
# the row with its ratio and band verdict, and exits 0; an unknown row or an extra flag is
# refused with exit 2 and one line. (The whole table: the slow
# test_sim_published_all; by hand: `dagatron simulate --table published`.)
set -u
BIN=$DG_BUILD/dagatron
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
fail=0
"$BIN" simulate --table published --row 22B >"$TMP/out" 2>"$TMP/err"; rc=$?
cat "$TMP/out"
[ $rc -eq 0 ] || { echo "FAIL: exit $rc"; cat "$TMP/err"; fail=1; }
grep -q "MFU pred .*MFU pub .*ratio" "$TMP/out" || { echo "FAIL: no header with predicted and published MFU"; fail=1; }
grep -Eq "^GPT 22B +a100 +TP8 PP1 DP1 +8 +[0-9.]+ +[0-9.]+% +41.5% +[0-9.]+ +(yes|NO) " "$TMP/out" \
  || { echo "FAIL: no GPT 22B row with predicted beside published MFU"; fail=1; }
grep -Eq "^[01] of 1 rows within ±25%" "$TMP/out" || { echo "FAIL: no summary line"; fail=1; }
for bad in "--row nosuchmodel" "--bogus"; do
  # shellcheck disable=SC2086
  "$BIN" simulate --table published $bad >"$TMP/out2" 2>"$TMP/err2"; rc=$?
  [ $rc -eq 2 ] || { echo "FAIL: '$bad' exited $rc, expected 2"; fail=1; }
  [ "$(wc -l <"$TMP/err2")" -eq 1 ] || { echo "FAIL: '$bad': expected one line on stderr"; cat "$TMP/err2"; fail=1; }
done
exit $fail
