#!/usr/bin/env bash
# sim_published_cli.sh — `dagatron simulate --table published` prints one row
# per published configuration with predicted and published MFU side by side,
# every row within ±25%, and exits 0; an extra flag is refused with exit 2.
set -u
BIN=$DG_BUILD/dagatron
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
fail=0
"$BIN" simulate --table published >"$TMP/out" 2>"$TMP/err"; rc=$?
cat "$TMP/out"
[ $rc -eq 0 ] || { echo "FAIL: exit $rc"; cat "$TMP/err"; fail=1; }
for m in "GPT 22B" "GPT 175B" "GPT 530B" "GPT 1T" "Mixtral 8x7B"; do
  grep -q "^$m .* yes " "$TMP/out" || { echo "FAIL: no row for $m within ±25%"; fail=1; }
done
grep -q "MFU pred .*MFU pub" "$TMP/out" || { echo "FAIL: no header with predicted and published MFU"; fail=1; }
grep -q "^5 of 5 rows within" "$TMP/out" || { echo "FAIL: not every row within ±25%"; fail=1; }
"$BIN" simulate --table published --bogus >"$TMP/out2" 2>"$TMP/err2"; rc=$?
[ $rc -eq 2 ] || { echo "FAIL: an extra flag exited $rc, expected 2"; fail=1; }
[ "$(wc -l <"$TMP/err2")" -eq 1 ] || { echo "FAIL: expected one line on stderr"; cat "$TMP/err2"; fail=1; }
exit $fail
