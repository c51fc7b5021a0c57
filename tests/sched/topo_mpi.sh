#!/bin/bash
# Acceptance 3: `dagatron topo` prints the topology and the placement, and
# under mpirun -np 2 the two ranks pin their compute worker to different cores.
# Its report lost to a full device is one line and exit 2 (issue 25, item 12).
set -euo pipefail
exe=$1
fail() { echo "FAIL: $*" >&2; exit 1; }

# single process: topology and placement lines, exit 0; bad flag: exit 2
out=$("$exe" topo)
echo "$out"
echo "$out" | grep -q "machine: .* core(s)" || fail "no machine line"
echo "$out" | grep -q "place thread=compute.0 " || fail "no placement of compute.0"
echo "$out" | grep -q "place thread=comm " || fail "no placement of the comm thread"
set +e
"$exe" topo --threads 0 2>/dev/null
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "--threads 0 exited $rc, expected 2"
# standard output on a full device: one line, exit 2 (it exited 0, the report lost)
set +e
err=$("$exe" topo 2>&1 >/dev/full)
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "topo >/dev/full exited $rc, expected 2"
[ "$err" = "dagatron: standard output: write failed: No space left on device" ] || fail "topo >/dev/full said: $err"

# two ranks: different cores
out=$($DG_MPIRUN -np 2 "$exe" topo)
echo "$out"
c0=$(echo "$out" | sed -n 's/^rank 0\/2: place thread=compute\.0 .* core=\([0-9-]*\) .*/\1/p')
c1=$(echo "$out" | sed -n 's/^rank 1\/2: place thread=compute\.0 .* core=\([0-9-]*\) .*/\1/p')
[ -n "$c0" ] && [ -n "$c1" ] || fail "missing compute.0 placement for a rank"
[ "$c0" != "$c1" ] || fail "both ranks on core $c0"
echo "OK: rank 0 on core $c0, rank 1 on core $c1"
