#!/usr/bin/env bash
# trace_write_fail.sh — `dagatron train --trace` that cannot be written
# (issue 25, item 8): onto a full device (one rank, and under mpirun where
# rank 0 writes the merged trace), over an old trace when the disk fills
# mid-write, into a read-only directory: exit 2 with one line naming the
# file (under mpirun: one line for every rank), the old trace byte-identical,
# the device still there, no temporary left. The training itself runs; the
# trace is written at the end.
set -uo pipefail
BIN=$DG_BUILD/dagatron
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "trace_write_fail: $*"; exit 1; }
. "$DG_SRC/tests/common/write_fail.sh"
ARCH=($(cat "$DG_SRC/tests/common/moe_arch.flags"))
ARGS=("${ARCH[@]}" --mock-data --vocab-size 100 --num-layers 1 --hidden-size 32 --num-attention-heads 2
      --seq-length 16 --num-experts 2 --micro-batch-size 1 --train-iters 2 --log-interval 1)
# refuse WANT CMD...: exit 2; one line on stderr beginning "dagatron" and
# holding WANT (under mpirun, its own report of the exit aside)
refuse() {
  local want=$1 rc=0
  shift
  "$@" >"$TMP/out" 2>"$TMP/err" || rc=$?
  [ "$rc" -eq 2 ] || fail "$*: exit $rc, expected 2 ($(cat "$TMP/err"))"
  [ "$(grep -c '^dagatron' "$TMP/err")" -eq 1 ] || fail "$*: expected one line, got: $(cat "$TMP/err")"
  grep '^dagatron' "$TMP/err" | grep -qF -- "$want" || fail "$*: '$(cat "$TMP/err")' lacks '$want'"
}

dev=$(dg_full_dev full)
refuse "--trace $dev: write failed: No space left on device" "$BIN" train "${ARGS[@]}" --trace "$dev"
dg_still_dev "$dev"
[ "$(grep -c '^dagatron' "$TMP/err")" -eq "$(wc -l <"$TMP/err")" ] || fail "more than the one line: $(cat "$TMP/err")"
echo '{"old": 1}' >"$TMP/old.json"
dg_snap "$TMP/old.json"
# the trace is ~24 KiB, the log far below 12
refuse "--trace $TMP/old.json: write failed: File too large" \
  dg_fsize 12 "$BIN" train "${ARGS[@]}" --trace "$TMP/old.json"
dg_intact "--trace over an old trace, the disk full"
if dg_have_ro; then
  refuse "Read-only file system" dg_ro "$TMP" "$BIN" train "${ARGS[@]}" --trace "$TMP/old.json"
  dg_intact "--trace into a read-only directory"
else
  echo "note: no mount namespace here: the read-only case did not run"
fi
if [ -n "${DG_MPIRUN:-}" ]; then
  refuse "--trace $dev: write failed: No space left on device" \
    $DG_MPIRUN -np 2 "$BIN" train "${ARGS[@]}" --global-batch-size 2 --trace "$dev"
  dg_still_dev "$dev"
fi
"$BIN" train "${ARGS[@]}" --trace "$TMP/old.json" >/dev/null 2>&1 || fail "train --trace over an old trace failed"
grep -q traceEvents "$TMP/old.json" || fail "train --trace did not replace the old trace"
! ls "$TMP" | grep -q '\.tmp-' || fail "a temporary was left behind: $(ls "$TMP")"
echo "trace_write_fail: ok"
