#!/bin/bash
# h on a real PP=2 trace (issue 25, item 15): `view` printed h = -0.087.
# h, the hidden fraction of a rank's communication, was taken as
# (T_compute + T_comm - T_span) / T_comm; under PP the span holds the
# pipeline's bubble, when neither stream runs, which that counted as exposed
# communication. h is the comm time that ran under compute over all comm
# (1 - exposed / T_comm, docs/viewer.md): this runs `mpirun -np 2 dagatron
# train --pipeline-model-parallel-size 2 --trace`, and checks every rank's
# printed h lies in [0, 1] and equals that figure worked out here from the
# trace's events (interval unions, independently of train/dg_trace_stats.c),
# and that the PP=2 step left idle time (span > compute + comm busy time),
# the case the old formula got wrong.
set -euo pipefail
exe=$1
here=$(dirname "$0")
fail() { echo "FAIL: $*" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
PY=${DG_REF_PYTHON:-/usr/bin/python3}
export OMPI_MCA_mpi_yield_when_idle=1
ARCH=($(cat "$here/../common/moe_arch.flags"))
$DG_MPIRUN -np 2 "$exe" train "${ARCH[@]}" --mock-data --vocab-size 100 --hidden-size 64 --seq-length 32 \
    --micro-batch-size 2 --num-experts 0 --train-iters 2 --lr 1e-3 --log-interval 1 --num-attention-heads 4 \
    --eval-iters 0 --compute-threads 1 --pipeline-model-parallel-size 2 --global-batch-size 8 \
    --trace "$TMP/pp2.json" >"$TMP/train.log" 2>&1 || fail "the PP=2 run failed: $(tail -3 "$TMP/train.log")"
"$exe" view --trace "$TMP/pp2.json" -o "$TMP/pp2.html" >"$TMP/view.out" || fail "view failed"
cat "$TMP/view.out"
"$PY" - "$TMP/pp2.json" "$TMP/view.out" <<'PY'
import json, re, sys
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e["ph"] == "X"]
def union(iv):
    out = []
    for a, b in sorted(iv):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out
def length(u):
    return sum(b - a for a, b in u)
def minus(m, c):  # length of m minus c, both disjoint and sorted
    s = 0.0
    for a, b in m:
        cut = sum(max(0.0, min(b, y) - max(a, x)) for x, y in c)
        s += (b - a) - cut
    return s
lines = re.findall(r"^  rank (\d+) .*hidden comm h = (-?[0-9.]+) .*\| span ([0-9.]+) us$", open(sys.argv[2]).read(), re.M)
if len(lines) != 2:
    sys.exit("expected a line for each of the 2 ranks, got %d" % len(lines))
for rank, h, span in lines:
    rank, h = int(rank), float(h)
    mine = [e for e in ev if e["pid"] == rank]
    comp = union([(e["ts"], e["ts"] + e["dur"]) for e in mine if e["tid"] == 0])
    comm = union([(e["ts"], e["ts"] + e["dur"]) for e in mine if e["tid"] == 1])
    tm = length(comm)
    if tm <= 0:
        sys.exit("rank %d: no communication in a PP=2 step" % rank)
    want = 1 - minus(comm, comp) / tm
    idle = float(span) - length(union(comp + comm))
    print("rank %d: h %.3f, from the events %.4f; %.0f us with neither stream running" % (rank, h, want, idle))
    if not 0 <= h <= 1:
        sys.exit("rank %d: h = %.3f is outside [0, 1]" % (rank, h))
    if abs(h - want) > 1.5e-3:
        sys.exit("rank %d: h = %.3f, but the comm time under compute over all comm is %.4f" % (rank, h, want))
    if idle <= 0:
        sys.exit("rank %d: the step left no idle time, which is what this test is about" % rank)
PY
# The trainer's own step line (sched/dg_sched.h) printed h = -2.9 for the
# same step: the same figure, in [0, 1].
grep -q "^   step [0-9]*: .*hidden comm h = " "$TMP/train.log" || fail "no step line with h in the run's log"
grep -o "hidden comm h = [-0-9.]*" "$TMP/train.log" | while read -r _ _ _ _ h; do
    awk -v h="$h" 'BEGIN { exit !(h >= 0 && h <= 1) }' || fail "the trainer printed h = $h, outside [0, 1]"
    echo "trainer: h = $h"
done
echo "OK"
