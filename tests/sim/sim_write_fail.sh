#!/usr/bin/env bash
# sim_write_fail.sh — `dagatron simulate` outputs that cannot be written
# (issue 25, items 8 and 12): --trace and --profile-out onto a full device,
# --trace over an old trace when the disk fills mid-write, both into a
# read-only directory, and the table with standard output on a full device:
# one line naming the file, exit 2; the old file byte-identical, the device
# still there, no temporary left.
set -uo pipefail
D="$DG_BUILD/dagatron"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "sim_write_fail: $*"; exit 1; }
. "$(dirname "$0")/../common/write_fail.sh"
# refuse WANT CMD...: exit 2 and one line on stderr beginning "dagatron" and
# holding WANT (the simulator's "simulate: stage ..." progress lines aside)
refuse() {
  local want=$1 rc=0
  shift
  "$@" >"$TMP/out" 2>"$TMP/err" || rc=$?
  grep -v '^simulate: stage ' "$TMP/err" >"$TMP/err1"
  [ "$rc" -eq 2 ] || fail "$*: exit $rc, expected 2 ($(cat "$TMP/err"))"
  [ "$(wc -l <"$TMP/err1")" -eq 1 ] || fail "$*: expected one line, got: $(cat "$TMP/err1")"
  grep '^dagatron' "$TMP/err1" | grep -qF -- "$want" || fail "$*: '$(cat "$TMP/err1")' lacks '$want'"
}
ARGS=(--num-layers 2 --swiglu --disable-bias-linear --mock-data --vocab-size 64 --num-experts 4 --train-iters 10
      --world-size 1)

"$D" simulate "${ARGS[@]}" --trace "$TMP/t.json" >/dev/null 2>&1 || fail "simulate --trace failed"
cal=(--calibrate --calibrate-from "$TMP/t.json")
"$D" simulate "${ARGS[@]}" "${cal[@]}" --profile-out "$TMP/p.json" >/dev/null 2>&1 || fail "--calibrate failed"

dev=$(dg_full_dev full)
refuse "--trace $dev: write failed: No space left on device" "$D" simulate "${ARGS[@]}" --trace "$dev"
dg_still_dev "$dev"
refuse "$dev: write failed: No space left on device" "$D" simulate "${ARGS[@]}" "${cal[@]}" --profile-out "$dev"
dg_still_dev "$dev"
echo '{"old": 1}' >"$TMP/old.json"
dg_snap "$TMP/old.json" "$TMP/p.json"
refuse "--trace $TMP/old.json: write failed: File too large" \
  dg_fsize 4 "$D" simulate "${ARGS[@]}" --trace "$TMP/old.json"
dg_intact "simulate --trace over an old trace, the disk full"
if dg_have_ro; then
  refuse "Read-only file system" dg_ro "$TMP" "$D" simulate "${ARGS[@]}" --trace "$TMP/old.json"
  refuse "Read-only file system" dg_ro "$TMP" "$D" simulate "${ARGS[@]}" "${cal[@]}" --profile-out "$TMP/p.json"
  dg_intact "simulate into a read-only directory"
else
  echo "note: no mount namespace here: the read-only cases did not run"
fi
refuse "standard output: write failed: No space left on device" \
  bash -c '"$1" simulate "${@:2}" >/dev/full' _ "$D" "${ARGS[@]}"
! ls "$TMP" | grep -q '\.tmp-' || fail "a temporary was left behind: $(ls "$TMP")"
echo "sim_write_fail: ok"
