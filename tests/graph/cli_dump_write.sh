#!/usr/bin/env bash
# cli_dump_write.sh DAGATRON — `dagatron dump -o` never loses a file (issue
# 25, items 8 and 12): a write that fails (a full device, a full file
# mid-write, a read-only directory, a path under a file, standard output on
# a full device) is one line naming the file, exit 2; the old file is
# byte-identical, a device or a link to one is never removed, and no
# temporary is left. A dump that succeeds replaces the file, keeps a link
# pointing where it did and writes into /dev/stdout's file.
set -uo pipefail
exe=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "cli_dump_write: $*"; exit 1; }
. "$(dirname "$0")/../common/refuse.sh"
. "$(dirname "$0")/../common/write_fail.sh"

"$exe" dump -o "$TMP/good.json" || fail "a plain dump failed"

# a full device, named directly or through a link: reported, never removed
dev=$(dg_full_dev full)
dg_refuse "$dev: write failed: No space left on device" "$exe" dump --format json -o "$dev"
dg_still_dev "$dev"
ln -s /dev/full "$TMP/full.dot"
dg_refuse "full.dot: write failed: No space left on device" "$exe" dump -o "$TMP/full.dot"
[ "$(readlink "$TMP/full.dot")" = /dev/full ] || fail "the link to /dev/full was removed"

# standard output on a full device
dg_refuse "standard output: write failed: No space left on device" \
  bash -c '"$1" dump --format json -o - >/dev/full' _ "$exe"

# an old dump, and the disk fills mid-write: the old dump stays
echo '{"old": true}' >"$TMP/old.json"
dg_snap "$TMP/old.json"
dg_refuse "old.json: write failed: File too large" dg_fsize 4 "$exe" dump -o "$TMP/old.json"
dg_intact "a dump that filled the disk"
echo 'digraph old {}' >"$TMP/old.dot"
dg_snap "$TMP/old.dot"
dg_refuse "old.dot: write failed: File too large" dg_fsize 4 "$exe" dump -o "$TMP/old.dot"
dg_intact "a DOT dump that filled the disk"

# a path under a regular file, a directory
dg_refuse "good.json/x.json: cannot open for writing: Not a directory" "$exe" dump -o "$TMP/good.json/x.json"
mkdir "$TMP/d.json"
dg_refuse "d.json: cannot open for writing: Is a directory" "$exe" dump -o "$TMP/d.json"
[ -d "$TMP/d.json" ] || fail "the directory named by -o is gone"

# a read-only directory (a private read-only bind mount: root too is refused)
if dg_have_ro; then
  dg_refuse "old.json: cannot open for writing: Read-only file system" dg_ro "$TMP" "$exe" dump -o "$TMP/old.json"
  dg_intact "a dump into a read-only directory"
else
  echo "note: no mount namespace here: the read-only case did not run"
fi

# success: a link to a file keeps pointing at it, its file gets the dump
echo old >"$TMP/target.json"
ln -s target.json "$TMP/link.json"
"$exe" dump -o "$TMP/link.json" || fail "a dump through a link failed"
[ -L "$TMP/link.json" ] || fail "the link was replaced by a file"
cmp -s "$TMP/target.json" "$TMP/good.json" || fail "the link's file does not hold the dump"
"$exe" dump -o "$TMP/old.json" || fail "a dump over an old one failed"
cmp -s "$TMP/old.json" "$TMP/good.json" || fail "a dump over an old one differs from a fresh one"
# /dev/stdout into a file the shell opened: written there, not replaced
"$exe" dump --format json -o /dev/stdout >"$TMP/stdout.json" || fail "-o /dev/stdout failed"
cmp -s "$TMP/stdout.json" "$TMP/good.json" || fail "-o /dev/stdout differs from -o FILE"
! ls "$TMP" | grep -q '\.tmp-' || fail "a temporary was left behind: $(ls "$TMP")"
echo "cli_dump_write: ok"
