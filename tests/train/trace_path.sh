#!/usr/bin/env bash
# trace_path.sh — `dagatron train --trace PATH` checks PATH at start-up, as
# --save is checked: a path the trace cannot be written to is refused before
# iteration 1 (exit 2, one line naming --trace and the path; under mpirun
# one line for every rank), and the check leaves nothing behind: the
# directories it probed hold what they held, and a run that traces holds the
# trace and nothing else.
set -u
BIN=$DG_BUILD/dagatron
TMP=$(mktemp -d); trap 'chmod -R u+w "$TMP" 2>/dev/null; rm -rf "$TMP"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
source "$DG_SRC/tests/common/refuse.sh"
# Two iterations: the trace is of the second, so a late check would train
# (and log) iteration 1 first.
ARGS=(--mock-data --vocab-size 100 --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 16
      --micro-batch-size 2 --global-batch-size 4 --train-iters 2 --log-interval 1 --eval-iters 0)
W=$TMP/w # the paths tried (dg_refuse keeps its output in $TMP)
listing() { find "$W" | sort; }

mkdir -p "$W/d" && : >"$W/afile" && echo keep >"$W/d/other"
before=$(listing)
refused() { # want trace-path [launcher words...]
  local want=$1 path=$2 was=$fails
  shift 2
  dg_refuse "$want" "$@" "$BIN" train "${ARGS[@]}" --trace "$path"
  [ "$(listing)" = "$before" ] || fail "--trace $path: the directories changed: $(diff <(echo "$before") <(listing))"
  [ $fails = "$was" ] && echo "ok: ${*:+$* }--trace $path -> $(grep '^dagatron' "$TMP/refuse.err")"
}
refused "--trace $W/missing/t.json: directory $W/missing: No such file or directory" "$W/missing/t.json"
refused "--trace $W/d: is a directory" "$W/d"
refused "--trace $W/afile/t.json: $W/afile is not a directory" "$W/afile/t.json"
# A directory no file can be created in: permission bits where they bind,
# else (root) a read-only file system such as /sys.
if [ "$(id -u)" != 0 ]; then
  mkdir "$W/ro" && chmod 555 "$W/ro"
  before=$(listing)
  refused "--trace $W/ro/t.json: cannot write in $W/ro" "$W/ro/t.json"
elif ! touch /sys/.dg-trace-test 2>/dev/null; then
  refused "--trace /sys/t.json: cannot write in /sys" /sys/t.json
else
  rm -f /sys/.dg-trace-test
  echo "note: no unwritable directory here (root, /sys writable): that case is not run"
fi
if [ -n "${DG_MPIRUN:-}" ]; then
  refused "--trace $W/missing/t.json" "$W/missing/t.json" $DG_MPIRUN -np 2
fi

# A writable path: the run traces, and the directory holds the trace alone
# (the probe file is gone; the file beside it is untouched).
"$BIN" train "${ARGS[@]}" --trace "$W/d/t.json" >"$TMP/ok.out" 2>&1 || fail "--trace $W/d/t.json: exit $?: $(tail -3 "$TMP/ok.out")"
grep -q "trace of iteration 2 written to $W/d/t.json" "$TMP/ok.out" || fail "no trace written: $(tail -3 "$TMP/ok.out")"
[ "$(ls -A "$W/d" | sort | paste -sd' ')" = "other t.json" ] || fail "$W/d holds: $(ls -A "$W/d")"
[ "$(cat "$W/d/other")" = keep ] || fail "the file beside the trace changed"
[ $fails = 0 ] && echo "ok: a writable --trace path traces, and nothing else is left in its directory"
[ $fails = 0 ]
