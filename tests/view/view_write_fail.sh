#!/usr/bin/env bash
# view_write_fail.sh DAGATRON — `view -o` and `trace-svg -o` never lose a
# file (issue 25, items 8 and 12): onto a full device (named directly or
# through a link), over an old page when the disk fills mid-write, into a
# read-only directory, and with the summary's standard output on a full
# device: one line naming the file, exit 2; the old file byte-identical, the
# device and the link still there, no temporary left.
set -uo pipefail
exe=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "view_write_fail: $*"; exit 1; }
. "$(dirname "$0")/../common/refuse.sh"
. "$(dirname "$0")/../common/write_fail.sh"
trace=$(dirname "$0")/tiny_trace.json

dev=$(dg_full_dev full)
ln -s /dev/full "$TMP/link"
for cmd in view trace-svg; do
  dg_refuse "-o $dev: write failed: No space left on device" "$exe" "$cmd" --trace "$trace" -o "$dev"
  dg_still_dev "$dev"
  dg_refuse "-o $TMP/link: write failed: No space left on device" "$exe" "$cmd" --trace "$trace" -o "$TMP/link"
  [ "$(readlink "$TMP/link")" = /dev/full ] || fail "$cmd removed the link to /dev/full"
  dg_unsnap
  echo old >"$TMP/old.$cmd"
  dg_snap "$TMP/old.$cmd"
  dg_refuse "-o $TMP/old.$cmd: write failed: File too large" \
    dg_fsize 1 "$exe" "$cmd" --trace "$trace" -o "$TMP/old.$cmd"
  dg_intact "$cmd over an old file, the disk full"
  if dg_have_ro; then
    dg_refuse "-o $TMP/old.$cmd: cannot open for writing: Read-only file system" \
      dg_ro "$TMP" "$exe" "$cmd" --trace "$trace" -o "$TMP/old.$cmd"
    dg_intact "$cmd into a read-only directory"
  else
    echo "note: no mount namespace here: the read-only case did not run"
  fi
  dg_refuse "standard output: write failed: No space left on device" \
    bash -c '"$1" "$2" --trace "$3" -o "$4" >/dev/full' _ "$exe" "$cmd" "$trace" "$TMP/new.$cmd"
  # a run that succeeds replaces the old file
  "$exe" "$cmd" --trace "$trace" -o "$TMP/old.$cmd" >/dev/null || fail "$cmd over an old file failed"
  cmp -s "$TMP/old.$cmd" "$TMP/new.$cmd" || fail "$cmd over an old file differs from a new one"
done
! ls "$TMP" | grep -q '\.tmp-' || fail "a temporary was left behind: $(ls "$TMP")"
echo "view_write_fail: ok"
